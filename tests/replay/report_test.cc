#include "replay/report.h"

#include <gtest/gtest.h>

#include <sstream>

#include "simdjson.h"

namespace kvgate::replay {
namespace {

RequestRecord answered(std::string worker, double ttft_s, double e2e_s, uint64_t out,
                       uint64_t prompt, uint64_t cached, std::optional<uint64_t> oracle) {
  RequestRecord r;
  r.worker = std::move(worker);
  r.status = 200;
  r.answered = true;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.output_tokens = out;
  r.prompt_tokens = prompt;
  r.has_usage = true;
  r.usage_prompt_tokens = prompt;
  r.cached_tokens = cached;
  r.oracle_tokens = oracle;
  r.oracle_source = oracle ? OracleSource::kEvents : OracleSource::kNone;
  for (uint64_t i = 1; i < out; ++i) {
    r.itl_s.push_back(static_cast<float>((e2e_s - ttft_s) / static_cast<double>(out - 1)));
  }
  return r;
}

TEST(Quantiles, NearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const Quantiles q = quantiles(v);
  EXPECT_EQ(q.n, 100u);
  EXPECT_EQ(q.p50, 50);
  EXPECT_EQ(q.p90, 90);
  EXPECT_EQ(q.p99, 99);
  EXPECT_EQ(q.max, 100);
  EXPECT_DOUBLE_EQ(q.mean, 50.5);
  std::vector<double> one{7};
  EXPECT_EQ(quantiles(one).p99, 7);
  std::vector<double> none;
  EXPECT_EQ(quantiles(none).n, 0u);
}

TEST(Goodput, BothSlos) {
  // TTFT 1 s, 11 tokens over 1 s more: 100 ms per token.
  const RequestRecord r = answered("w", 1.0, 2.0, 11, 100, 0, std::nullopt);
  EXPECT_TRUE(is_good(r, 1000, 100));
  EXPECT_FALSE(is_good(r, 999, 100));
  EXPECT_FALSE(is_good(r, 1000, 99));
  RequestRecord failed = r;
  failed.answered = false;
  EXPECT_FALSE(is_good(failed, 1e9, 1e9));
}

TEST(Summarize, FiguresAndInvariants) {
  std::vector<RequestRecord> recs;
  recs.push_back(answered("http://a:1", 0.1, 1.1, 11, 1000, 500, 600));
  recs.push_back(answered("http://a:1", 0.2, 1.2, 11, 1000, 0, 0));
  recs.push_back(answered("http://b:2", 3.0, 4.0, 11, 2000, 1000, 1000));
  RequestRecord bad;
  bad.error_kind = "http_503";
  recs.push_back(bad);
  RequestRecord cut;
  cut.error_kind = "incomplete";
  recs.push_back(cut);
  ReportConfig c;
  c.slo_ttft_ms = 2000;
  c.slo_itl_ms = 150;
  c.fleet_workers = {"http://a:1", "http://b:2", "http://c:3"};
  const Summary s = summarize(recs, c, 10.0);
  EXPECT_EQ(s.requests, 5u);
  EXPECT_EQ(s.answered, 3u);
  EXPECT_EQ(s.good, 2u);  // the third misses the TTFT SLO
  EXPECT_DOUBLE_EQ(s.goodput_rps, 0.2);
  EXPECT_DOUBLE_EQ(s.goodput_fraction, 0.4);
  EXPECT_DOUBLE_EQ(s.throughput_rps, 0.3);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 3.3);
  EXPECT_DOUBLE_EQ(s.prefix_reuse, 1500.0 / 4000.0);
  EXPECT_DOUBLE_EQ(s.hit_over_oracle, 1500.0 / 1600.0);
  EXPECT_DOUBLE_EQ(s.oracle_reuse, 1600.0 / 4000.0);
  EXPECT_EQ(s.oracle_source, "events");
  EXPECT_EQ(s.errors.at("http_503"), 1u);
  EXPECT_EQ(s.errors.at("incomplete"), 1u);
  ASSERT_EQ(s.workers.size(), 3u);  // c served nothing and still counts
  double share = 0;
  for (const auto& [url, w] : s.workers) share += w.share;
  EXPECT_DOUBLE_EQ(share, 1.0);
  EXPECT_DOUBLE_EQ(s.share_min, 0.0);
  EXPECT_DOUBLE_EQ(s.share_max, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.share_max_over_mean, 2.0);
  EXPECT_EQ(s.ttft_ms.p50, 200);
  EXPECT_EQ(s.itl_ms.n, 30u);
}

TEST(Summarize, OutputsParse) {
  std::vector<RequestRecord> recs{answered("http://a:1", 0.1, 0.5, 3, 64, 16, 32)};
  recs[0].error = "has, comma \"and\" quotes";
  ReportConfig c;
  c.target = "http://gw:1";
  Summary s = summarize(recs, c, 1.0);
  s.oracle_stats = OracleStats{.holders = 8, .applied_batches = 10};
  const std::string json = summary_json(s);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(doc["answered"].get_uint64().value(), 1u);
  EXPECT_DOUBLE_EQ(doc["oracle"]["hit_over_oracle"].get_double().value(), 0.5);
  EXPECT_EQ(doc["oracle"]["event_streams"]["holders"].get_uint64().value(), 8u);
  EXPECT_DOUBLE_EQ(doc["workers"]["http://a:1"]["share"].get_double().value(), 1.0);
  const std::string csv = requests_csv(recs, 2000, 100);
  std::istringstream in(csv);
  std::string header, line, extra;
  std::getline(in, header);
  std::getline(in, line);
  EXPECT_FALSE(std::getline(in, extra));
  EXPECT_EQ(header.substr(0, 4), "row,");
  EXPECT_NE(line.find("\"has, comma \"\"and\"\" quotes\""), std::string::npos) << line;
  EXPECT_NE(text_report(s).find("hit/oracle     0.500"), std::string::npos) << text_report(s);
}

}  // namespace
}  // namespace kvgate::replay
