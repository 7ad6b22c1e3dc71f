// Load signals of one worker and the overload rule.
//
// Two sources feed a worker's load: the gateway's own count of requests it has in flight there
// (exact, instant) and the engine's load report, polled on an interval (the engine's queue, which
// also holds other clients' traffic, and its KV usage). A worker is overloaded when its KV usage
// or its waiting queue crosses the configured thresholds; the policy steers around it.
#pragma once

#include <cstdint>
#include <optional>

#include "kvgate/core/clock.h"

namespace kvgate::workers {

// What an engine says about itself (mock: GET /load; vLLM: its /metrics gauges).
struct EngineLoad {
  uint32_t running = 0;                // sequences in the running batch
  uint32_t waiting = 0;                // requests queued, not yet scheduled
  double kv_usage = 0;                 // fraction of the KV pool in use, 0..1
  uint64_t queued_prefill_tokens = 0;  // uncached prompt tokens not yet prefilled (0 if unknown)
  friend bool operator==(const EngineLoad&, const EngineLoad&) = default;
};

struct OverloadThresholds {
  // A worker at or above this KV usage is overloaded (nullopt: rule off).
  std::optional<double> token_usage = 0.8;
  // A worker with at least this many waiting requests is overloaded (nullopt: rule off).
  std::optional<uint32_t> waiting_requests = 8;
  // A worker with at least this many requests in flight from the gateway fleet (this replica's
  // and, with state sync, its peers') is overloaded (nullopt: rule off). Instant, where the
  // engine's own figures arrive with its next load report.
  std::optional<uint32_t> in_flight_requests;
  // A worker with at least this many of this replica's requests waiting for their first token is
  // overloaded (nullopt: rule off; --worker-max-prefilling). Instant: a prompt leaves the count
  // when its first token (or whole answer) comes back.
  std::optional<uint32_t> prefilling_requests;
};

// The overload rule's definition (OverloadRule is the form a routing pass uses, and must agree).
// `fleet_in_flight`: the gateway fleet's requests in flight at the worker (or rank);
// `prefilling`: this replica's requests there without a first token.
inline bool is_overloaded(const EngineLoad& load, const OverloadThresholds& t,
                          int32_t fleet_in_flight = 0, int32_t prefilling = 0) {
  if (t.token_usage && load.kv_usage >= *t.token_usage) return true;
  if (t.waiting_requests && load.waiting >= *t.waiting_requests) return true;
  if (t.in_flight_requests && fleet_in_flight >= 0 &&
      static_cast<uint32_t>(fleet_in_flight) >= *t.in_flight_requests) {
    return true;
  }
  if (t.prefilling_requests && prefilling >= 0 &&
      static_cast<uint32_t>(prefilling) >= *t.prefilling_requests) {
    return true;
  }
  return false;
}

// is_overloaded() with its thresholds resolved to integers once, for a pass over a whole fleet:
// the same verdict for every load, the KV usage compared in the parts per million workers keep
// (Worker::RoutingFigures; a usage is kv_usage_ppm / 1e6).
class OverloadRule {
 public:
  explicit OverloadRule(const OverloadThresholds& t);
  bool overloaded(uint32_t kv_usage_ppm, uint32_t waiting, int32_t fleet_in_flight,
                  int32_t prefilling = 0) const {
    return kv_usage_ppm >= kv_usage_ppm_ || waiting >= waiting_ || fleet_in_flight >= in_flight_ ||
           prefilling >= prefilling_;
  }

 private:
  uint64_t kv_usage_ppm_;  // the least usage in ppm that is overloaded (above 1e6: never)
  uint64_t waiting_;       // 2^32: never
  int64_t in_flight_;      // 2^32: never
  int64_t prefilling_;     // 2^32: never
};

}  // namespace kvgate::workers
