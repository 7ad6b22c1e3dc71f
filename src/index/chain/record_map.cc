#include "index/chain/detail/record_map.h"

#include <algorithm>
#include <cassert>
#include <utility>

// jemalloc's real size for an allocation request, when jemalloc is linked (kvgate's binaries) and
// null otherwise (sanitizer builds).
extern "C" size_t nallocx(size_t size, int flags) __attribute__((weak));

namespace kvgate::index::chain::detail {
namespace {

// Grow when an insert would fill the table beyond 15/16; a grown table starts 4/5 full.
constexpr size_t kMaxLoadNum = 15, kMaxLoadDen = 16;
constexpr size_t kGrownLoadNum = 4, kGrownLoadDen = 5;
// Moves one insert may make before the table grows instead (at 15/16 of 4-slot buckets walks
// average a few moves; a long one means the table is unluckily full).
constexpr int kMaxMoves = 256;

// The allocator rounds a large table up to its size class (up to a quarter more): use those bytes
// as more buckets instead of wasting them.
size_t usable_buckets(size_t buckets, size_t bucket_bytes) {
  if (nallocx == nullptr) return buckets;
  return nallocx(buckets * bucket_bytes, 0) / bucket_bytes;
}

}  // namespace

Record* RecordMap::find(uint64_t engine) {
  if (size_ == 0) return nullptr;
  const Places p = places(engine);
  for (Record& r : buckets_[p.first].slots) {
    if (r.engine == engine && r.run != kNoRun) return &r;
  }
  for (Record& r : buckets_[p.second].slots) {
    if (r.engine == engine && r.run != kNoRun) return &r;
  }
  return nullptr;
}

Record* RecordMap::place(Record& r) {
  const uint64_t engine = r.engine;
  const Places p = places(engine);
  Bucket* const own[2] = {&buckets_[p.first], &buckets_[p.second]};
  // Into the emptier of the two buckets: keeping buckets evenly filled keeps both of a key's
  // buckets from being full, which is what costs (the moves below touch cold buckets).
  const int free_first = free_count(*own[0]), free_second = free_count(*own[1]);
  if (free_first + free_second > 0) {
    Record* s = free_slot(free_first >= free_second ? *own[0] : *own[1]);
    *s = r;
    return s;
  }
  // Both full. First look one move ahead: a resident of either bucket whose other bucket has a
  // free slot moves there and `r` takes its slot. The eight other buckets are independent loads,
  // so their misses overlap; a walk would take them one after another.
  size_t other[2 * kSlots];
  for (int k = 0; k < 2 * kSlots; ++k) {
    other[k] =
        other_bucket(own[k / kSlots]->slots[k % kSlots].engine, k < kSlots ? p.first : p.second);
  }
  for (int k = 0; k < 2 * kSlots; ++k) {
    if (Record* s = free_slot(buckets_[other[k]])) {
      Record& resident = own[k / kSlots]->slots[k % kSlots];
      *s = resident;
      resident = r;
      return &resident;
    }
  }
  // Then a random walk: evict a resident into its other bucket, and so on.
  size_t b = (next_walk() >> 63) ? p.second : p.first;
  for (int moves = 0; moves < kMaxMoves; ++moves) {
    std::swap(r, buckets_[b].slots[next_walk() >> 62]);
    b = other_bucket(r.engine, b);
    if (Record* s = free_slot(buckets_[b])) {
      *s = r;
      return find(engine);  // the walk may have moved the new record on
    }
  }
  return nullptr;
}

Record* RecordMap::insert(uint64_t engine, RunId run, uint16_t offset, TierCopies copies) {
  assert(run != kNoRun && "kNoRun marks an empty slot");
  if ((size_ + 1) * kMaxLoadDen > capacity() * kMaxLoadNum) grow(size_ + 1);
  Record r{engine, run, offset, copies};
  Record* at = place(r);
  if (at == nullptr) {
    // The new record is in the table; `r` is whichever record the walk left homeless.
    do grow(size_ + 1);
    while (place(r) == nullptr);
    at = find(engine);
  }
  ++size_;
  return at;
}

void RecordMap::erase(Record* r) {
  r->run = kNoRun;
  --size_;
}

void RecordMap::reserve(size_t records) {
  reserved_ = records;
  if (records * kGrownLoadDen > capacity() * kGrownLoadNum) grow(records);
}

void RecordMap::clear() {
  buckets_.reset();
  buckets_count_ = 0;
  size_ = 0;
}

void RecordMap::grow(size_t min_records) {
  // Place every record of the old table into a new one, which replaces it only once all are in:
  // an unlucky table (a walk gave up) is dropped for a slightly bigger one, rebuilt from the old.
  std::unique_ptr<Bucket[]> old = std::move(buckets_);
  const size_t old_count = buckets_count_;
  min_records = std::max(min_records, reserved_);
  size_t buckets = (min_records * kGrownLoadDen / kGrownLoadNum + kSlots - 1) / kSlots;
  buckets = std::max(buckets, old_count + 1);
  for (;;) {
    buckets = usable_buckets(buckets, sizeof(Bucket));
    buckets_.reset(new Bucket[buckets]);
    buckets_count_ = buckets;
    bool placed_all = true;
    for (size_t b = 0; b < old_count && placed_all; ++b) {
      for (Record r : old[b].slots) {
        if (r.run != kNoRun && place(r) == nullptr) {
          placed_all = false;
          break;
        }
      }
    }
    if (placed_all) return;
    buckets += buckets / 8 + 1;
  }
}

}  // namespace kvgate::index::chain::detail
