#include "app/fleet_pulse.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace kvgate::app {
namespace {

uint64_t sum_counter(const prometheus::MetricFamily& f) {
  double total = 0;
  for (const auto& m : f.metric) total += m.counter.value;
  return static_cast<uint64_t>(total);
}

// The family's counters added up per value of `label`, in the order of the values.
LabelledCounts sum_counter_by(const prometheus::MetricFamily& f, std::string_view label) {
  std::map<std::string, uint64_t> sums;
  for (const auto& m : f.metric) {
    std::string value;
    for (const auto& l : m.label) {
      if (l.name == label) value = l.value;
    }
    sums[value] += static_cast<uint64_t>(m.counter.value);
  }
  return {sums.begin(), sums.end()};
}

// The family's histograms added bucket by bucket (its series share their bounds).
Buckets sum_histogram(const prometheus::MetricFamily& f) {
  Buckets b;
  for (const auto& m : f.metric) {
    const auto& buckets = m.histogram.bucket;
    if (b.bounds.empty()) {
      for (const auto& x : buckets) b.bounds.push_back(x.upper_bound);
      b.counts.assign(buckets.size(), 0);
    }
    for (size_t i = 0; i < buckets.size() && i < b.counts.size(); ++i) {
      b.counts[i] += buckets[i].cumulative_count;
    }
  }
  return b;
}

std::optional<double> ratio(uint64_t part, uint64_t whole) {
  if (whole == 0) return std::nullopt;
  return static_cast<double>(part) / static_cast<double>(whole);
}

std::optional<double> scaled(std::optional<double> v, double factor) {
  if (!v) return std::nullopt;
  return *v * factor;
}

// What a total grew by; a total that went down started again from zero (a worker re-added).
uint64_t grew(uint64_t before, uint64_t after) { return after >= before ? after - before : after; }

double per_second(uint64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0.0;
}

// The rates between two samples, `b` the later: what a point and the window both show.
PulsePoint between(const PulseTotals& a, const PulseTotals& b) {
  PulsePoint p{.unix_ms = b.unix_ms};
  const double dt = b.seconds - a.seconds;
  if (b.requests >= a.requests) p.requests_per_second = per_second(b.requests - a.requests, dt);
  if (b.prompt_tokens >= a.prompt_tokens && b.matched_tokens >= a.matched_tokens) {
    p.hit_ratio = ratio(b.matched_tokens - a.matched_tokens, b.prompt_tokens - a.prompt_tokens);
  }
  p.decision_p50_us = scaled(quantile_between(a.decision_seconds, b.decision_seconds, 0.5), 1e6);
  p.decision_p99_us = scaled(quantile_between(a.decision_seconds, b.decision_seconds, 0.99), 1e6);
  return p;
}

// Each label's growth from `a` to `b` (a label new since `a` counts from zero); `idle` keeps the
// labels that did not grow.
std::vector<WindowCount> counts_between(const LabelledCounts& a, const LabelledCounts& b,
                                        double seconds, bool idle) {
  absl::flat_hash_map<std::string_view, uint64_t> before;
  for (const auto& [name, n] : a) before[name] = n;
  std::vector<WindowCount> out;
  for (const auto& [name, now] : b) {
    const auto it = before.find(name);
    const uint64_t d = grew(it == before.end() ? 0 : it->second, now);
    if (d > 0 || idle)
      out.push_back({.name = name, .count = d, .per_second = per_second(d, seconds)});
  }
  return out;
}

WindowPercentiles percentiles_between(const Buckets& a, const Buckets& b, double factor) {
  WindowPercentiles p;
  if (!b.counts.empty()) p.count = grew(a.counts.empty() ? 0 : a.counts.back(), b.counts.back());
  p.p50 = scaled(quantile_between(a, b, 0.5), factor);
  p.p90 = scaled(quantile_between(a, b, 0.9), factor);
  p.p99 = scaled(quantile_between(a, b, 0.99), factor);
  return p;
}

// The gate's counters' growth; its gauges as `b` found them.
AdmissionStats admission_between(const AdmissionStats& a, const AdmissionStats& b) {
  AdmissionStats d{.running = b.running,
                   .queued = b.queued,
                   .queued_by_class = b.queued_by_class,
                   .refused_queue_full = grew(a.refused_queue_full, b.refused_queue_full),
                   .refused_timeout = grew(a.refused_timeout, b.refused_timeout),
                   .abandoned = grew(a.abandoned, b.abandoned),
                   .shed = grew(a.shed, b.shed),
                   .promoted = grew(a.promoted, b.promoted),
                   .waited = grew(a.waited, b.waited)};
  return d;
}

// Each worker's share of the requests sent between `a` and `b` (empty when none were sent).
std::vector<std::pair<std::string, double>> shares_between(const PulseTotals& a,
                                                           const PulseTotals& b) {
  const std::vector<WindowCount> sent = counts_between(a.dispatched, b.dispatched, 0, true);
  uint64_t total = 0;
  for (const WindowCount& c : sent) total += c.count;
  std::vector<std::pair<std::string, double>> shares;
  if (total == 0) return shares;
  for (const WindowCount& c : sent) {
    shares.emplace_back(c.name, static_cast<double>(c.count) / static_cast<double>(total));
  }
  return shares;
}

// The fleet cards' figures between `a` and `b`, the later.
void fill_fleet(const PulseTotals& a, const PulseTotals& b, PulseWindow& w) {
  const PulsePoint rates = between(a, b);
  w.requests_per_second = rates.requests_per_second;
  w.hit_ratio = rates.hit_ratio;
  w.decision_p50_us = rates.decision_p50_us;
  w.decision_p99_us = rates.decision_p99_us;
  w.apply_lag_p50_ms = scaled(quantile_between(a.apply_lag_seconds, b.apply_lag_seconds, 0.5), 1e3);
  w.apply_lag_p99_ms =
      scaled(quantile_between(a.apply_lag_seconds, b.apply_lag_seconds, 0.99), 1e3);
  w.decision_share = shares_between(a, b);
}

// The panels' figures between `a` and `b`: errors, latencies, tokens, admission.
void fill_traffic(const PulseTotals& a, const PulseTotals& b, PulseWindow& w) {
  w.requests_by_status =
      counts_between(a.requests_by_status, b.requests_by_status, w.seconds, true);
  w.errors_by_reason = counts_between(a.errors_by_reason, b.errors_by_reason, w.seconds, false);
  for (const WindowCount& c : w.errors_by_reason) w.errors += c.count;
  w.errors_per_second = per_second(w.errors, w.seconds);
  w.ttft_ms = percentiles_between(a.ttft_seconds, b.ttft_seconds, 1e3);
  w.request_ms = percentiles_between(a.request_seconds, b.request_seconds, 1e3);
  w.prompt_tokens_per_second = per_second(grew(a.prompt_tokens, b.prompt_tokens), w.seconds);
  w.completion_tokens_per_second =
      per_second(grew(a.completion_tokens, b.completion_tokens), w.seconds);
  w.admission = admission_between(a.admission, b.admission);
}

void read_family(const prometheus::MetricFamily& f, PulseTotals& t) {
  const std::string_view name = f.name;
  if (name == "kvgate_requests_total") {
    t.requests = sum_counter(f);
    t.requests_by_status = sum_counter_by(f, "status");
  } else if (name == "kvgate_request_errors_total") {
    t.errors_by_reason = sum_counter_by(f, "reason");
  } else if (name == "kvgate_router_prompt_tokens_total") {
    t.prompt_tokens = sum_counter(f);
  } else if (name == "kvgate_router_matched_tokens_total") {
    t.matched_tokens = sum_counter(f);
  } else if (name == "kvgate_completion_tokens_total") {
    t.completion_tokens = sum_counter(f);
  } else if (name == "kvgate_router_decision_seconds") {
    t.decision_seconds = sum_histogram(f);
  } else if (name == "kvgate_ttft_seconds") {
    t.ttft_seconds = sum_histogram(f);
  } else if (name == "kvgate_request_duration_seconds") {
    t.request_seconds = sum_histogram(f);
  } else if (name == "kvgate_events_apply_lag_seconds") {
    t.apply_lag_seconds = sum_histogram(f);
  } else if (name == "kvgate_events_gaps_total") {
    t.event_gaps = sum_counter(f);
  }
}

}  // namespace

PulseTotals read_registry_totals(const metrics::Registry& registry) {
  PulseTotals t;
  for (const prometheus::MetricFamily& f : registry.Collect()) read_family(f, t);
  return t;
}

std::optional<double> quantile_between(const Buckets& before, const Buckets& after, double q) {
  const size_t n = after.counts.size();
  if (n == 0 || after.bounds.size() != n) return std::nullopt;
  const auto delta = [&](size_t i) -> double {
    const uint64_t was = i < before.counts.size() ? before.counts[i] : 0;
    return after.counts[i] >= was ? static_cast<double>(after.counts[i] - was) : 0.0;
  };
  const double total = delta(n - 1);
  if (total <= 0) return std::nullopt;
  const double rank = q * total;
  double below = 0;  // observations in the buckets under bucket i
  for (size_t i = 0; i < n; ++i) {
    const double upto = delta(i);
    if (upto >= rank && upto > below) {
      const double lower = i == 0 ? 0.0 : after.bounds[i - 1];
      const double upper = after.bounds[i];
      // In the +Inf bucket: the highest finite bound, as histogram_quantile() answers.
      if (std::isinf(upper)) return lower;
      return lower + (upper - lower) * (rank - below) / (upto - below);
    }
    below = upto;
  }
  return std::nullopt;
}

FleetPulse::FleetPulse(size_t points, size_t keep_samples)
    : points_(points), keep_samples_(keep_samples < 1 ? 1 : keep_samples) {}

void FleetPulse::sample(PulseTotals totals) {
  MutexLock lock(&mu_);
  if (!recent_.empty()) {
    series_.push_back(between(recent_.back(), totals));
    while (series_.size() > points_) series_.pop_front();
  }
  recent_.push_back(std::move(totals));
  while (recent_.size() > keep_samples_ + 1) recent_.pop_front();
}

std::vector<PulsePoint> FleetPulse::series() const {
  MutexLock lock(&mu_);
  return {series_.begin(), series_.end()};
}

PulseWindow FleetPulse::window(size_t samples) const {
  MutexLock lock(&mu_);
  PulseWindow w;
  if (recent_.empty()) return w;
  const PulseTotals& last = recent_.back();
  w.event_gaps = last.event_gaps;
  w.admission = admission_between(last.admission, last.admission);
  if (recent_.size() < 2 || samples == 0) return w;
  const size_t span = std::min(samples, recent_.size() - 1);
  const PulseTotals& first = recent_[recent_.size() - 1 - span];
  w.seconds = last.seconds - first.seconds;
  fill_fleet(first, last, w);
  fill_traffic(first, last, w);
  return w;
}

}  // namespace kvgate::app
