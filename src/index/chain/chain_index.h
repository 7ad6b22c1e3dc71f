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
#include "index/chain/detail/record_map.h"
#include "index/chain/detail/run.h"
#include "index/chain/detail/word_slab.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index::chain {

struct ChainCounters {
  std::atomic<uint64_t> runs_created{0};
  std::atomic<uint64_t> runs_freed{0};
  std::atomic<uint64_t> appends{0};
  std::atomic<uint64_t> truncations{0};
};

class ChainIndex final : public Indexer {
 public:
  explicit ChainIndex(const IndexerOptions& options = {}, int numa_node = -1);
  ~ChainIndex() override;

  // index::Indexer
  std::string_view name() const override { return "chain"; }
  Concurrency concurrency() const override { return {true, true}; }
  ApplyResult apply(HolderId holder, std::span<const Event> events) override;
  void lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const override;
  void remove_holder(HolderId holder) override;
  IndexStats stats() const override;
  Status memberships(std::vector<Membership>& out) const override;
  Status holder_memberships(HolderId holder, std::vector<Membership>& out) const override;

  // lookup() that also reports how many runs it walked (the churn benchmark's measure).
  void lookup_traced(std::span<const SeqHash> chain, std::vector<HolderMatch>& out,
                     uint32_t* runs_walked) const;
  uint64_t live_runs() const { return arena_.live_runs() - 1; }  // without the root
  // Positions stored in live runs (for mean run length).
  uint64_t live_positions() const;
  const ChainCounters& counters() const { return counters_; }
  // Adds the sequence hash of every position some holder holds (locks each run briefly).
  void collect_resident(absl::flat_hash_set<SeqHash>& out) const;

 private:
  struct HolderState;
  using RunId = detail::RunId;

  HolderState* find_state(uint32_t holder) const;
  HolderState& state(uint32_t holder);

  void store(HolderState& hs, uint32_t holder, const Event& e, ApplyResult& r);
  void remove(HolderState& hs, uint32_t holder, const Event& e, ApplyResult& r);
  void clear_holder(HolderState& hs, uint32_t holder);

  SeqHash seq_at(RunId run, uint32_t offset) const;
  // Finds (creating when needed) the place of `seq` right after (run, offset) and returns it with
  // its run locked; offset -1 with the root run starts a chain.
  std::pair<RunId, uint32_t> locate_locked(RunId run, int64_t offset, SeqHash seq);
  RunId new_run(RunId parent, uint32_t offset, SeqHash seq);
  void append_locked(detail::Run& r, SeqHash seq);
  // Changes the holder's record counts at a place (run locked) by d_any / d_device.
  void adjust_locked(HolderState& hs, uint32_t holder, RunId rid, detail::Run& r, uint32_t offset,
                     int d_any, int d_device);
  void truncate_locked(detail::Run& r);
  bool dead_candidate_locked(RunId rid, const detail::Run& r) const;
  void kill(RunId rid);
  void account(HolderState& hs);

  const BlockHasher hasher_;
  mutable detail::WordSlab slab_;
  mutable detail::RunArena arena_;

  static constexpr uint32_t kHolderChunkShift = 10;
  static constexpr uint32_t kHolderChunks = 1024;  // up to 1,048,576 holder ids
  std::atomic<std::atomic<HolderState*>*> holder_chunks_[kHolderChunks] = {};
  std::mutex holder_chunks_mu_;

  std::atomic<uint64_t> memberships_{0};
  std::atomic<uint64_t> resident_{0};
  std::atomic<uint64_t> holders_{0};
  std::atomic<uint64_t> holder_bytes_{0};
  ChainCounters counters_;
};

}  // namespace kvgate::index::chain
