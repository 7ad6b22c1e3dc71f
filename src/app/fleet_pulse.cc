#include "app/fleet_pulse.h"

#include <cmath>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace kvgate::app {
namespace {

uint64_t sum_counter(const prometheus::MetricFamily& f) {
  double total = 0;
  for (const auto& m : f.metric) total += m.counter.value;
  return static_cast<uint64_t>(total);
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

// The rates between two samples, `b` the later: what a point and the window both show.
PulsePoint between(const PulseTotals& a, const PulseTotals& b) {
  PulsePoint p{.unix_ms = b.unix_ms};
  const double dt = b.seconds - a.seconds;
  if (dt > 0 && b.requests >= a.requests) {
    p.requests_per_second = static_cast<double>(b.requests - a.requests) / dt;
  }
  if (b.prompt_tokens >= a.prompt_tokens && b.matched_tokens >= a.matched_tokens) {
    p.hit_ratio = ratio(b.matched_tokens - a.matched_tokens, b.prompt_tokens - a.prompt_tokens);
  }
  p.decision_p50_us = scaled(quantile_between(a.decision_seconds, b.decision_seconds, 0.5), 1e6);
  p.decision_p99_us = scaled(quantile_between(a.decision_seconds, b.decision_seconds, 0.99), 1e6);
  return p;
}

}  // namespace

PulseTotals read_registry_totals(const metrics::Registry& registry) {
  PulseTotals t;
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    const std::string_view name = f.name;
    if (name == "kvgate_requests_total") {
      t.requests = sum_counter(f);
    } else if (name == "kvgate_router_prompt_tokens_total") {
      t.prompt_tokens = sum_counter(f);
    } else if (name == "kvgate_router_matched_tokens_total") {
      t.matched_tokens = sum_counter(f);
    } else if (name == "kvgate_router_decision_seconds") {
      t.decision_seconds = sum_histogram(f);
    } else if (name == "kvgate_events_apply_lag_seconds") {
      t.apply_lag_seconds = sum_histogram(f);
    } else if (name == "kvgate_events_gaps_total") {
      t.event_gaps = sum_counter(f);
    }
  }
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

FleetPulse::FleetPulse(size_t points, size_t window_samples)
    : points_(points), window_samples_(window_samples < 1 ? 1 : window_samples) {}

void FleetPulse::sample(PulseTotals totals) {
  MutexLock lock(&mu_);
  if (!recent_.empty()) {
    series_.push_back(between(recent_.back(), totals));
    while (series_.size() > points_) series_.pop_front();
  }
  recent_.push_back(std::move(totals));
  while (recent_.size() > window_samples_ + 1) recent_.pop_front();
}

std::vector<PulsePoint> FleetPulse::series() const {
  MutexLock lock(&mu_);
  return {series_.begin(), series_.end()};
}

PulseWindow FleetPulse::window() const {
  MutexLock lock(&mu_);
  PulseWindow w;
  if (recent_.empty()) return w;
  const PulseTotals& last = recent_.back();
  w.event_gaps = last.event_gaps;
  if (recent_.size() < 2) return w;
  const PulseTotals& first = recent_.front();
  w.seconds = last.seconds - first.seconds;
  const PulsePoint rates = between(first, last);
  w.requests_per_second = rates.requests_per_second;
  w.hit_ratio = rates.hit_ratio;
  w.decision_p50_us = rates.decision_p50_us;
  w.decision_p99_us = rates.decision_p99_us;
  w.apply_lag_p50_ms =
      scaled(quantile_between(first.apply_lag_seconds, last.apply_lag_seconds, 0.5), 1e3);
  w.apply_lag_p99_ms =
      scaled(quantile_between(first.apply_lag_seconds, last.apply_lag_seconds, 0.99), 1e3);
  // Requests sent to each worker in the window (a worker added since counts from zero).
  absl::flat_hash_map<std::string_view, uint64_t> before;
  for (const auto& [url, n] : first.dispatched) before[url] = n;
  uint64_t sent = 0;
  std::vector<std::pair<std::string, uint64_t>> per_worker;
  for (const auto& [url, now] : last.dispatched) {
    const auto it = before.find(url);
    const uint64_t was = it == before.end() ? 0 : it->second;
    const uint64_t d = now >= was ? now - was : now;
    per_worker.emplace_back(url, d);
    sent += d;
  }
  if (sent > 0) {
    for (const auto& [url, d] : per_worker) {
      w.decision_share.emplace_back(url, static_cast<double>(d) / static_cast<double>(sent));
    }
  }
  return w;
}

}  // namespace kvgate::app
