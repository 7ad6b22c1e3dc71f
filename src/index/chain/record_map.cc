#include "index/chain/detail/record_map.h"

#include <utility>

namespace kvgate::index::chain::detail {

Record* RecordMap::find(uint64_t engine) {
  if (size_ == 0) return nullptr;
  size_t i = home(engine);
  for (size_t d = 0;; ++d, i = next(i)) {
    Record& s = slots_[i];
    if (s.run == kNoRun || distance(i, home(s.engine)) < d) return nullptr;
    if (s.engine == engine) return &s;
  }
}

Record* RecordMap::place(Record r) {
  size_t i = home(r.engine);
  Record* placed = nullptr;
  for (size_t d = 0;; ++d, i = next(i)) {
    Record& s = slots_[i];
    if (s.run == kNoRun) {
      s = r;
      return placed ? placed : &s;
    }
    const size_t sd = distance(i, home(s.engine));
    if (sd < d) {
      // Robin Hood: the richer resident moves on, the poorer newcomer takes its slot.
      std::swap(s, r);
      if (!placed) placed = &s;
      d = sd;
    }
  }
}

Record* RecordMap::insert(uint64_t engine, RunId run, uint16_t offset, TierCopies copies) {
  if ((size_ + 1) * 5 > capacity_ * 4) grow();
  ++size_;
  return place(Record{engine, run, offset, copies});
}

void RecordMap::erase(Record* r) {
  size_t i = static_cast<size_t>(r - slots_.get());
  // Backward shift: pull each following displaced record one slot back.
  for (size_t j = next(i);; j = next(j)) {
    Record& s = slots_[j];
    if (s.run == kNoRun || distance(j, home(s.engine)) == 0) break;
    slots_[i] = s;
    i = j;
  }
  slots_[i] = Record{};
  --size_;
}

void RecordMap::clear() {
  slots_.reset();
  capacity_ = 0;
  size_ = 0;
}

void RecordMap::grow() {
  const size_t new_capacity = capacity_ < 16 ? 16 : capacity_ + capacity_ / 2;
  std::unique_ptr<Record[]> old = std::move(slots_);
  const size_t old_capacity = capacity_;
  slots_.reset(new Record[new_capacity]);
  capacity_ = new_capacity;
  for (size_t i = 0; i < old_capacity; ++i) {
    if (old[i].run != kNoRun) place(old[i]);
  }
}

}  // namespace kvgate::index::chain::detail
