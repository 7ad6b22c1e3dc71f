// PredictedCache: the approximate mode's guess of what a worker without KV events holds.
//
// When a prompt is routed to such a worker, its blocks are assumed cached there for `ttl`. The
// guess is refreshed by every new routing of the same blocks and bounded by `capacity` entries
// (oldest first out, whether expired or not, so eviction always terminates).
//
// Threading: safe from any thread; sharded locks keyed by block hash.
#pragma once

#include <array>
#include <deque>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/core/clock.h"
#include "kvgate/core/ids.h"
#include "kvgate/core/thread_annotations.h"

namespace kvgate::policy::detail {

class PredictedCache {
 public:
  PredictedCache(Duration ttl, size_t capacity, const Clock& clock);

  void record(WorkerId worker, std::span<const SeqHash> chain);
  // Leading blocks of `chain` predicted to be cached on `worker` now.
  uint32_t depth(WorkerId worker, std::span<const SeqHash> chain) const;
  void forget(WorkerId worker);
  size_t size() const;

 private:
  struct Placement {
    uint32_t worker;
    int64_t expires_ns;
  };
  struct Shard {
    mutable Mutex mu;
    absl::flat_hash_map<SeqHash, absl::InlinedVector<Placement, 2>> blocks KVGATE_GUARDED_BY(mu);
    std::deque<std::pair<SeqHash, Placement>> fifo KVGATE_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 16;
  Shard& shard(SeqHash h) const { return shards_[h % kShards]; }
  void drop_locked(Shard& s, SeqHash h, const Placement& p) KVGATE_REQUIRES(s.mu);

  const int64_t ttl_ns_;
  const size_t capacity_per_shard_;
  const Clock& clock_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace kvgate::policy::detail
