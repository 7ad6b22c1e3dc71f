// BlockPool: the engine's KV blocks, their reference counts, the free queue and the prefix cache.
//
// Every block with no reference is in the free queue (a doubly linked list over block ids), in the
// order it was freed; allocation takes the head. A free block may still be cached (it keeps its
// hash until it is allocated again): that is what makes a later request's prefix hit. Evicting is
// therefore allocation of a cached free block. A hash may be cached in several blocks (copies).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/events/wire.h"

namespace kvgate::mock::detail {

struct BlockMeta {
  events::EngineHash hash = 0;
  std::optional<events::EngineHash> parent;
  LocalHash local = 0;
  SeqHash seq = 0;
};

class BlockPool {
 public:
  static constexpr int32_t kNone = -1;

  explicit BlockPool(uint32_t num_blocks);

  uint32_t num_blocks() const { return static_cast<uint32_t>(blocks_.size()); }
  // Blocks no request holds (cached or not).
  uint32_t num_free() const { return num_free_; }
  uint32_t num_cached() const { return num_cached_; }

  // A cached block holding `hash`, or kNone.
  int32_t lookup(events::EngineHash hash) const;
  // Adds a reference to a (cached) block, taking it out of the free queue if it was free.
  void touch(uint32_t block);
  // Takes the free queue's head and references it. A cached head is evicted: its hash is
  // returned in `evicted`. Precondition: num_free() > 0.
  uint32_t allocate(std::optional<events::EngineHash>* evicted);
  // Drops a reference; a block left with none joins the free queue's tail.
  void release(uint32_t block);
  // Marks a held block as cached under meta.hash.
  void cache(uint32_t block, const BlockMeta& meta);
  bool cached(uint32_t block) const { return blocks_[block].cached; }
  uint32_t refs(uint32_t block) const { return blocks_[block].refs; }
  bool is_free(uint32_t block) const { return blocks_[block].in_free; }
  // Forgets every cached hash (no block may be held). Returns how many blocks were cached.
  uint32_t uncache_all();

  template <class F>  // F(const BlockMeta&, uint32_t copies, uint32_t refs)
  void for_each_cached(F&& f) const {
    for (const auto& [hash, copies] : cache_) {
      uint32_t refs = 0;
      for (uint32_t b : copies) refs += blocks_[b].refs;
      f(blocks_[copies.front()].meta, static_cast<uint32_t>(copies.size()), refs);
    }
  }

 private:
  struct Block {
    uint32_t refs = 0;
    bool cached = false;
    bool in_free = false;
    int32_t prev = kNone;
    int32_t next = kNone;
    BlockMeta meta;
  };
  void unlink(uint32_t b);
  void push_back(uint32_t b);
  void uncache(uint32_t b);

  std::vector<Block> blocks_;
  int32_t head_ = kNone;
  int32_t tail_ = kNone;
  uint32_t num_free_ = 0;
  uint32_t num_cached_ = 0;
  absl::flat_hash_map<events::EngineHash, absl::InlinedVector<uint32_t, 1>> cache_;
};

}  // namespace kvgate::mock::detail
