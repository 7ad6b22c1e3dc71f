// FleetPulse: the fleet's recent history for the dashboard (GET /dashboard/state). Once a second
// the gateway reads its monotonic totals (requests answered by status class, request errors by
// reason, prompt, matched and completion tokens, the decision-time, first-token, request-duration
// and KV-event apply-lag histograms, event gaps, the admission gate's counters, requests sent to
// each worker) and the pulse keeps the differences: a ring of one-second points (requests/s, hit
// ratio, decision p50/p99) for the sparklines, and the last samples, from which window(n) gives
// the figures over the last n sample intervals for the cards and panels.
//
// Quantiles come from histogram bucket differences, interpolated linearly inside the bucket as
// Prometheus's histogram_quantile() does: they are as fine as the buckets (x2.5 apart for the
// decision time, x2 to x2.5 for request times), enough to see a change, not a benchmark.
//
// Threading: sample() and the readers may run on different threads; one lock, held for copies
// and for the arithmetic of a window.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/admission_gate.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/metrics/metrics.h"

namespace kvgate::app {

struct Buckets {
  std::vector<double> bounds;    // upper bounds, ascending, the last +Inf
  std::vector<uint64_t> counts;  // cumulative counts, one per bound
};

// Counters by one label's value, in the order of the values.
using LabelledCounts = std::vector<std::pair<std::string, uint64_t>>;

// What the gateway has counted since it started, read at one instant.
struct PulseTotals {
  double seconds = 0;  // a monotonic clock's reading
  int64_t unix_ms = 0;
  uint64_t requests = 0;
  LabelledCounts requests_by_status;  // "2xx", "4xx", "5xx"
  LabelledCounts errors_by_reason;    // kvgate_request_errors_total{reason}
  uint64_t prompt_tokens = 0;
  uint64_t matched_tokens = 0;
  uint64_t completion_tokens = 0;
  Buckets decision_seconds;
  Buckets ttft_seconds;     // streamed requests: arrival to the worker's first byte
  Buckets request_seconds;  // every route: arrival to the end of the answer
  Buckets apply_lag_seconds;
  uint64_t event_gaps = 0;
  AdmissionStats admission;
  LabelledCounts dispatched;  // per worker URL
};

// The totals kept in `registry` (kvgate_requests_total, kvgate_request_errors_total,
// kvgate_router_*_tokens_total, kvgate_completion_tokens_total, kvgate_router_decision_seconds,
// kvgate_ttft_seconds, kvgate_request_duration_seconds, kvgate_events_apply_lag_seconds,
// kvgate_events_gaps_total), each summed over its series; admission, dispatched, seconds and
// unix_ms are the caller's to fill.
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

// How many of one kind happened in a window, and per second.
struct WindowCount {
  std::string name;
  uint64_t count = 0;
  double per_second = 0;
};

// Quantiles of the observations in a window (nullopt without any).
struct WindowPercentiles {
  uint64_t count = 0;
  std::optional<double> p50, p90, p99;
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
  // Requests answered per status class (every class the registry lists, idle ones too).
  std::vector<WindowCount> requests_by_status;
  // Requests that ended without a worker's answer: the reasons that occurred in the window.
  std::vector<WindowCount> errors_by_reason;
  uint64_t errors = 0;
  double errors_per_second = 0;
  WindowPercentiles ttft_ms, request_ms;
  double prompt_tokens_per_second = 0;
  double completion_tokens_per_second = 0;
  // The admission gate's counters' increase over the window; running, queued and queued_by_class
  // as the last sample found them.
  AdmissionStats admission;
};

class FleetPulse {
 public:
  // Keeps `points` points and the last `keep_samples` sample intervals for window().
  explicit FleetPulse(size_t points = 300, size_t keep_samples = 60);

  void sample(PulseTotals totals);
  std::vector<PulsePoint> series() const;
  // The figures over the last `samples` sample intervals, or over all those kept when fewer.
  PulseWindow window(size_t samples) const;

 private:
  const size_t points_;
  const size_t keep_samples_;
  mutable Mutex mu_;
  std::deque<PulsePoint> series_ KVGATE_GUARDED_BY(mu_);
  std::deque<PulseTotals> recent_ KVGATE_GUARDED_BY(mu_);  // the kept samples, oldest first
};

}  // namespace kvgate::app
