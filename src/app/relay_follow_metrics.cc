#include "app/relay_follow_metrics.h"

#include <chrono>

namespace kvgate::app {

RelayFollowMetrics::RelayFollowMetrics(metrics::Registry& registry)
    : batches_(
          metrics::counter_family(registry, "kvgate_relay_follow_batches_total",
                                  "KV-event batches applied from the relay, per worker rank.")),
      snapshots_(metrics::counter_family(
          registry, "kvgate_relay_follow_snapshots_total",
          "Snapshots applied from the relay (each after it could not continue the stream: a "
          "first subscribe past its history, a gap beyond it, a relay or engine restart).")),
      streams_(metrics::counter_family(registry, "kvgate_relay_follow_streams_total",
                                       "Subscribe streams opened to the relay.")),
      resumes_(metrics::counter_family(
          registry, "kvgate_relay_follow_resumes_total",
          "Streams reopened after a break that resumed from the last applied batch.")),
      restarts_(metrics::counter_family(
          registry, "kvgate_relay_follow_restarts_total",
          "Times a holder was emptied and subscribed afresh because what arrived did not "
          "continue what was applied.")),
      connected_(metrics::gauge_family(
          registry, "kvgate_relay_follow_connected",
          "1 while a stream from the relay is open and has delivered something.")),
      lag_(metrics::histogram_family(registry, "kvgate_relay_follow_apply_lag_seconds",
                                     "Wall-clock time from a batch's engine timestamp to its "
                                     "apply to the index, through the relay.")
               .Add({}, metrics::latency_buckets_seconds())),
      series_(
          [this](const metrics::Labels& l) {
            return Series{&batches_.Add(l), &snapshots_.Add(l), &streams_.Add(l),
                          &resumes_.Add(l), &restarts_.Add(l),  &connected_.Add(l)};
          },
          [this](Series& s) {
            batches_.Remove(s.batches);
            snapshots_.Remove(s.snapshots);
            streams_.Remove(s.streams);
            resumes_.Remove(s.resumes);
            restarts_.Remove(s.restarts);
            connected_.Remove(s.connected);
          }) {}

void RelayFollowMetrics::observe_apply_lag(double engine_ts) {
  if (engine_ts <= 0) return;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  lag_.Observe(now > engine_ts ? now - engine_ts : 0.0);
}

void RelayFollowMetrics::sync(const std::vector<relay::FollowStats>& stats) {
  MutexLock lock(&mu_);
  for (const relay::FollowStats& f : stats) {
    Series& s = series_.at(f.worker, f.rank);
    metrics::advance(*s.batches, f.batches);
    metrics::advance(*s.snapshots, f.snapshots);
    metrics::advance(*s.streams, f.streams);
    metrics::advance(*s.resumes, f.resumes);
    metrics::advance(*s.restarts, f.restarts);
    s.connected->Set(f.connected ? 1 : 0);
  }
  series_.sweep();
}

}  // namespace kvgate::app
