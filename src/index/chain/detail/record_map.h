// RecordMap: one holder's engine-hash -> block record map, the chain index's per-lane state.
//
// Open addressing in groups of 16 slots, each group led by 16 control bytes (empty, deleted, or 7
// bits of the key's hash), probed 16 at a time with SSE2 (the design of Abseil's Swiss tables),
// but with any number of groups (fastrange, not a power of two) kept between 4/5 and 15/16 full: it
// is most of the index's memory per membership, so it runs full and never doubles needlessly.
//
// Threading: owned by the lane applying the holder's events; never read by lookups.
#pragma once

#include <emmintrin.h>

#include <cstdint>
#include <memory>

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
  // Inserts a record for an engine hash that is not in the map; returns it (valid until the next
  // insert or erase).
  Record* insert(uint64_t engine, RunId run, uint16_t offset, TierCopies copies);
  void erase(Record* r);
  // Whether a record found earlier is still in the map (erase() never moves other records; only
  // insert() can, when it rehashes).
  bool live(const Record* r, uint64_t engine) const;
  void clear();

  size_t size() const { return size_; }
  size_t capacity() const { return groups_count_ * kGroup; }
  uint64_t bytes() const { return groups_count_ * sizeof(Group); }

  // Loads the control bytes of the group `engine` starts probing at and the slot it most likely
  // uses (its match, or the first free slot), to warm the cache: see the chain index's writers.
  uint32_t touch(uint64_t engine) const;

  template <class F>
  void for_each(F&& f) const {
    for (size_t g = 0; g < groups_count_; ++g) {
      for (int i = 0; i < kGroup; ++i) {
        if (groups_[g].ctrl[i] >= 0) f(groups_[g].slots[i]);
      }
    }
  }

 private:
  static constexpr int kGroup = 16;
  static constexpr int8_t kEmpty = -128;
  static constexpr int8_t kDeleted = -2;
  struct alignas(16) Group {
    int8_t ctrl[kGroup];
    Record slots[kGroup];
  };

  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  size_t group_of(uint64_t h) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(h) * groups_count_) >> 64);
  }
  static int8_t tag_of(uint64_t h) { return static_cast<int8_t>(h & 0x7f); }
  size_t next(size_t g) const { return g + 1 == groups_count_ ? 0 : g + 1; }
  void rehash(size_t groups);
  Record* place(uint64_t h, const Record& r);

  std::unique_ptr<Group[]> groups_;
  size_t groups_count_ = 0;
  size_t size_ = 0;
  size_t deleted_ = 0;
};

}  // namespace kvgate::index::chain::detail
