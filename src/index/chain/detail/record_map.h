// RecordMap: one holder's engine-hash -> block record map, the chain index's per-lane state.
//
// Bucketized cuckoo hashing: a record lives in one of two buckets its key names, one in each of two
// tables, each bucket one 64-byte cache line of four records. A find reads at most those two lines,
// and both addresses are known from the key alone, so a writer asks for them blocks before it needs
// them (PrefetchWindow, below): one overlapped miss per block instead of two dependent ones for a
// control byte and then its slot. An insert goes to the emptier of its two buckets; when both are
// full it looks one move ahead (a resident whose other bucket has room moves there), then walks.
// Erase just empties the slot: no tombstones, so a full KV pool's steady churn (as many inserts as
// erases) never degrades probing or forces rebuilds, and the table runs up to 15/16 full. A table
// sized for an announced pool starts at 3/4 load (73% after the allocator's size classes): at 4/5
// a fifth of inserts found both buckets full, and stored blocks cost 76 to 77 ns against 60 to 62.
// It is most of the index's memory per membership.
//
// Threading: owned by the lane applying the holder's events; never read by lookups.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>

#include "index/chain/detail/prefetch.h"
#include "index/chain/detail/run.h"

namespace kvgate::index::chain::detail {

// Copies per tier, four 4-bit saturating counters (counts above 15 spill into the holder's
// overflow table).
struct TierCopies {
  uint16_t bits = 0;
  uint32_t get(size_t tier) const { return (bits >> (tier * 4)) & 0xf; }
  void set(size_t tier, uint32_t n) {
    bits = static_cast<uint16_t>((bits & ~(0xf << (tier * 4))) | ((n & 0xf) << (tier * 4)));
  }
  bool any() const { return bits != 0; }
};

struct Record {
  uint64_t engine = 0;
  RunId run = kNoRun;
  uint16_t offset = 0;
  TierCopies copies;
};
static_assert(sizeof(Record) == 16);

class RecordMap {
 public:
  RecordMap() = default;
  RecordMap(const RecordMap&) = delete;
  RecordMap& operator=(const RecordMap&) = delete;

  Record* find(uint64_t engine);
  // Inserts a record for an engine hash that is not in the map; returns it. Insert may move other
  // records (to their other bucket, or into a bigger table): pointers found earlier are stale.
  Record* insert(uint64_t engine, RunId run, uint16_t offset, TierCopies copies);
  // Erasing never moves other records.
  void erase(Record* r);
  // Sizes the table for `records` now, and makes that the size it starts at after clear(): a
  // holder's engine announces its KV pool, so the map need not grow (rehashing everything each
  // time) while the cache fills.
  void reserve(size_t records);
  void clear();

  size_t size() const { return size_; }
  size_t capacity() const { return (left_count_ + right_count_) * kSlots; }
  uint64_t bytes() const { return (left_count_ + right_count_) * sizeof(Bucket); }

  // Asks for the two lines a find or insert of `engine` will read, without waiting for them.
  void prefetch(uint64_t engine) const {
    if (left_count_ == 0) return;
    const Places p = places(engine);
    prefetch_line(&left_[p.left]);
    prefetch_line(&right_[p.right]);
  }

  template <class F>
  void for_each(F&& f) const {
    for (size_t b = 0; b < left_count_ + right_count_; ++b) {
      for (const Record& r : (b < left_count_ ? left_[b] : right_[b - left_count_]).slots) {
        if (r.run != kNoRun) f(r);
      }
    }
  }

 private:
  friend struct RecordMapTestPeer;  // tests/index/chain/record_map_test.cc: bucket choices, growth

  static constexpr int kSlots = 4;
  struct alignas(64) Bucket {
    Record slots[kSlots];  // an empty slot has run == kNoRun
  };
  static_assert(sizeof(Bucket) == 64);
  // A key's bucket in each table.
  struct Places {
    size_t left, right;
  };

  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  static size_t range(uint64_t h, size_t n) {
    return static_cast<size_t>((static_cast<unsigned __int128>(h) * n) >> 64);
  }
  Places places(uint64_t engine) const {
    const uint64_t h = mix(engine);
    return {range(h, left_count_), range(h * 0x9e3779b97f4a7c15ULL, right_count_)};
  }
  // Bucket scans are branch-free masks (bit k for slot k): which slot is free or holds a key is
  // random, so a branch per slot mispredicted on most inserts and on the finds of removals.
  static unsigned free_mask(const Bucket& b) {
    unsigned m = 0;
#pragma GCC unroll 4
    for (int k = 0; k < kSlots; ++k) m |= unsigned{b.slots[k].run == kNoRun} << k;
    return m;
  }
  static unsigned match_mask(const Bucket& b, uint64_t engine) {
    unsigned m = 0;
#pragma GCC unroll 4
    for (int k = 0; k < kSlots; ++k)
      m |= static_cast<unsigned>((b.slots[k].engine == engine) & (b.slots[k].run != kNoRun)) << k;
    return m;
  }
  static int slots_in(unsigned mask) {  // a 4-bit popcount without the POPCNT instruction
    return static_cast<int>((0x4332322132212110ULL >> (4 * mask)) & 0xf);
  }
  static Record* free_slot(Bucket& b) {
    const unsigned m = free_mask(b);
    return m == 0 ? nullptr : &b.slots[__builtin_ctz(m)];
  }
  // The free slot of the emptier of a key's two buckets; null when both are full.
  Record* emptier_slot(const Places& p);
  // Places `r`, moving residents along their other buckets when both of its own are full, and
  // returns where it went. Null when the walk gave up: `r` then holds the record left without a
  // slot.
  Record* place(Record& r);
  // place() once both of the key's buckets (`p`) are full.
  Record* place_crowded(Record& r, const Places& p);
  void grow(size_t min_records);

  // Two tables, as in the original cuckoo hashing: a key's first bucket is in the left one, its
  // second in the right. Two allocations also let the table's size fall between the allocator's
  // size classes (a quarter apart at these sizes: one allocation sized for 3/4 load would be
  // rounded to 2/3, 2.6 bytes more per membership): the left is the largest class within half the
  // buckets asked for, the right the rest rounded up to its class (grow()).
  std::unique_ptr<Bucket[]> left_, right_;
  size_t left_count_ = 0, right_count_ = 0;
  size_t size_ = 0;
  size_t reserved_ = 0;  // records the table is sized for at least (reserve())
  // A linear congruential sequence: which residents a walk moves.
  uint64_t next_walk() { return walk_ = walk_ * 6364136223846793005ULL + 1442695040888963407ULL; }
  uint64_t walk_ = 0;
};

// A writer's walk over one event's engine hashes, each looked up in the holder's record map in
// turn: asks for the buckets of the block kDistance ahead as it reaches each block, so every find
// meets lines already on their way. The map is far larger than the caches and each event touches
// one random holder, so without this each find waits a full miss; with it the misses overlap the
// walk's own work (the run edits between finds) instead of being paid before or after it.
class PrefetchWindow {
 public:
  // Far enough ahead for a miss (~150 ns on the development machine) to land before the walk
  // arrives (a block's work is tens of ns); 8 to 32 measured alike.
  static constexpr size_t kDistance = 16;
  // The event's own hash arrays are asked for up to this many lines (128 blocks) at the start.
  static constexpr size_t kArrayLines = 16;

  PrefetchWindow(const RecordMap& map, std::span<const uint64_t> engines)
      : map_(map), engines_(engines) {
    prefetch_array(engines, kArrayLines);
    for (size_t i = 0; i < std::min(engines.size(), kDistance); ++i) map.prefetch(engines[i]);
  }
  // Call on reaching block `i`.
  void reached(size_t i) const {
    if (i + kDistance < engines_.size()) map_.prefetch(engines_[i + kDistance]);
  }

 private:
  const RecordMap& map_;
  std::span<const uint64_t> engines_;
};

}  // namespace kvgate::index::chain::detail
