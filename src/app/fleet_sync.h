// FleetSync: the gateway's side of state sync between replicas (sync/state_sync.h).
//
// What this replica publishes: every worker it has registered (with who added it first and when,
// and its explicit KV endpoints), a tombstone for each worker an operator removed here (kept for
// the tombstone TTL), its requests in flight and queued prompt tokens per worker (and per pinned
// rank), and the workers it sees failing (unhealthy, breaker open).
//
// What it applies from Redis: a live worker it lacks is registered (discovered and probed here
// like any other); a worker of its own that a newer tombstone removed is unregistered; the peers'
// in-flight requests and queued prompt tokens become each worker's peer load, which routing adds
// to this replica's own (workers/worker.h); a peer's failure hint about a worker this replica
// still finds healthy makes it probe that worker now (each replica judges health itself); the
// blocks a peer's approximate mode predicted on workers without KV events are added to this
// replica's predictions, so a prefix routed by one replica is found by another. With limit
// shares, the keys' rate limits are shared out between the replicas too (limit_shares.h).
//
// Threading: added() and removed() from any thread; the SyncHost methods on the sync thread;
// stats() from any thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "app/limit_shares.h"
#include "app/worker_control.h"
#include "kvgate/core/clock.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/policy/policy.h"
#include "kvgate/sync/state_sync.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {

struct FleetSyncStats {
  uint64_t workers_added = 0;             // registered here because Redis had them
  uint64_t workers_removed = 0;           // unregistered here because of a tombstone
  uint64_t adds_refused = 0;              // a worker from Redis this replica would not register
  uint64_t probes_hinted = 0;             // early probes on a peer's failure hint
  uint64_t predicted_blocks_applied = 0;  // blocks of peers' prediction journals added here
  uint32_t limit_replicas = 1;            // replicas sharing the keys' rate limits
};

class FleetSync final : public sync::SyncHost {
 public:
  FleetSync(std::string replica_id, WorkerControl& control, workers::WorkerRegistry& registry,
            policy::Policy& policy, const Clock& clock, std::chrono::milliseconds tombstone_ttl);

  // An operator's add or removal on this replica (command line, POST / DELETE /workers, the
  // library's add_worker / remove_worker), after it succeeded.
  void added(std::string_view url, const std::vector<workers::KvEndpoint>& kv_endpoints,
             const WorkerSpec& spec = {});
  void removed(std::string_view url);
  // The rate limits shared with the peers (before the sync starts; null: none).
  void share_limits(LimitShares* shares) { limits_ = shares; }

  void local_state(sync::SharedState& out) override;
  void apply(const sync::SharedState& fleet) override;
  void forget_peers() override;
  void take_predictions(std::vector<sync::PredictionJournal>& out) override;

  FleetSyncStats stats() const;

 private:
  int64_t now_ms() const;

  const std::string replica_id_;
  WorkerControl& control_;
  workers::WorkerRegistry& registry_;
  policy::Policy& policy_;
  const Clock& clock_;
  const int64_t epoch_ms_;  // this process's journals: (epoch, seq)
  uint64_t next_seq_ = 1;   // sync thread only
  // Per peer replica: the epoch and the last journal of it applied (sync thread only).
  absl::flat_hash_map<std::string, std::pair<int64_t, uint64_t>> journals_applied_;
  const std::chrono::milliseconds tombstone_ttl_;
  LimitShares* limits_ = nullptr;
  mutable Mutex mu_;
  // Per registered worker URL: its record (who added it first, when).
  absl::flat_hash_map<std::string, sync::WorkerRecord> records_ KVGATE_GUARDED_BY(mu_);
  // Removals made here, until their TTL.
  absl::flat_hash_map<std::string, sync::Tombstone> tombstones_ KVGATE_GUARDED_BY(mu_);
  FleetSyncStats stats_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace kvgate::app
