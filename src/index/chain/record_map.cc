#include "index/chain/detail/record_map.h"

#include <algorithm>
#include <bit>

// jemalloc's real size for an allocation request, when jemalloc is linked (kvgate's binaries) and
// null otherwise (sanitizer builds).
extern "C" size_t nallocx(size_t size, int flags) __attribute__((weak));

namespace kvgate::index::chain::detail {
namespace {

// The allocator rounds a large table up to its size class (up to a quarter more): use those bytes
// as more groups instead of wasting them.
size_t usable_groups(size_t groups, size_t group_bytes) {
  if (nallocx == nullptr) return groups;
  return nallocx(groups * group_bytes, 0) / group_bytes;
}

uint32_t match(const int8_t* ctrl, int8_t tag) {
  const __m128i c = _mm_load_si128(reinterpret_cast<const __m128i*>(ctrl));
  return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(c, _mm_set1_epi8(tag))));
}
// Slots that are empty or deleted (control bytes with the sign bit set).
uint32_t free_slots(const int8_t* ctrl) {
  return static_cast<uint32_t>(
      _mm_movemask_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(ctrl))));
}

}  // namespace

Record* RecordMap::find(uint64_t engine) {
  if (size_ == 0) return nullptr;
  const uint64_t h = mix(engine);
  const int8_t tag = tag_of(h);
  size_t g = group_of(h);
  for (size_t probed = 0; probed < groups_count_; ++probed, g = next(g)) {
    Group& grp = groups_[g];
    for (uint32_t m = match(grp.ctrl, tag); m != 0; m &= m - 1) {
      Record& r = grp.slots[std::countr_zero(m)];
      if (r.engine == engine) return &r;
    }
    if (match(grp.ctrl, kEmpty) != 0) return nullptr;  // probing never went past this group
  }
  return nullptr;
}

uint32_t RecordMap::touch(uint64_t engine) const {
  if (groups_count_ == 0) return 0;
  const uint64_t h = mix(engine);
  const Group& grp = groups_[group_of(h)];
  const uint32_t m = match(grp.ctrl, tag_of(h)) | free_slots(grp.ctrl);
  return static_cast<uint32_t>(grp.slots[m ? std::countr_zero(m) : 0].run);
}

Record* RecordMap::place(uint64_t h, const Record& r) {
  size_t g = group_of(h);
  for (;;) {
    Group& grp = groups_[g];
    if (const uint32_t m = free_slots(grp.ctrl); m != 0) {
      const int i = std::countr_zero(m);
      if (grp.ctrl[i] == kDeleted) --deleted_;
      grp.ctrl[i] = tag_of(h);
      grp.slots[i] = r;
      return &grp.slots[i];
    }
    g = next(g);
  }
}

Record* RecordMap::insert(uint64_t engine, RunId run, uint16_t offset, TierCopies copies) {
  // Keep used slots (live and deleted) under 15/16: probing 16 slots at a time stays short even
  // that full. When live slots fill it, grow so that they fill 4/5 of the new table (load then
  // swings between 4/5 and 15/16); when tombstones do, rehash at the same size to drop them.
  if ((size_ + deleted_ + 1) * 16 > capacity() * 15) {
    const size_t at_four_fifths = ((size_ + 1) * 5 / 4 + kGroup - 1) / kGroup;
    rehash(deleted_ * 4 > size_ ? std::max(groups_count_, at_four_fifths)
                                : std::max(groups_count_ + 1, at_four_fifths));
  }
  ++size_;
  return place(mix(engine), Record{engine, run, offset, copies});
}

void RecordMap::erase(Record* r) {
  const auto off = reinterpret_cast<const char*>(r) - reinterpret_cast<const char*>(groups_.get());
  const size_t g = static_cast<size_t>(off) / sizeof(Group);
  const int i = static_cast<int>(r - groups_[g].slots);
  // A group that still has an empty slot was never full, so no probe ever passed it: its slot
  // can go back to empty. Otherwise a tombstone keeps later keys findable.
  if (match(groups_[g].ctrl, kEmpty) != 0) {
    groups_[g].ctrl[i] = kEmpty;
  } else {
    groups_[g].ctrl[i] = kDeleted;
    ++deleted_;
  }
  --size_;
}

bool RecordMap::live(const Record* r, uint64_t engine) const {
  const auto off = reinterpret_cast<const char*>(r) - reinterpret_cast<const char*>(groups_.get());
  const size_t g = static_cast<size_t>(off) / sizeof(Group);
  const int i = static_cast<int>(r - groups_[g].slots);
  return groups_[g].ctrl[i] >= 0 && r->engine == engine;
}

void RecordMap::clear() {
  groups_.reset();
  groups_count_ = 0;
  size_ = 0;
  deleted_ = 0;
}

void RecordMap::rehash(size_t groups) {
  groups = usable_groups(groups, sizeof(Group));
  std::unique_ptr<Group[]> old = std::move(groups_);
  const size_t old_count = groups_count_;
  groups_.reset(new Group[groups]);
  groups_count_ = groups;
  for (size_t g = 0; g < groups; ++g) {
    for (int i = 0; i < kGroup; ++i) groups_[g].ctrl[i] = kEmpty;
  }
  deleted_ = 0;
  for (size_t g = 0; g < old_count; ++g) {
    for (int i = 0; i < kGroup; ++i) {
      if (old[g].ctrl[i] >= 0) place(mix(old[g].slots[i].engine), old[g].slots[i]);
    }
  }
}

}  // namespace kvgate::index::chain::detail
