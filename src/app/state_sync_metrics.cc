#include "app/state_sync_metrics.h"

namespace kvgate::app {
namespace {

metrics::Gauge& gauge(metrics::Registry& r, const char* name, const char* help) {
  return metrics::gauge_family(r, name, help).Add({});
}

}  // namespace

StateSyncMetrics::StateSyncMetrics(metrics::Registry& r)
    : up_(gauge(r, "kvgate_sync_up",
                "1 while the last state-sync cycle with Redis succeeded; 0 while this replica "
                "routes on its own state.")),
      peers_(gauge(r, "kvgate_sync_peers",
                   "Other gateway replicas whose load records this replica applied last pull.")),
      lag_(gauge(r, "kvgate_sync_lag_seconds",
                 "Age of the oldest peer record applied at the last pull (about one period when "
                 "every peer keeps up).")),
      convergence_(gauge(
          r, "kvgate_sync_convergence_ratio",
          "Fraction of the shared entries (the fleet's workers, the replicas' load records) on "
          "which this replica agreed with Redis at the last pull; 0 while Redis is unreachable.")),
      limit_replicas_(gauge(r, "kvgate_sync_rate_limit_replicas",
                            "Replicas sharing the keys' rate limits (--api-keys-file) at the last "
                            "pull, this one included: with Redis away past the TTL each enforces "
                            "limit / this.")),
      backoff_(gauge(r, "kvgate_sync_backoff_seconds",
                     "The wait before the next attempt while Redis fails (0 when it is up).")),
      outages_(metrics::counter_family(r, "kvgate_sync_outages_total",
                                       "Times Redis went from reachable to failing.")
                   .Add({})),
      cycles_(metrics::counter_family(r, "kvgate_sync_cycles_total",
                                      "State-sync cycles (pull, apply, push) that succeeded.")
                  .Add({})),
      keys_pulled_(metrics::counter_family(r, "kvgate_sync_keys_pulled_total",
                                           "Keys read from Redis (SCAN + MGET), all pulls.")
                       .Add({})),
      keys_pushed_(metrics::counter_family(
                       r, "kvgate_sync_keys_pushed_total",
                       "Keys written to Redis: changed since the last push, or due for refresh.")
                       .Add({})),
      keys_unchanged_(metrics::counter_family(r, "kvgate_sync_keys_unchanged_total",
                                              "Keys not written: unchanged and not yet due.")
                          .Add({})),
      probes_hinted_(metrics::counter_family(
                         r, "kvgate_sync_probe_hints_total",
                         "Health probes run early because a peer replica saw the worker fail.")
                         .Add({})),
      journals_pushed_(metrics::counter_family(
                           r, "kvgate_sync_prediction_journals_total",
                           "Journals of the approximate mode's predictions shared with peers.")
                           .Add({})),
      predicted_applied_(
          metrics::counter_family(r, "kvgate_sync_predicted_blocks_applied_total",
                                  "Blocks the peers predicted cached on workers without KV events, "
                                  "added to this replica's predictions.")
              .Add({})) {
  auto& changes = metrics::counter_family(
      r, "kvgate_sync_fleet_changes_total",
      "Fleet changes from the peers' state: workers added here, removed here (a peer's "
      "removal), refused here (this replica would not register them).");
  workers_added_ = &changes.Add({{"change", "added"}});
  workers_removed_ = &changes.Add({{"change", "removed"}});
  adds_refused_ = &changes.Add({{"change", "refused"}});
  auto& errors =
      metrics::counter_family(r, "kvgate_sync_errors_total",
                              "State-sync failures with Redis, by operation: connect, pull, "
                              "push, and probe (a PING each period while Redis is away).");
  for (size_t i = 0; i < errors_.size(); ++i)
    errors_[i] = &errors.Add({{"op", sync::sync_op_name(static_cast<sync::SyncOp>(i))}});
  auto& bad = metrics::counter_family(
      r, "kvgate_sync_bad_values_total",
      "Entries under the namespace skipped (pulled) or not written (pushed), by reason.");
  for (size_t i = 0; i < bad_values_.size(); ++i)
    bad_values_[i] = &bad.Add({{"reason", sync::bad_value_name(static_cast<sync::BadValue>(i))}});
}

void StateSyncMetrics::sync(const sync::SyncStats& s, const FleetSyncStats& f) {
  MutexLock l(&mu_);
  up_.Set(s.redis_up ? 1 : 0);
  peers_.Set(s.peers);
  lag_.Set(s.lag_seconds);
  convergence_.Set(s.convergence);
  limit_replicas_.Set(f.limit_replicas);
  backoff_.Set(static_cast<double>(s.backoff.count()) / 1e3);
  metrics::advance(outages_, s.outages);
  metrics::advance(cycles_, s.cycles);
  for (size_t i = 0; i < errors_.size(); ++i) metrics::advance(*errors_[i], s.errors[i]);
  for (size_t i = 0; i < bad_values_.size(); ++i)
    metrics::advance(*bad_values_[i], s.bad_values[i]);
  metrics::advance(keys_pulled_, s.keys_pulled);
  metrics::advance(keys_pushed_, s.keys_pushed);
  metrics::advance(keys_unchanged_, s.keys_unchanged);
  metrics::advance(*workers_added_, f.workers_added);
  metrics::advance(*workers_removed_, f.workers_removed);
  metrics::advance(*adds_refused_, f.adds_refused);
  metrics::advance(probes_hinted_, f.probes_hinted);
  metrics::advance(journals_pushed_, s.journals_pushed);
  metrics::advance(predicted_applied_, f.predicted_blocks_applied);
}

}  // namespace kvgate::app
