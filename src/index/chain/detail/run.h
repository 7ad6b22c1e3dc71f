// Run: a stretch of the global block chain tree stored as one array of sequence hashes.
//
// The engines' chains form a tree of blocks (a block's sequence hash names it and everything before
// it). The chain index stores that tree run-length compressed: a run is an array of consecutive
// positions, and a chain that leaves a run at offset k continues in a child run keyed by
// (k, next hash). Children may hang at any offset, so a divergence never splits a run, and a run
// grows at its end when a chain continues past it.
//
// Per run and holder, the reader-visible state is one entry: how many leading positions of the run
// the holder holds on any tier and on the device tier. Positions a holder holds beyond a gap are
// writer-side only (holder_state.h): lookups only ever need the contiguous prefix.
//
// Concurrency: a run's reader-visible fields are read under its seqlock `version` (odd while a
// writer changes them; readers retry when it moved). Writers serialize on the run's lock
// (RunArena::lock), one run at a time. Child tables are read without the seqlock, validated by
// pointer and generation. Writer-only fields are touched only with the lock held.
// The slab pointers (hashes, entries, children) are stored with release and loaded with acquire
// (free on x86): a reader inside a write section may load a block the writer has only just
// carved, and reads its header before the version check discards the attempt; the pair orders
// the block's construction before that read.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "index/chain/detail/word_slab.h"

namespace kvgate::index::chain::detail {

using RunId = uint32_t;
inline constexpr RunId kNoRun = UINT32_MAX;
inline constexpr RunId kRootRun = 0;              // a length-0 run whose children start chains
inline constexpr uint32_t kMaxRunLength = 65535;  // offsets fit 16 bits
// Lookups guess that a chain goes on in a run's latest child only when the run's child table has
// at most this many slots (at most 5 children): below a popular prefix with thousands, the latest
// child is some other conversation's.
inline constexpr uint32_t kLatestChildMaxSlots = 16;

// One holder's entry in a run's holder table: holder id, leading positions held on any tier and
// on the device tier, packed in one word so a reader copies it atomically.
struct HolderEntry {
  uint32_t holder;
  uint16_t any;
  uint16_t device;
  static HolderEntry unpack(uint64_t w) {
    return {static_cast<uint32_t>(w >> 32), static_cast<uint16_t>(w >> 16),
            static_cast<uint16_t>(w)};
  }
  uint64_t pack() const { return (uint64_t{holder} << 32) | (uint64_t{any} << 16) | device; }
};

// 80 bytes, the reader-visible fields first (bytes 0 to 47). The run's lock is not here but in
// the arena (RunArena::lock): a writer passing through a popular prefix (every new conversation's
// stores start in one) takes its lock without changing it, and a lock word on the line lookups
// read would cost each lookup a transfer of that line from the writer's core.
struct Run {
  // --- reader-visible. Under the seqlock: version (32 bits: a reader would have to sleep through
  // 2^32 write sections of one run to be fooled), length, entry_count, hashes, entries. The child
  // table (children, children_gen) is validated by pointer and generation instead; children_gen
  // sits here only to pack the pointers. ---
  std::atomic<uint32_t> version{0};
  std::atomic<uint32_t> length{0};
  std::atomic<uint32_t> entry_count{0};
  std::atomic<uint32_t> children_gen{0};
  std::atomic<Word*> hashes{nullptr};   // slab block: sequence hash per position
  std::atomic<Word*> entries{nullptr};  // slab block: packed HolderEntry, sorted by holder
  std::atomic<Word*> children{nullptr};
  std::atomic<uint32_t> children_slots{0};  // the table's slot count, for prefetching (a hint)
  // The child created last (a hint for lookups to start loading the next run early: a chain of
  // conversation turns is a path of runs each with one child, the one made for the next turn).
  std::atomic<RunId> latest_child{kNoRun};
  // --- writers ---
  std::atomic<uint32_t> free_next{0};  // free-list link while the slot is free
  // Below: only with the run's lock held.
  bool live = false;
  uint16_t parent_offset = 0;
  RunId parent = kNoRun;
  uint32_t extras = 0;            // positions held beyond some holder's gap (blocks truncation)
  uint32_t memberships = 0;       // (holder, position) pairs held on any tier
  Word* holder_counts = nullptr;  // slab block: holders holding each position (u16, four per word)

  // Seqlock write section around changes of reader-visible fields (lock held).
  void begin_write() {
    version.store(version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  void end_write() {
    version.store(version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
};
static_assert(sizeof(Run) == 80 && offsetof(Run, latest_child) + sizeof(RunId) == 48);

// Run slots in chunks that never move (ids stay valid addresses for readers), recycled through
// a lock-free free list, and each run's writer lock beside them. Slot 0 is the root.
class RunArena {
 public:
  static constexpr uint32_t kChunkShift = 12;
  static constexpr uint32_t kChunkRuns = 1u << kChunkShift;
  static constexpr uint32_t kMaxChunks = 1u << 16;

  RunArena();
  ~RunArena();
  Run& at(RunId id) const {
    return chunks_[id >> kChunkShift].load(std::memory_order_acquire)->runs[id & (kChunkRuns - 1)];
  }
  // The run's writer lock (a spinlock: writers hold it for one run's edit). Kept apart from the
  // run so that taking it does not touch the lines lookups read.
  void lock(RunId id) const {
    std::atomic<uint32_t>& l = lock_word(id);
    while (l.exchange(1, std::memory_order_acquire) != 0) {
      while (l.load(std::memory_order_relaxed) != 0) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
  void unlock(RunId id) const { lock_word(id).store(0, std::memory_order_release); }
  // Readers may hold stale ids: valid() says whether the id names an allocated slot at all.
  bool valid(RunId id) const { return id < high_water_.load(std::memory_order_acquire); }
  RunId allocate();
  void free(RunId id);
  uint64_t reserved_bytes() const {
    return chunk_count_.load(std::memory_order_relaxed) * sizeof(Chunk);
  }
  uint64_t live_runs() const { return live_.load(std::memory_order_relaxed); }

 private:
  struct Chunk {
    Run runs[kChunkRuns];
    std::atomic<uint32_t> locks[kChunkRuns] = {};
  };
  std::atomic<uint32_t>& lock_word(RunId id) const {
    return chunks_[id >> kChunkShift].load(std::memory_order_acquire)->locks[id & (kChunkRuns - 1)];
  }

  std::unique_ptr<std::atomic<Chunk*>[]> chunks_;
  std::atomic<uint32_t> high_water_{0};  // ids below are carved
  std::atomic<uint32_t> chunk_count_{0};
  std::atomic<uint64_t> free_head_{0};  // tagged: low 32 bits id+1 (0 = empty), high 32 bits tag
  std::atomic<uint64_t> live_{0};
  // std::mutex: it only serializes growth; the atomics it orders are read without it.
  std::mutex grow_mu_;
};

// Holds one run's writer lock for a scope.
class RunGuard {
 public:
  RunGuard(const RunArena& arena, RunId id) : arena_(arena), id_(id) { arena_.lock(id_); }
  ~RunGuard() { arena_.unlock(id_); }
  RunGuard(const RunGuard&) = delete;
  RunGuard& operator=(const RunGuard&) = delete;

 private:
  const RunArena& arena_;
  const RunId id_;
};

}  // namespace kvgate::index::chain::detail
