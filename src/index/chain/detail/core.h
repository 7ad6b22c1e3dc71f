// IndexCore: the chain index's shared structures and the run-level operations every writer path
// uses (detail/run.h explains runs and their locking). ChainIndex owns one.
#pragma once

#include <atomic>
#include <cstdint>

#include "index/chain/detail/run.h"
#include "index/chain/detail/word_slab.h"
#include "kvgate/core/block_hash.h"

namespace kvgate::index::chain::detail {

struct Counters {
  std::atomic<uint64_t> runs_created{0};
  std::atomic<uint64_t> runs_freed{0};
  std::atomic<uint64_t> appends{0};
  std::atomic<uint64_t> truncations{0};
};

// A run's per-position holder counts: u16, four per word (writer-only, under the run's lock). A
// position is held by at most one entry per holder, and the index takes fewer than 65,535 holders.
inline uint32_t count_at(const Word* counts, uint32_t i) {
  return static_cast<uint32_t>(WordSlab::data(counts)[i / 4].load(std::memory_order_relaxed) >>
                               (16 * (i % 4))) &
         0xffff;
}
inline void set_count(Word* counts, uint32_t i, uint32_t v) {
  Word& w = WordSlab::data(counts)[i / 4];
  const uint64_t shift = 16 * (i % 4);
  const uint64_t old = w.load(std::memory_order_relaxed);
  w.store((old & ~(uint64_t{0xffff} << shift)) | (uint64_t{v} << shift), std::memory_order_relaxed);
}
inline size_t count_words(size_t positions) { return (positions + 3) / 4; }

// The first index in [lo, hi) where `before(i)` is false, `before` holding on a prefix of the
// range: the binary search over sorted holder entries (and holder lists) that readers and writers
// share.
template <class Before>
size_t first_not_before(size_t lo, size_t hi, Before before) {
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (before(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

inline void cpu_pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

inline uint64_t place_key(RunId run, uint32_t offset) { return (uint64_t{run} << 16) | offset; }

struct IndexCore {
  explicit IndexCore(int numa_node) : slab(numa_node) {}

  WordSlab slab;
  RunArena arena;
  Counters counters;
  std::atomic<uint64_t> memberships{0};
  std::atomic<uint64_t> resident{0};
  std::atomic<uint64_t> holders{0};

  // The sequence hash at a place, read under the run's seqlock (no lock taken).
  SeqHash seq_at(RunId run, uint32_t offset) const;
  // A new live run whose position 0 is `seq`, hanging at (parent, offset), not yet linked into the
  // parent's child table, with room for `capacity` positions.
  RunId new_run(RunId parent, uint32_t offset, SeqHash seq, size_t capacity);
  // Shortens a run whose tail positions nobody holds any more (lock held). Children keep the
  // positions they hang after.
  void truncate_locked(Run& r);
  bool dead_candidate_locked(RunId rid, const Run& r) const {
    return rid != kRootRun && r.live && r.memberships == 0 &&
           r.children.load(std::memory_order_relaxed) == nullptr;
  }
  // Frees a run nobody holds and nothing hangs from, unlinks it from its parent, and walks up
  // while the parent became the same. No lock held by the caller.
  void kill(RunId rid);
};

}  // namespace kvgate::index::chain::detail
