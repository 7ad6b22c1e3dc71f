#include "index/chain/detail/record_map.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <utility>

// jemalloc's real size for an allocation request, when jemalloc is linked (kvgate's binaries) and
// null otherwise (sanitizer builds).
extern "C" size_t nallocx(size_t size, int flags) __attribute__((weak));

namespace kvgate::index::chain::detail {
namespace {

// Grow when an insert would fill the table beyond 15/16; a grown (or reserved) table starts 3/4
// full. At 4/5 a fifth of inserts find both buckets full and read eight cold buckets to move a
// resident aside; at 3/4 fewer do (the corpus replay's stored blocks: 60 to 62 ns against 76 to
// 77, for 2 bytes more per membership).
constexpr size_t kMaxLoadNum = 15, kMaxLoadDen = 16;
constexpr size_t kGrownLoadNum = 3, kGrownLoadDen = 4;
// Moves one insert may make before the table grows instead (at 15/16 of 4-slot buckets walks
// average a few moves; a long one means the table is unluckily full).
constexpr int kMaxMoves = 256;

// The bytes the allocator gives for a request of about `bytes` (its size classes from 16 KiB up
// are four per doubling): the class at most `bytes` when `down` and one exists, else the class
// it rounds up to, all of which the table uses.
size_t allocation_bytes(size_t bytes, bool down) {
  if (nallocx == nullptr) return bytes;
  if (down && bytes >= (16 << 10)) {
    const size_t spacing = std::bit_floor(bytes - 1) / 4;
    const size_t below = bytes / spacing * spacing;
    if (nallocx(below, 0) == below) return below;
  }
  return nallocx(bytes, 0);
}
}  // namespace

Record* RecordMap::find(uint64_t engine) {
  if (size_ == 0) return nullptr;
  const Places p = places(engine);
  Bucket& left = left_[p.left];
  Bucket& right = right_[p.right];
  const unsigned in_left = match_mask(left, engine), in_right = match_mask(right, engine);
  if ((in_left | in_right) == 0) return nullptr;  // (a key is never live in both)
  // Which bucket holds it is random: chosen by index, not by a branch that would mispredict.
  Bucket* const own[2] = {&left, &right};
  return &own[in_left != 0 ? 0 : 1]->slots[__builtin_ctz(in_left | in_right)];
}

Record* RecordMap::emptier_slot(const Places& p) {
  // Into the emptier of the two buckets: keeping buckets evenly filled keeps both of a key's
  // buckets from being full, which is what costs (the moves in place_crowded() touch cold buckets).
  Bucket& left = left_[p.left];
  Bucket& right = right_[p.right];
  const unsigned free_left = free_mask(left), free_right = free_mask(right);
  if ((free_left | free_right) == 0) return nullptr;
  // Which is emptier is random: chosen by index, as in find().
  Bucket* const own[2] = {&left, &right};
  const unsigned free[2] = {free_left, free_right};
  const int side = slots_in(free_left) >= slots_in(free_right) ? 0 : 1;
  return &own[side]->slots[__builtin_ctz(free[side])];
}

Record* RecordMap::place(Record& r) {
  const Places p = places(r.engine);
  if (Record* s = emptier_slot(p)) {
    *s = r;
    return s;
  }
  return place_crowded(r, p);
}

Record* RecordMap::place_crowded(Record& r, const Places& p) {
  const uint64_t engine = r.engine;
  Bucket* const own[2] = {&left_[p.left], &right_[p.right]};
  // Both full. First look one move ahead: a resident of either bucket whose bucket in the other
  // table has a free slot moves there and `r` takes its slot. The eight other buckets are
  // independent loads, so their misses overlap; a walk would take them one after another.
  Bucket* other[2 * kSlots];
  for (int k = 0; k < kSlots; ++k) {
    other[k] = &right_[places(own[0]->slots[k].engine).right];
    other[kSlots + k] = &left_[places(own[1]->slots[k].engine).left];
  }
  for (int k = 0; k < 2 * kSlots; ++k) {
    if (Record* s = free_slot(*other[k])) {
      Record& resident = own[k / kSlots]->slots[k % kSlots];
      *s = resident;
      resident = r;
      return &resident;
    }
  }
  // Then a random walk: evict a resident into its bucket in the other table, and so on.
  bool left = (next_walk() >> 63) != 0;
  Bucket* b = left ? own[0] : own[1];
  for (int moves = 0; moves < kMaxMoves; ++moves) {
    std::swap(r, b->slots[next_walk() >> 62]);
    left = !left;
    const Places q = places(r.engine);
    b = left ? &left_[q.left] : &right_[q.right];
    if (Record* s = free_slot(*b)) {
      *s = r;
      return find(engine);  // the walk may have moved the new record on
    }
  }
  return nullptr;
}

Record* RecordMap::insert(uint64_t engine, RunId run, uint16_t offset, TierCopies copies) {
  assert(run != kNoRun && "kNoRun marks an empty slot");
  if ((size_ + 1) * kMaxLoadDen > capacity() * kMaxLoadNum) grow(size_ + 1);
  const Places p = places(engine);
  Record* at = emptier_slot(p);
  if (at != nullptr) {
    // Written from registers: a record built on the stack and copied whole would be read back
    // with one 16-byte load the store buffer cannot forward from its four field stores (a stall
    // on every insert, where a sixth of place()'s profile samples sat).
    *at = Record{engine, run, offset, copies};
    ++size_;
    return at;
  }
  Record r{engine, run, offset, copies};
  at = place_crowded(r, p);
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
  left_.reset();
  right_.reset();
  left_count_ = right_count_ = 0;
  size_ = 0;
}

void RecordMap::grow(size_t min_records) {
  // Place every record of the old tables into new ones, which replace them only once all are in:
  // an unlucky table (a walk gave up) is dropped for a slightly bigger one, rebuilt from the old.
  std::unique_ptr<Bucket[]> old[2] = {std::move(left_), std::move(right_)};
  const size_t old_count[2] = {left_count_, right_count_};
  min_records = std::max(min_records, reserved_);
  size_t buckets = (min_records * kGrownLoadDen / kGrownLoadNum + kSlots - 1) / kSlots;
  buckets = std::max(buckets, old_count[0] + old_count[1] + 2);
  for (;;) {
    // At least `buckets` in all, about half on each side.
    left_count_ =
        std::max<size_t>(1, allocation_bytes(buckets / 2 * sizeof(Bucket), true) / sizeof(Bucket));
    const size_t right_min = buckets > left_count_ ? buckets - left_count_ : 1;
    right_count_ = allocation_bytes(right_min * sizeof(Bucket), false) / sizeof(Bucket);
    left_.reset(new Bucket[left_count_]);
    right_.reset(new Bucket[right_count_]);
    bool placed_all = true;
    for (int t = 0; t < 2 && placed_all; ++t) {
      for (size_t b = 0; b < old_count[t] && placed_all; ++b) {
        for (Record r : old[t][b].slots) {
          if (r.run != kNoRun && place(r) == nullptr) {
            placed_all = false;
            break;
          }
        }
      }
    }
    if (placed_all) return;
    buckets = left_count_ + right_count_;
    buckets += buckets / 8 + 1;
  }
}

}  // namespace kvgate::index::chain::detail
