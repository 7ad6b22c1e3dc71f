// ChainIndex: the exact KV index built for speed and memory (docs/index.md, "The chain index").
//
// Layout: the engines' block chains form one tree of sequence hashes shared by every holder,
// stored run-length compressed as runs (detail/run.h) in a type-stable arena; each run keeps, per
// holder, how many of its leading positions the holder holds (any tier, device tier); divergences
// hang off a run as children keyed by (offset, next hash) at any offset, so runs never split.
// Per holder, a lane-owned RecordMap maps the engine's block hash to the block's place.
//
// Threading contract (Indexer::concurrency() reports both):
//   - lookup() from any number of threads, concurrently with everything. Readers take no locks
//     and write no shared memory: each run's fields are read under its seqlock and re-read when
//     a writer moved it; child tables are validated by pointer and generation.
//   - apply() and remove_holder() concurrently for different holders; calls for one holder must
//     not overlap (a lane owns a worker's holders). Writers lock one run at a time and descend
//     without locks.
//   - A store applied before lookup() starts is visible to it; one applied concurrently may or
//     may not be, per run.
//   - stats() from any thread (relaxed counters); memberships() only while no writer runs.
// Memory: runs and arrays are recycled through lock-free free lists and never unmapped while the
// index lives, so a reader holding a stale pointer reads valid memory and its seqlock check
// rejects what it read.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "index/chain/detail/core.h"
#include "index/chain/detail/holder_state.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index::chain {

using ChainCounters = detail::Counters;

class ChainIndex final : public Indexer {
 public:
  // The most holders one chain index takes (per-position holder counts are 16-bit). Events for a
  // holder id at or above it are counted as malformed.
  static constexpr uint32_t kMaxHolders = 65535;

  explicit ChainIndex(const IndexerOptions& options = {}, int numa_node = -1);
  ~ChainIndex() override;

  // index::Indexer
  std::string_view name() const override { return "chain"; }
  Concurrency concurrency() const override { return {true, true}; }
  ApplyResult apply(HolderId holder, std::span<const Event> events) override;
  void lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const override;
  void remove_holder(HolderId holder) override;
  // Sizes the holder's record map for `blocks` records (kept through clears).
  void expect_capacity(HolderId holder, uint64_t blocks) override;
  IndexStats stats() const override;
  Status memberships(std::vector<Membership>& out) const override;
  Status holder_memberships(HolderId holder, std::vector<Membership>& out) const override;

  // lookup() that also reports how many runs it walked (the churn benchmark's measure).
  void lookup_traced(std::span<const SeqHash> chain, std::vector<HolderMatch>& out,
                     uint32_t* runs_walked) const;
  uint64_t live_runs() const { return core_.arena.live_runs() - 1; }  // without the root
  // Positions stored in live runs (for mean run length). Not synchronized with writers.
  uint64_t live_positions() const;
  const ChainCounters& counters() const { return core_.counters; }
  // Where the bytes of stats().bytes are (for benchmarks; not synchronized with writers).
  struct MemoryBreakdown {
    uint64_t slab_reserved = 0, slab_live = 0, runs_reserved = 0, holder_states = 0;
    uint64_t live_runs = 0, live_positions = 0;
    std::vector<std::pair<size_t, uint64_t>> free_by_class;  // (block words, free bytes)
  };
  MemoryBreakdown memory_breakdown() const;
  // Adds the sequence hash of every position some holder holds (locks each run briefly).
  void collect_resident(absl::flat_hash_set<SeqHash>& out) const;

 private:
  using RunId = detail::RunId;
  using HolderState = detail::HolderState;

  HolderState* find_state(uint32_t holder) const;
  HolderState& state(uint32_t holder);

  // chain_writes.cc
  void store(HolderState& hs, uint32_t holder, const Event& e, ApplyResult& r);
  void remove(HolderState& hs, uint32_t holder, const Event& e, ApplyResult& r);
  void clear_holder(HolderState& hs, uint32_t holder);
  void account(HolderState& hs);

  const BlockHasher hasher_;
  mutable detail::IndexCore core_;

  static constexpr uint32_t kHolderChunkShift = 10;
  static constexpr uint32_t kHolderChunks = (kMaxHolders >> kHolderChunkShift) + 1;
  std::atomic<std::atomic<HolderState*>*> holder_chunks_[kHolderChunks] = {};
  // std::mutex: it only serializes a chunk's creation; the slots are atomics read without it.
  std::mutex holder_chunks_mu_;
  std::atomic<uint64_t> holder_bytes_{0};
};

}  // namespace kvgate::index::chain
