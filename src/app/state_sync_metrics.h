// StateSyncMetrics: state sync between gateway replicas (--state-sync) as an operator watches it,
// one stats table: whether Redis is reachable, how many peers this replica hears, how old the
// oldest peer record applied is, how far this replica is from agreeing with Redis (the
// convergence ratio), what failed by operation, what was skipped as bad input, what was written,
// and the fleet changes applied from peers.
//
// Threading: sync() from any thread (scrapes of both listeners may overlap: they take turns).
#pragma once

#include <array>

#include "app/fleet_sync.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/metrics/metrics.h"
#include "kvgate/sync/state_sync.h"

namespace kvgate::app {

class StateSyncMetrics {
 public:
  explicit StateSyncMetrics(metrics::Registry& registry);
  void sync(const sync::SyncStats& s, const FleetSyncStats& f);

 private:
  Mutex mu_;
  metrics::Gauge& up_;
  metrics::Gauge& peers_;
  metrics::Gauge& lag_;
  metrics::Gauge& convergence_;
  metrics::Gauge& limit_replicas_;
  metrics::Gauge& backoff_;
  metrics::Counter& outages_;
  metrics::Counter& cycles_;
  std::array<metrics::Counter*, static_cast<size_t>(sync::SyncOp::kCount)> errors_;
  std::array<metrics::Counter*, static_cast<size_t>(sync::BadValue::kCount)> bad_values_;
  metrics::Counter& keys_pulled_;
  metrics::Counter& keys_pushed_;
  metrics::Counter& keys_unchanged_;
  metrics::Counter& probes_hinted_;
  metrics::Counter& journals_pushed_;
  metrics::Counter& predicted_applied_;
  metrics::Counter* workers_added_;
  metrics::Counter* workers_removed_;
  metrics::Counter* adds_refused_;
};

}  // namespace kvgate::app
