// Predicted against reported cached tokens, per worker: on a fleet whose engines hash as the
// gateway does they agree; a worker whose engine uses another block size is found out, named in
// a warning, and shown in /metrics and /workers.
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "app/cache_report.h"
#include "gateway_fixture.h"
#include "kvgate/core/log.h"

namespace kvgate::app {
namespace {

TEST(CacheReport, PredictionStopsBeforeThePromptsLastToken) {
  EXPECT_EQ(predicted_cached_tokens(10, 300, 16), 160u);
  EXPECT_EQ(predicted_cached_tokens(30, 300, 16), 288u) << "18 whole blocks before token 300";
  EXPECT_EQ(predicted_cached_tokens(30, 288, 16), 272u) << "the last block holds the last token";
  EXPECT_EQ(predicted_cached_tokens(3, 0, 16), 0u);
  EXPECT_EQ(predicted_cached_tokens(3, 100, 0), 0u);
}

TEST(CacheReport, ReadsTheLastCachedTokensOfAnAnswer) {
  EXPECT_EQ(reported_cached_tokens(R"({"usage":{"prompt_tokens_details":{"cached_tokens":288}}})"),
            288u);
  EXPECT_EQ(reported_cached_tokens(R"({"meta_info":{"cached_tokens": 32,"e2e":1}})"), 32u);
  EXPECT_EQ(reported_cached_tokens("data: {\"cached_tokens\":1}\n\ndata: {\"cached_tokens\":7}"),
            7u);
  EXPECT_EQ(reported_cached_tokens(R"({"prompt_tokens_details":{"cached_tokens":null}})"),
            std::nullopt);
  EXPECT_EQ(reported_cached_tokens(R"({"usage":{"prompt_tokens":12}})"), std::nullopt);
  EXPECT_EQ(reported_cached_tokens(R"({"cached_tokens":99999999999999999999999})"), std::nullopt);
}

TEST(CacheReport, UsageIsAskedForInTheBodyItself) {
  EXPECT_EQ(*with_stream_usage(R"( {"prompt":"x","stream":true})"),
            R"( {"stream_options":{"include_usage":true},"prompt":"x","stream":true})");
  EXPECT_EQ(*with_stream_usage("{ }"), R"({"stream_options":{"include_usage":true} })");
  EXPECT_EQ(with_stream_usage("[1]"), std::nullopt);
  EXPECT_EQ(with_stream_usage(""), std::nullopt);
}

class CacheAgreementGateway : public GatewayTest {
 protected:
  // `prompts` prompts of 500 words, each sent `sends` times, alternately streamed (asking for
  // usage) and not; false if any answer failed.
  bool traffic(int prompts, int sends, const std::string& tag) {
    auto c = client();
    for (int s = 0; s < sends; ++s) {
      for (int i = 0; i < prompts; ++i) {
        std::string words;
        for (int k = 0; k < 500; ++k)
          words += tag + std::to_string(i) + "w" + std::to_string(k) + " ";
        const bool stream = (i + s) % 2 == 1;
        std::string body = completion(words, 1, stream);
        if (stream) body.insert(body.size() - 1, R"(,"stream_options":{"include_usage":true})");
        auto r = c.post("/v1/completions", body);
        if (!r.ok() || r->status != 200) return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the events land
    }
    return true;
  }
};

TEST_F(CacheAgreementGateway, EnginesThatHashAsTheGatewayDoesAgree) {
  for (int i = 0; i < 3; ++i) start_worker();
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0), url_of(1), url_of(2)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(3));
  ASSERT_TRUE(traffic(40, 3, "a"));
  uint64_t predicted = 0, reported = 0;
  const auto fleet = gateway_->registry().snapshot();
  for (const auto& w : fleet->workers) {
    predicted += w->cache_agreement().predicted_total();
    reported += w->cache_agreement().reported_total();
    EXPECT_FALSE(w->cache_agreement().disagreeing()) << w->url();
  }
  EXPECT_GT(reported, 40u * 2 * 500) << "every repeat found its prompt cached";
  EXPECT_GE(workers::CacheAgreement::agreement(predicted, reported), 0.98)
      << "predicted " << predicted << ", reported " << reported;
}

TEST_F(CacheAgreementGateway, AWorkerWithAnotherBlockSizeIsNamed) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto proxy_logger = log::get("proxy");
  proxy_logger->sinks().push_back(sink);
  start_worker();
  start_worker();
  // The odd one: 32-token blocks. The fleet's block size is the majority's 16, so the index
  // never matches what this engine publishes, while the engine finds its own blocks again.
  const std::string odd =
      start_worker_with([](mock::FleetOptions& o) { o.engine.block_size = 32; });
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0), url_of(1), odd};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(3));
  ASSERT_TRUE(wait_until(
      [&] {
        return gateway_->registry().snapshot()->block_size == 16 &&
               gateway_->registry().snapshot()->workers.size() == 3 &&
               gateway_->registry().snapshot()->workers[2]->info()->block_size == 32;
      },
      std::chrono::milliseconds(10000)));
  // Until enough repeats have landed on the odd worker for its agreement to be judged (a prompt
  // matching nowhere goes to any idle worker, so how many land there depends on timing: a slow
  // build may need more rounds).
  const auto fleet = gateway_->registry().snapshot();
  const workers::Worker& w = *fleet->workers[2];
  for (int round = 0; round < 6 && !w.cache_agreement().disagreeing(); ++round) {
    ASSERT_TRUE(traffic(60, 4, "b" + std::to_string(round)));
  }
  proxy_logger->flush();
  std::erase(proxy_logger->sinks(), sink);
  EXPECT_TRUE(w.cache_agreement().disagreeing());
  EXPECT_LT(w.cache_agreement().ratio(), 0.5);
  EXPECT_GT(w.cache_agreement().reported_total(), 0u);
  EXPECT_NE(captured.str().find("worker " + odd + ": its engine reports cached prompt tokens"),
            std::string::npos)
      << captured.str();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_FALSE(fleet->workers[i]->cache_agreement().disagreeing()) << fleet->workers[i]->url();
    EXPECT_EQ(captured.str().find("worker " + fleet->workers[i]->url() + ": its engine"),
              std::string::npos);
  }
  // The scrape and /workers show it.
  auto c = client();
  auto metrics = c.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  const double ratio =
      metric_value(metrics->body, "kvgate_cache_agreement_ratio{worker=\"" + odd + "\"}");
  EXPECT_GE(ratio, 0);
  EXPECT_LT(ratio, 0.5);
  EXPECT_GT(
      metric_value(metrics->body, "kvgate_cached_tokens_reported_total{worker=\"" + odd + "\"}"),
      0);
  auto workers_json = c.get("/workers");
  ASSERT_TRUE(workers_json.ok());
  EXPECT_NE(workers_json->body.find("\"disagreeing\":true"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::app
