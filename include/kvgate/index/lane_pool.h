// LanePool: applies KV-event work on a fixed set of lane threads, one worker at a time.
//
// Work is submitted per key (a worker: all its dp ranks share one key). A key's tasks run in
// submission order and never on two lanes at once; a key with pending work waits in one ready
// queue that every lane takes from, so a busy worker does not leave other lanes idle behind a
// static assignment. A lane runs at most `burst` tasks of one key before putting it back, so one
// firehose worker cannot starve the others.
//
// Threading: submit(), flush(), forget() and stats() from any thread. Tasks run on lane threads
// and must not call back into the pool's flush() for their own key.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/thread_annotations.h"

namespace kvgate::index {

struct LanePoolOptions {
  uint32_t lanes = 2;
  // Tasks queued per key before submit() refuses (the caller counts the drop and resyncs).
  size_t max_queued_per_key = 4096;
  // Tasks a lane runs for one key before letting the next key go first.
  uint32_t burst = 64;
  // NUMA: with two or more CPU lists, the lanes split into that many groups (lane i in group
  // i % groups, at least one each), group g's lanes run on group_cpus[g] only, and key k's tasks
  // run in group k % groups: a worker's events apply on the node whose index shard holds it.
  std::vector<std::vector<int>> group_cpus;
};

struct LanePoolStats {
  uint64_t submitted = 0;
  uint64_t executed = 0;
  uint64_t refused = 0;  // submit() over max_queued_per_key
  uint64_t queued = 0;   // tasks waiting now
};

class LanePool {
 public:
  using Task = std::function<void()>;

  explicit LanePool(LanePoolOptions options);
  ~LanePool();  // runs every queued task, then joins the lanes
  LanePool(const LanePool&) = delete;
  LanePool& operator=(const LanePool&) = delete;

  // Queues `task` for `key`. False (task dropped) when the key's queue is full.
  bool submit(uint64_t key, Task task);
  // Queues `task` for `key` whatever the bound (for work that must not be lost, like a removal).
  void submit_always(uint64_t key, Task task);
  // Whether the key's queue is below the bound. With one producer per key the answer holds until
  // that producer submits (lanes only shrink the queue), so it can check before building a task.
  bool has_room(uint64_t key) const;
  // Waits until every task submitted for `key` before this call has run.
  void flush(uint64_t key);
  // Waits until the pool is idle: nothing queued, nothing running.
  void flush_all();
  // Drops the key's queued tasks (a running one finishes) and its bookkeeping; returns how many
  // were dropped. Call flush(key) first to run them instead.
  size_t forget(uint64_t key);

  LanePoolStats stats() const;
  uint32_t lanes() const { return static_cast<uint32_t>(threads_.size()); }

 private:
  struct Key {
    std::deque<Task> tasks;
    bool scheduled = false;  // in the ready queue or running on a lane
    bool forgotten = false;  // forget() ran while scheduled: the lane erases the key
    uint64_t submitted = 0;  // tasks ever submitted
    uint64_t done = 0;       // tasks ever finished (or dropped)
  };
  // One group's ready keys and the lanes that wait for them (`ready` guarded by the pool's mu_).
  struct Group {
    CondVar ready_cv;
    std::deque<uint64_t> ready;
  };
  void run_lane(size_t group);
  Group& group_of(uint64_t key) { return *groups_[key % groups_.size()]; }
  bool enqueue(uint64_t key, Task task, bool bounded);
  // Whether every task submitted for `key` up to `target` ran (or the key is gone or reused).
  bool flushed(uint64_t key, const Key* k, uint64_t target) const KVGATE_REQUIRES(mu_);

  const LanePoolOptions options_;
  mutable Mutex mu_;
  CondVar done_cv_;  // flushers wait for progress
  // A Key's fields are guarded by mu_ too.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Key>> keys_ KVGATE_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Group>> groups_;  // one without group_cpus
  bool stopping_ KVGATE_GUARDED_BY(mu_) = false;
  uint64_t submitted_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t executed_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t refused_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t queued_ KVGATE_GUARDED_BY(mu_) = 0;
  uint32_t running_ KVGATE_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace kvgate::index
