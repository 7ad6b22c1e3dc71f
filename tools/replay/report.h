// The replay's report: summary.json, requests.csv and the compact text on stdout, all computed
// from the request records (docs/replay.md defines every figure).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/core/result.h"
#include "replay/oracle.h"
#include "replay/record.h"

namespace kvgate::replay {

struct ReportConfig {
  std::string target;
  std::string trace;
  std::string rows;
  size_t rows_selected = 0;
  double speedup = 1;
  uint32_t block_tokens = 512;
  uint64_t max_output_tokens = 0;
  std::string model;
  double slo_ttft_ms = 2000;
  double slo_itl_ms = 100;
  bool through_gateway = false;
  std::string oracle_mode;
  std::vector<std::string> fleet_workers;  // URLs: workers that served nothing still count
  bool disaggregated = false;  // the gateway's fleet has prefill workers (GET /workers roles)
};

struct Quantiles {
  size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
};
// Nearest-rank quantiles of `v` (sorted in place).
Quantiles quantiles(std::vector<double>& v);

struct WorkerFigures {
  uint64_t requests = 0;  // answered requests it served
  double share = 0;
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  std::optional<uint64_t> mock_records;  // the worker's own count of our requests
};

struct Summary {
  ReportConfig config;
  size_t requests = 0;
  size_t answered = 0;
  double duration_s = 0;  // from the start to the end of the last request
  Quantiles ttft_ms, itl_ms, e2e_ms, tpot_ms, send_lag_ms;
  double throughput_rps = 0;
  double output_tokens_per_s = 0;
  size_t good = 0;
  double goodput_rps = 0;
  double goodput_fraction = 0;  // of all requests
  uint64_t prompt_tokens = 0;   // answered requests with usage
  uint64_t cached_tokens = 0;
  uint64_t output_tokens = 0;
  size_t without_usage = 0;
  double prefix_reuse = 0;  // cached / prompt
  // Oracle (requests answered with usage and an oracle figure).
  std::string oracle_source;  // events, mock, mixed or none
  size_t oracle_requests = 0;
  uint64_t oracle_tokens = 0;
  uint64_t oracle_cached_tokens = 0;  // cached tokens of the same requests
  uint64_t oracle_prompt_tokens = 0;
  double oracle_reuse = 0;     // oracle / prompt
  double hit_over_oracle = 0;  // cached / oracle
  size_t cached_above_oracle = 0;
  // Requests with the event oracle's per-worker figure: what the chosen workers held at arrival.
  size_t routed_requests = 0;
  uint64_t routed_oracle_tokens = 0;
  uint64_t routed_best_oracle_tokens = 0;  // the oracle's figure for the same requests
  uint64_t routed_cached_tokens = 0;
  size_t routed_to_best = 0;  // requests whose worker held the oracle's prefix at arrival
  std::optional<OracleStats> oracle_stats;
  std::map<std::string, WorkerFigures> workers;
  double share_min = 0, share_max = 0, share_max_over_mean = 0;
  std::map<std::string, uint64_t> errors;
  size_t bad_usage = 0;  // cached > prompt tokens in a usage report
  // A disaggregated fleet: answers of prefill/decode pairs (their figures are the prefill's), and
  // answers a decode worker computed alone.
  size_t pd_pairs = 0;
  size_t pd_decode_alone = 0;
};

// A request is good when it was answered, its TTFT is within the TTFT SLO and its mean
// inter-token latency ((e2e - ttft) / (output tokens - 1)) within the ITL SLO.
bool is_good(const RequestRecord& r, double slo_ttft_ms, double slo_itl_ms);

Summary summarize(const std::vector<RequestRecord>& records, const ReportConfig& config,
                  double duration_s);

std::string summary_json(const Summary& s);
std::string requests_csv(const std::vector<RequestRecord>& records, double slo_ttft_ms,
                         double slo_itl_ms);
std::string text_report(const Summary& s);

// Writes summary.json and requests.csv into `dir` (created if missing).
Status write_outputs(const std::string& dir, const Summary& s,
                     const std::vector<RequestRecord>& records);

}  // namespace kvgate::replay
