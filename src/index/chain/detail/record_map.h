// RecordMap: one holder's engine-hash -> block record map, the chain index's per-lane state.
//
// Open addressing with Robin Hood probing and backward-shift deletion (no tombstones), 16-byte
// slots, any capacity (fastrange, not a power of two) grown by 1.5x at 80% load: it is most of the
// index's memory per membership, so it runs full and never doubles needlessly.
//
// Threading: owned by the lane applying the holder's events; never read by lookups.
#pragma once

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
  uint8_t mask() const {
    uint8_t m = 0;
    for (size_t t = 0; t < 4; ++t) m |= get(t) ? (1u << t) : 0;
    return m;
  }
};

struct Record {
  uint64_t engine = 0;
  RunId run = kNoRun;  // kNoRun marks an empty slot
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
  void clear();

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  uint64_t bytes() const { return capacity_ * sizeof(Record); }

  template <class F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].run != kNoRun) f(slots_[i]);
    }
  }

 private:
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  size_t home(uint64_t k) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(mix(k)) * capacity_) >> 64);
  }
  size_t distance(size_t slot, size_t home_slot) const {
    return slot >= home_slot ? slot - home_slot : slot + capacity_ - home_slot;
  }
  size_t next(size_t i) const { return i + 1 == capacity_ ? 0 : i + 1; }
  void grow();
  Record* place(Record r);

  std::unique_ptr<Record[]> slots_;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

}  // namespace kvgate::index::chain::detail
