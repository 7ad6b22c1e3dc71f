// RelayFollowMetrics: the gateway's view of its KV-event relay (--kv-events-relay), one stats
// table: per followed (worker, rank) the batches and snapshots applied, the streams opened and how
// many of them resumed, the times the holder started over, whether a stream is up; and the apply
// lag from each batch's engine timestamp to its apply, as kvgate_events_apply_lag_seconds is
// for engines read directly.
//
// Threading: observe_apply_lag() from any thread (gRPC's); sync() from any thread (scrapes of
// both listeners may overlap: they take turns).
#pragma once

#include <vector>

#include "kvgate/core/thread_annotations.h"
#include "kvgate/metrics/metrics.h"
#include "kvgate/metrics/rank_series.h"
#include "kvgate/relay/follower.h"

namespace kvgate::app {

class RelayFollowMetrics {
 public:
  explicit RelayFollowMetrics(metrics::Registry& registry);

  // A batch published at `engine_ts` (seconds since the Unix epoch; 0: unknown) was applied now.
  void observe_apply_lag(double engine_ts);
  // At scrape time: the follower's per (worker, rank) stats.
  void sync(const std::vector<relay::FollowStats>& stats);

 private:
  struct Series {
    metrics::Counter* batches;
    metrics::Counter* snapshots;
    metrics::Counter* streams;
    metrics::Counter* resumes;
    metrics::Counter* restarts;
    metrics::Gauge* connected;
  };
  metrics::Family<metrics::Counter>& batches_;
  metrics::Family<metrics::Counter>& snapshots_;
  metrics::Family<metrics::Counter>& streams_;
  metrics::Family<metrics::Counter>& resumes_;
  metrics::Family<metrics::Counter>& restarts_;
  metrics::Family<metrics::Gauge>& connected_;
  metrics::Histogram& lag_;
  Mutex mu_;
  metrics::RankSeries<Series> series_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace kvgate::app
