// The dashboard state's sections that come from the pulse and the workers (app/dashboard_page.h).
#include "app/dashboard_page.h"

#include <algorithm>

namespace kvgate::app {
namespace {

void write_counts(JsonWriter& w, const std::vector<WindowCount>& counts, std::string_view name) {
  w.begin_array();
  for (const WindowCount& c : counts) {
    w.begin_object().member(name, c.name).member("count", c.count);
    w.member("per_second", c.per_second).end_object();
  }
  w.end_array();
}

void write_percentiles(JsonWriter& w, const WindowPercentiles& p) {
  w.begin_object().member("count", p.count).member("p50", p.p50);
  w.member("p90", p.p90).member("p99", p.p99).end_object();
}

// A worker's agreement as the dashboard shows it, or why it shows none: nothing for a worker that
// is not live (its past says nothing of it now) or that no answer has reported on; the last full
// window's ratio, or before the first window completes, the ratio of the totals so far (the
// tracker's own ratio reads 1 until then, which would claim an agreement never measured).
std::optional<double> shown_agreement(const workers::Worker& worker, const char** missing) {
  if (worker.health().state() == workers::Health::kUnhealthy ||
      worker.liveness().state() != workers::Liveness::kLive) {
    *missing = "worker not live";
    return std::nullopt;
  }
  const workers::CacheAgreement& a = worker.cache_agreement();
  const uint64_t predicted = a.predicted_total(), reported = a.reported_total();
  if (predicted == 0 && reported == 0) {
    *missing = "no cached tokens predicted or reported yet";
    return std::nullopt;
  }
  // Before the first window completes, the totals are that window's own.
  if (std::max(predicted, reported) < workers::CacheAgreement::kWindowTokens) {
    return workers::CacheAgreement::agreement(predicted, reported);
  }
  return a.ratio();
}

void write_agreement(JsonWriter& w, const workers::Worker& worker) {
  const workers::CacheAgreement& a = worker.cache_agreement();
  const char* missing = nullptr;
  const std::optional<double> agreement = shown_agreement(worker, &missing);
  w.key("cached_tokens").begin_object();
  w.member("predicted", a.predicted_total()).member("reported", a.reported_total());
  w.member("agreement", agreement).member("disagreeing", agreement && a.disagreeing());
  w.key("agreement_missing_reason");
  if (missing != nullptr) {
    w.value(missing);
  } else {
    w.null();
  }
  w.end_object();
}

}  // namespace

void write_fleet_window(JsonWriter& w, const PulseWindow& tiles,
                        const workers::FleetSnapshot& fleet) {
  w.member("window_seconds", tiles.seconds);
  w.member("requests_per_second", tiles.requests_per_second);
  w.member("decision_p50_us", tiles.decision_p50_us);
  w.member("decision_p99_us", tiles.decision_p99_us);
  w.member("hit_ratio", tiles.hit_ratio);
  w.key("events").begin_object();
  w.member("apply_lag_p50_ms", tiles.apply_lag_p50_ms);
  w.member("apply_lag_p99_ms", tiles.apply_lag_p99_ms);
  w.member("gaps_total", tiles.event_gaps);
  uint64_t degraded = 0;
  for (const auto& wk : fleet.workers) {
    for (uint32_t r = 0; r < wk->info()->dp_size; ++r) degraded += wk->rank_degraded(r) ? 1 : 0;
  }
  w.member("degraded_ranks", degraded).end_object();
}

void write_series(JsonWriter& w, const std::vector<PulsePoint>& points, double period_seconds) {
  w.key("series").begin_object();
  w.member("period_seconds", period_seconds);
  w.member("span_seconds", period_seconds * static_cast<double>(points.size()));
  w.key("t").begin_array();
  for (const auto& p : points) w.value(p.unix_ms);
  w.end_array().key("requests_per_second").begin_array();
  for (const auto& p : points) w.value(p.requests_per_second);
  w.end_array().key("hit_ratio").begin_array();
  for (const auto& p : points) w.value(p.hit_ratio);
  w.end_array().key("decision_p99_us").begin_array();
  for (const auto& p : points) w.value(p.decision_p99_us);
  w.end_array().end_object();
}

void write_traffic(JsonWriter& w, const PulseWindow& panels) {
  w.key("errors").begin_object().member("window_seconds", panels.seconds);
  w.member("count", panels.errors).member("per_second", panels.errors_per_second);
  w.key("by_reason");
  write_counts(w, panels.errors_by_reason, "reason");
  w.key("answered_by_status_class");
  write_counts(w, panels.requests_by_status, "status_class");
  w.end_object();
  w.key("latency").begin_object().member("window_seconds", panels.seconds);
  w.key("ttft_ms");
  write_percentiles(w, panels.ttft_ms);
  w.key("end_to_end_ms");
  write_percentiles(w, panels.request_ms);
  w.end_object();
  w.key("tokens").begin_object().member("window_seconds", panels.seconds);
  w.member("prompt_per_second", panels.prompt_tokens_per_second);
  w.member("completion_per_second", panels.completion_tokens_per_second).end_object();
}

void write_admission(JsonWriter& w, bool enabled, const AdmissionStats& now,
                     const PulseWindow& panels) {
  const AdmissionStats& d = panels.admission;
  w.key("admission").begin_object().member("enabled", enabled);
  w.member("running", now.running).member("queued", now.queued);
  w.key("queued_by_class").begin_object();
  for (size_t c = 0; c < now.queued_by_class.size(); ++c)
    w.member(priority_name(static_cast<Priority>(c)), now.queued_by_class[c]);
  w.end_object().member("window_seconds", panels.seconds);
  w.member("waited", d.waited).member("shed", d.shed).member("promoted", d.promoted);
  w.member("refused_queue_full", d.refused_queue_full);
  w.member("refused_timeout", d.refused_timeout).member("abandoned", d.abandoned);
  w.end_object();
}

void write_worker_row(JsonWriter& w, const workers::Worker& worker,
                      std::optional<double> decision_share) {
  const auto info = worker.info();
  const auto load = worker.engine_load();
  w.begin_object().member("url", worker.url()).member("routable", worker.routable());
  w.member("role", workers::worker_role_name(info->role));
  w.member("health", workers::health_name(worker.health().state()));
  w.member("liveness", workers::liveness_name(worker.liveness().state()));
  w.member("circuit_breaker", workers::breaker_state_name(worker.breaker().state()));
  w.member("in_flight", worker.in_flight()).member("waiting", load.waiting);
  w.member("running", load.running).member("kv_usage", load.kv_usage);
  w.member("index_blocks", worker.index_blocks()).member("requests", worker.dispatched());
  w.key("models").begin_array();
  for (const auto& m : info->models) w.value(m);
  w.end_array();
  write_agreement(w, worker);
  w.member("decision_share", decision_share);
  w.end_object();
}

}  // namespace kvgate::app
