// FleetPulse: the fleet's recent history for the dashboard (GET /dashboard/state). Once a second
// the gateway reads its monotonic totals (requests answered, prompt and matched tokens, the
// decision-time and KV-event apply-lag histograms, event gaps, requests sent to each worker) and
// the pulse keeps the differences: a ring of points (requests/s, hit ratio, decision p50/p99) for
// the sparklines, and the figures over the last window for the cards and the per-worker share of
// recent decisions.
//
// Quantiles come from histogram bucket differences, interpolated linearly inside the bucket as
// Prometheus's histogram_quantile() does: they are as fine as the buckets (x2.5 apart for the
// decision time), enough to see a change, not a benchmark.
//
// Threading: sample() and the readers may run on different threads; one lock, held for copies.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvgate/core/thread_annotations.h"
#include "kvgate/metrics/metrics.h"

namespace kvgate::app {

struct Buckets {
  std::vector<double> bounds;    // upper bounds, ascending, the last +Inf
  std::vector<uint64_t> counts;  // cumulative counts, one per bound
};

// What the gateway has counted since it started, read at one instant.
struct PulseTotals {
  double seconds = 0;  // a monotonic clock's reading
  int64_t unix_ms = 0;
  uint64_t requests = 0;
  uint64_t prompt_tokens = 0;
  uint64_t matched_tokens = 0;
  Buckets decision_seconds;
  Buckets apply_lag_seconds;
  uint64_t event_gaps = 0;
  std::vector<std::pair<std::string, uint64_t>> dispatched;  // per worker URL
};

// The totals kept in `registry` (kvgate_requests_total, kvgate_router_*_tokens_total,
// kvgate_router_decision_seconds, kvgate_events_apply_lag_seconds, kvgate_events_gaps_total),
// each summed over its series; dispatched, seconds and unix_ms are the caller's to fill.
PulseTotals read_registry_totals(const metrics::Registry& registry);

// The q-quantile (0..1) of the observations between `before` and `after` (the same bounds), or
// nullopt when there were none.
std::optional<double> quantile_between(const Buckets& before, const Buckets& after, double q);

struct PulsePoint {
  int64_t unix_ms = 0;
  double requests_per_second = 0;
  std::optional<double> hit_ratio;  // matched / prompt tokens routed in the interval
  std::optional<double> decision_p50_us;
  std::optional<double> decision_p99_us;
};

struct PulseWindow {
  double seconds = 0;  // what the window spans (0 before two samples)
  double requests_per_second = 0;
  std::optional<double> hit_ratio;
  std::optional<double> decision_p50_us, decision_p99_us;
  std::optional<double> apply_lag_p50_ms, apply_lag_p99_ms;
  uint64_t event_gaps = 0;  // since start
  // Each worker's share of the requests sent in the window (absent: none sent anywhere).
  std::vector<std::pair<std::string, double>> decision_share;
};

class FleetPulse {
 public:
  // Keeps `points` points; the window spans `window_samples` sample intervals.
  explicit FleetPulse(size_t points = 300, size_t window_samples = 10);

  void sample(PulseTotals totals);
  std::vector<PulsePoint> series() const;
  PulseWindow window() const;

 private:
  const size_t points_;
  const size_t window_samples_;
  mutable Mutex mu_;
  std::deque<PulsePoint> series_ KVGATE_GUARDED_BY(mu_);
  std::deque<PulseTotals> recent_ KVGATE_GUARDED_BY(mu_);  // the window's samples, oldest first
};

}  // namespace kvgate::app
