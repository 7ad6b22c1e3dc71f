// HostTier: the engine's offload tier in host memory, as vLLM's CPU offloading connector keeps it.
//
// Write-through: every block the device caches is copied here too, so a block the device evicts
// may still be loaded back (a fraction of recomputing it: TimingModel::host_load_cost). The tier
// has its own capacity and evicts its least recently used block for room. A block is touched when
// it is copied again or loaded.
#pragma once

#include <cstdint>
#include <list>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "mock/detail/block_pool.h"

namespace kvgate::mock::detail {

class HostTier {
 public:
  explicit HostTier(uint32_t capacity) : capacity_(capacity) {}

  bool enabled() const { return capacity_ > 0; }
  uint32_t size() const { return static_cast<uint32_t>(lru_.size()); }
  bool holds(events::EngineHash hash) const { return where_.contains(hash); }

  // Copies a block in as the most recently used; false if it was there already (only touched).
  // Call trim() after a run of copies: a run larger than the tier then still arrives whole before
  // its oldest blocks go.
  bool copy_in(const BlockMeta& meta);
  // Marks a held block as the most recently used (a load).
  void touch(events::EngineHash hash);
  // Evicts the least recently used blocks beyond the capacity, appending their hashes to `out`.
  void trim(std::vector<events::EngineHash>* out);
  void clear();

  template <class F>  // F(const BlockMeta&)
  void for_each(F&& f) const {
    for (const BlockMeta& m : lru_) f(m);
  }

 private:
  uint32_t capacity_;
  std::list<BlockMeta> lru_;  // most recently used first
  absl::flat_hash_map<events::EngineHash, std::list<BlockMeta>::iterator> where_;
};

}  // namespace kvgate::mock::detail
