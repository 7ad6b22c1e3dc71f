// HolderIdAllocator: dense HolderIds for (worker, rank) keys.
//
// Threading: every method is safe from any thread (one internal mutex); it sits on the control
// path (worker add/remove, subscription start), never on a per-request path.
#pragma once

#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/ids.h"
#include "kvgate/core/thread_annotations.h"

namespace kvgate {

class HolderIdAllocator {
 public:
  // With `classes` > 1, every id of a worker is congruent to the worker's id modulo `classes`:
  // a sharded index that places holder h in shard h % classes keeps each worker in one shard
  // (one per NUMA node, as the gateway shards its index). Ids stay as low as the classes allow.
  explicit HolderIdAllocator(uint32_t classes = 1) : classes_(classes < 1 ? 1 : classes) {}

  // Returns the key's id, allocating the lowest free id when the key is new.
  HolderId acquire(const HolderKey& key);
  // The key's id if it has one.
  std::optional<HolderId> find(const HolderKey& key) const;
  // The key an id is bound to, if it is bound.
  std::optional<HolderKey> key_of(HolderId id) const;
  // Frees the key's id for reuse. Returns the freed id, if the key had one.
  std::optional<HolderId> release(const HolderKey& key);
  // Every id bound to a worker, in ascending order.
  std::vector<HolderId> holders_of(WorkerId worker) const;
  // One past the highest id ever handed out (ids are < this bound).
  uint32_t bound() const;

 private:
  const uint32_t classes_;
  mutable Mutex mu_;
  absl::flat_hash_map<HolderKey, HolderId> ids_ KVGATE_GUARDED_BY(mu_);
  std::vector<std::optional<HolderKey>> keys_ KVGATE_GUARDED_BY(mu_);  // indexed by id
};

}  // namespace kvgate
