// KvPool: one simulated engine's prefix-caching KV pool, the source of a corpus's events.
//
// A fixed number of block slots. A request reuses the longest cached prefix of its chain, and
// the rest of its chain becomes resident, evicting least-recently-used blocks that the request
// itself does not use. Like vLLM, a request's blocks are freed tail first, so a block is never
// more recent than its parent: eviction always takes a leaf and the pool stays prefix-closed
// (no holes; the events never orphan). A request longer than the pool stores what fits.
//
// Threading: none.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::corpus {

struct PoolBlock {
  SeqHash seq;
  index::EngineHash engine;
};

class KvPool {
 public:
  explicit KvPool(uint32_t capacity);

  struct Outcome {
    uint32_t matched = 0;  // leading blocks already resident
    uint32_t stored = 0;   // blocks [matched, matched + stored) became resident
  };
  // Serves one request's chain; appends the engine hashes of evicted blocks to `evicted`.
  Outcome serve(std::span<const PoolBlock> chain, std::vector<index::EngineHash>& evicted);

  uint32_t size() const { return size_; }
  uint32_t capacity() const { return capacity_; }
  bool contains(SeqHash seq) const { return where_.contains(seq); }
  // Resident blocks from most to least recently used (for tests).
  std::vector<SeqHash> recency_order() const;

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Slot {
    PoolBlock block;
    uint32_t prev;  // towards the most recent
    uint32_t next;  // towards the least recent
  };
  void unlink(uint32_t s);
  void push_front(uint32_t s);

  uint32_t capacity_;
  uint32_t size_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  absl::flat_hash_map<SeqHash, uint32_t> where_;
  uint32_t head_ = kNil;           // most recent
  uint32_t tail_ = kNil;           // least recent
  std::vector<uint32_t> matched_;  // scratch
};

}  // namespace kvgate::corpus
