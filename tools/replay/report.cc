#include "replay/report.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "kvgate/core/json_writer.h"

namespace kvgate::replay {
namespace {

void write_quantiles(JsonWriter& w, std::string_view key, const Quantiles& q) {
  w.key(key).begin_object().member("n", q.n).member("p50", q.p50).member("p90", q.p90);
  w.member("p99", q.p99).member("mean", q.mean).member("max", q.max).end_object();
}

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  }
  out.push_back('"');
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

Status make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i != dir.size() && dir[i] != '/') continue;
    const std::string part = dir.substr(0, i);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::PermissionDeniedError("cannot create " + part + ": " + std::strerror(errno));
    }
  }
  return Status();
}

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return absl::DataLossError("cannot write " + path);
  return Status();
}

}  // namespace

Quantiles quantiles(std::vector<double>& v) {
  Quantiles q;
  q.n = v.size();
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  auto at = [&](double p) {
    const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
  };
  q.p50 = at(0.50);
  q.p90 = at(0.90);
  q.p99 = at(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  q.mean = sum / static_cast<double>(v.size());
  q.max = v.back();
  return q;
}

bool is_good(const RequestRecord& r, double slo_ttft_ms, double slo_itl_ms) {
  if (!r.answered || r.ttft_s < 0) return false;
  if (r.ttft_s * 1e3 > slo_ttft_ms) return false;
  if (r.output_tokens > 1) {
    const double tpot_ms = (r.e2e_s - r.ttft_s) * 1e3 / static_cast<double>(r.output_tokens - 1);
    if (tpot_ms > slo_itl_ms) return false;
  }
  return true;
}

Summary summarize(const std::vector<RequestRecord>& records, const ReportConfig& config,
                  double duration_s) {
  Summary s;
  s.config = config;
  s.requests = records.size();
  s.duration_s = duration_s;
  for (const std::string& url : config.fleet_workers) s.workers[url];
  std::vector<double> ttft, itl, e2e, tpot, lag;
  bool events = false, mock = false;
  for (const RequestRecord& r : records) {
    lag.push_back(std::max(0.0, (r.actual_s - r.scheduled_s) * 1e3));
    if (!r.answered) {
      ++s.errors[r.error_kind.empty() ? "unknown" : r.error_kind];
      continue;
    }
    ++s.answered;
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s * 1e3);
    e2e.push_back(r.e2e_s * 1e3);
    for (float x : r.itl_s) itl.push_back(static_cast<double>(x) * 1e3);
    if (r.output_tokens > 1 && r.ttft_s >= 0) {
      tpot.push_back((r.e2e_s - r.ttft_s) * 1e3 / static_cast<double>(r.output_tokens - 1));
    }
    if (is_good(r, config.slo_ttft_ms, config.slo_itl_ms)) ++s.good;
    s.output_tokens += r.output_tokens;
    // The worker that computed the prompt: a pair's prefill.
    WorkerFigures& w = s.workers[r.prefill_worker.empty() ? r.worker : r.prefill_worker];
    ++w.requests;
    if (!r.prefill_worker.empty()) ++s.pd_pairs;
    if (!r.has_usage) {
      ++s.without_usage;
      continue;
    }
    if (r.cached_tokens > r.usage_prompt_tokens) ++s.bad_usage;
    s.prompt_tokens += r.usage_prompt_tokens;
    s.cached_tokens += r.cached_tokens;
    w.prompt_tokens += r.usage_prompt_tokens;
    w.cached_tokens += r.cached_tokens;
    if (r.oracle_tokens) {
      ++s.oracle_requests;
      s.oracle_tokens += *r.oracle_tokens;
      s.oracle_cached_tokens += r.cached_tokens;
      s.oracle_prompt_tokens += r.usage_prompt_tokens;
      if (r.cached_tokens > *r.oracle_tokens) ++s.cached_above_oracle;
      if (r.routed_oracle_tokens) {
        ++s.routed_requests;
        s.routed_oracle_tokens += *r.routed_oracle_tokens;
        s.routed_best_oracle_tokens += *r.oracle_tokens;
        s.routed_cached_tokens += r.cached_tokens;
        s.routed_to_best += *r.routed_oracle_tokens >= *r.oracle_tokens ? 1 : 0;
      }
      events |= r.oracle_source == OracleSource::kEvents;
      mock |= r.oracle_source == OracleSource::kMock;
    }
  }
  s.ttft_ms = quantiles(ttft);
  s.itl_ms = quantiles(itl);
  s.e2e_ms = quantiles(e2e);
  s.tpot_ms = quantiles(tpot);
  s.send_lag_ms = quantiles(lag);
  s.throughput_rps = ratio(static_cast<double>(s.answered), duration_s);
  s.output_tokens_per_s = ratio(static_cast<double>(s.output_tokens), duration_s);
  s.goodput_rps = ratio(static_cast<double>(s.good), duration_s);
  s.goodput_fraction = ratio(static_cast<double>(s.good), static_cast<double>(s.requests));
  s.prefix_reuse =
      ratio(static_cast<double>(s.cached_tokens), static_cast<double>(s.prompt_tokens));
  s.oracle_source = events && mock ? "mixed" : events ? "events" : mock ? "mock" : "none";
  s.oracle_reuse =
      ratio(static_cast<double>(s.oracle_tokens), static_cast<double>(s.oracle_prompt_tokens));
  s.hit_over_oracle =
      ratio(static_cast<double>(s.oracle_cached_tokens), static_cast<double>(s.oracle_tokens));
  if (!s.workers.empty() && s.answered > 0) {
    s.share_min = 1;
    for (auto& [url, w] : s.workers) {
      w.share = static_cast<double>(w.requests) / static_cast<double>(s.answered);
      s.share_min = std::min(s.share_min, w.share);
      s.share_max = std::max(s.share_max, w.share);
    }
    s.share_max_over_mean = s.share_max * static_cast<double>(s.workers.size());
  }
  if (config.disaggregated) s.pd_decode_alone = s.answered - s.pd_pairs;
  return s;
}

std::string summary_json(const Summary& s) {
  std::string out;
  JsonWriter w(&out);
  const ReportConfig& c = s.config;
  w.begin_object();
  w.key("config").begin_object().member("target", c.target).member("trace", c.trace);
  w.member("rows", c.rows).member("rows_selected", c.rows_selected).member("speedup", c.speedup);
  w.member("block_tokens", c.block_tokens).member("max_output_tokens", c.max_output_tokens);
  w.member("model", c.model).member("slo_ttft_ms", c.slo_ttft_ms);
  w.member("slo_itl_ms", c.slo_itl_ms).member("through_gateway", c.through_gateway);
  w.member("oracle", c.oracle_mode).end_object();
  w.member("requests", s.requests).member("answered", s.answered);
  w.member("failed", s.requests - s.answered).member("duration_s", s.duration_s);
  write_quantiles(w, "ttft_ms", s.ttft_ms);
  write_quantiles(w, "itl_ms", s.itl_ms);
  write_quantiles(w, "tpot_ms", s.tpot_ms);
  write_quantiles(w, "e2e_ms", s.e2e_ms);
  write_quantiles(w, "send_lag_ms", s.send_lag_ms);
  w.key("throughput").begin_object().member("requests_per_s", s.throughput_rps);
  w.member("output_tokens_per_s", s.output_tokens_per_s);
  w.member("output_tokens", s.output_tokens).end_object();
  w.key("goodput").begin_object().member("requests", s.good);
  w.member("requests_per_s", s.goodput_rps).member("fraction", s.goodput_fraction).end_object();
  w.key("prefix_reuse").begin_object().member("cached_tokens", s.cached_tokens);
  w.member("prompt_tokens", s.prompt_tokens).member("ratio", s.prefix_reuse);
  w.member("requests_without_usage", s.without_usage);
  w.member("cached_above_prompt", s.bad_usage).end_object();
  w.key("oracle").begin_object().member("source", s.oracle_source);
  w.member("requests", s.oracle_requests).member("oracle_tokens", s.oracle_tokens);
  w.member("cached_tokens", s.oracle_cached_tokens);
  w.member("prompt_tokens", s.oracle_prompt_tokens).member("oracle_reuse", s.oracle_reuse);
  w.member("hit_over_oracle", s.hit_over_oracle);
  w.member("requests_cached_above_oracle", s.cached_above_oracle);
  if (s.routed_requests > 0) {
    // hit/oracle = (routed / oracle) x (cached / routed): the decision, then what survived the
    // wait for admission.
    w.key("routing").begin_object().member("requests", s.routed_requests);
    w.member("routed_to_best_holder", s.routed_to_best);
    w.member("routed_oracle_tokens", s.routed_oracle_tokens);
    w.member("routed_over_oracle", ratio(static_cast<double>(s.routed_oracle_tokens),
                                         static_cast<double>(s.routed_best_oracle_tokens)));
    w.member("cached_over_routed", ratio(static_cast<double>(s.routed_cached_tokens),
                                         static_cast<double>(s.routed_oracle_tokens)));
    w.end_object();
  }
  if (s.oracle_stats) {
    const OracleStats& o = *s.oracle_stats;
    w.key("event_streams").begin_object().member("holders", o.holders);
    w.member("applied_batches", o.applied_batches).member("gaps", o.gaps);
    w.member("resyncs", o.resyncs).member("backlogged", o.backlogged);
    w.member("degraded_holders", o.degraded_holders);
    w.member("resident_blocks", o.resident_blocks).end_object();
  }
  w.end_object();
  w.key("workers").begin_object();
  for (const auto& [url, f] : s.workers) {
    w.key(url).begin_object().member("requests", f.requests).member("share", f.share);
    w.member("prompt_tokens", f.prompt_tokens).member("cached_tokens", f.cached_tokens);
    w.member("prefix_reuse",
             ratio(static_cast<double>(f.cached_tokens), static_cast<double>(f.prompt_tokens)));
    if (f.mock_records) w.member("mock_records", *f.mock_records);
    w.end_object();
  }
  w.end_object();
  w.key("share").begin_object().member("min", s.share_min).member("max", s.share_max);
  w.member("max_over_mean", s.share_max_over_mean).end_object();
  if (s.config.disaggregated) {
    w.key("pd").begin_object().member("pairs", s.pd_pairs);
    w.member("decode_alone", s.pd_decode_alone).end_object();
  }
  w.key("errors").begin_object();
  for (const auto& [kind, n] : s.errors) w.member(kind, n);
  w.end_object();
  w.end_object();
  out.push_back('\n');
  return out;
}

std::string requests_csv(const std::vector<RequestRecord>& records, double slo_ttft_ms,
                         double slo_itl_ms) {
  std::string out =
      "row,scheduled_s,actual_s,worker,status,answered,ttft_ms,e2e_ms,itl_mean_ms,itl_max_ms,"
      "prompt_tokens,cached_tokens,output_tokens,max_tokens,oracle_tokens,oracle_source,"
      "routed_oracle_tokens,good,"
      "response_id,error_kind,error,itl_ms\n";
  for (const RequestRecord& r : records) {
    double itl_sum = 0, itl_max = 0;
    for (float x : r.itl_s) {
      itl_sum += x;
      itl_max = std::max<double>(itl_max, x);
    }
    const double itl_mean = r.itl_s.empty() ? 0 : itl_sum / static_cast<double>(r.itl_s.size());
    out += std::to_string(r.row) + ',' + fmt("%.6f", r.scheduled_s) + ',' +
           fmt("%.6f", r.actual_s) + ',' + csv_field(r.worker) + ',' + std::to_string(r.status) +
           ',' + (r.answered ? "1" : "0") + ',' +
           (r.ttft_s >= 0 ? fmt("%.3f", r.ttft_s * 1e3) : "") + ',' +
           (r.e2e_s >= 0 ? fmt("%.3f", r.e2e_s * 1e3) : "") + ',' + fmt("%.3f", itl_mean * 1e3) +
           ',' + fmt("%.3f", itl_max * 1e3) + ',' + std::to_string(r.prompt_tokens) + ',' +
           (r.has_usage ? std::to_string(r.cached_tokens) : "") + ',' +
           std::to_string(r.output_tokens) + ',' + std::to_string(r.max_tokens) + ',' +
           (r.oracle_tokens ? std::to_string(*r.oracle_tokens) : "") + ',' +
           oracle_source_name(r.oracle_source) + ',' +
           (r.routed_oracle_tokens ? std::to_string(*r.routed_oracle_tokens) : "") + ',' +
           (is_good(r, slo_ttft_ms, slo_itl_ms) ? "1" : "0") + ',' + csv_field(r.response_id) +
           ',' + csv_field(r.error_kind) + ',' + csv_field(r.error) + ',';
    for (size_t i = 0; i < r.itl_s.size(); ++i) {
      if (i != 0) out.push_back(';');
      out += fmt("%.2f", static_cast<double>(r.itl_s[i]) * 1e3);
    }
    out.push_back('\n');
  }
  return out;
}

std::string text_report(const Summary& s) {
  const ReportConfig& c = s.config;
  std::string o;
  char buf[512];
  auto line = [&](const char* f, auto... args) {
    std::snprintf(buf, sizeof(buf), f, args...);
    o += buf;
  };
  line("kvgate-replay: %zu requests (rows %s) at %gx to %s (%s) in %.1f s\n", s.requests,
       c.rows.c_str(), c.speedup, c.target.c_str(), c.through_gateway ? "gateway" : "worker",
       s.duration_s);
  line("  answered       %zu of %zu", s.answered, s.requests);
  if (!s.errors.empty()) {
    o += ", errors:";
    for (const auto& [k, n] : s.errors) line(" %s %llu", k.c_str(), (unsigned long long)n);
  }
  o += "\n";
  line("  TTFT ms        p50 %.0f  p90 %.0f  p99 %.0f\n", s.ttft_ms.p50, s.ttft_ms.p90,
       s.ttft_ms.p99);
  line("  ITL ms         p50 %.1f  p90 %.1f  p99 %.1f\n", s.itl_ms.p50, s.itl_ms.p90, s.itl_ms.p99);
  line("  throughput     %.2f req/s, %.0f output tok/s\n", s.throughput_rps, s.output_tokens_per_s);
  line("  goodput        %.2f req/s, %.3f of requests (TTFT <= %g ms and ITL <= %g ms)\n",
       s.goodput_rps, s.goodput_fraction, c.slo_ttft_ms, c.slo_itl_ms);
  line("  prefix reuse   %.3f (cached / prompt tokens)\n", s.prefix_reuse);
  if (c.disaggregated) {
    line(
        "  prefill/decode %zu pairs (figures from their prefill workers), %zu computed by a decode "
        "worker alone\n",
        s.pd_pairs, s.pd_decode_alone);
  }
  if (s.oracle_requests > 0) {
    line("  hit/oracle     %.3f (oracle from %s: %.3f of prompt tokens reusable)\n",
         s.hit_over_oracle, s.oracle_source.c_str(), s.oracle_reuse);
    if (s.routed_requests > 0) {
      line(
          "  routing        %.3f of the oracle's tokens held by the chosen worker at arrival, "
          "%.3f of those still cached at admission\n",
          ratio(static_cast<double>(s.routed_oracle_tokens),
                static_cast<double>(s.routed_best_oracle_tokens)),
          ratio(static_cast<double>(s.routed_cached_tokens),
                static_cast<double>(s.routed_oracle_tokens)));
    }
  } else {
    o += "  hit/oracle     n/a (no oracle)\n";
  }
  line("  send lag ms    p50 %.1f  p99 %.1f (sent after due)\n", s.send_lag_ms.p50,
       s.send_lag_ms.p99);
  line("  workers        %zu, share min %.3f max %.3f (max/mean %.2f):", s.workers.size(),
       s.share_min, s.share_max, s.share_max_over_mean);
  for (const auto& [url, f] : s.workers) {
    const size_t colon = url.rfind(':');
    line(" %s %.3f", colon == std::string::npos ? url.c_str() : url.c_str() + colon, f.share);
  }
  o += "\n";
  return o;
}

Status write_outputs(const std::string& dir, const Summary& s,
                     const std::vector<RequestRecord>& records) {
  if (Status st = make_dirs(dir); !st.ok()) return st;
  if (Status st = write_file(dir + "/summary.json", summary_json(s)); !st.ok()) return st;
  return write_file(dir + "/requests.csv",
                    requests_csv(records, s.config.slo_ttft_ms, s.config.slo_itl_ms));
}

}  // namespace kvgate::replay
