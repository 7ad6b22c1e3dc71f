#include "index/chain/detail/run_session.h"

#include <algorithm>

#include "index/chain/detail/child_table.h"
#include "index/chain/detail/prefetch.h"

namespace kvgate::index::chain::detail {

bool RunSession::open(RunId rid, uint32_t first_offset) {
  close();
  Run& r = core_.arena.at(rid);
  // The run's lines are asked for before the lock is taken: the lock's exchange holds back every
  // load after it until its own line arrives.
  prefetch_line(&r);
  prefetch_line(reinterpret_cast<const char*>(&r + 1) - 1);
  core_.arena.lock(rid);
  if (!r.live) {
    core_.arena.unlock(rid);
    return false;
  }
  if (r.holder_counts != nullptr) prefetch_line(WordSlab::data(r.holder_counts) + first_offset / 4);
  run_ = rid;
  r_ = &r;
  len_ = published_len_ = r.length.load(std::memory_order_relaxed);
  hashes_ = published_hashes_ = r.hashes.load(std::memory_order_relaxed);
  // The holder's entry (binary search: entries are sorted by holder).
  const Word* e = r.entries.load(std::memory_order_relaxed);
  const size_t n = r.entry_count.load(std::memory_order_relaxed);
  const size_t lo = first_not_before(0, n, [&](size_t i) {
    return HolderEntry::unpack(WordSlab::data(e)[i].load(std::memory_order_relaxed)).holder <
           holder_;
  });
  idx_ = lo;
  found_ =
      lo < n &&
      HolderEntry::unpack(WordSlab::data(e)[lo].load(std::memory_order_relaxed)).holder == holder_;
  original_ = found_ ? HolderEntry::unpack(WordSlab::data(e)[lo].load(std::memory_order_relaxed))
                     : HolderEntry{holder_, 0, 0};
  entry_ = original_;
  tail_released_ = false;
  return true;
}

SeqHash RunSession::hash_at(uint32_t offset) const {
  return offset < len_ ? WordSlab::data(hashes_)[offset].load(std::memory_order_relaxed) : 0;
}

void RunSession::grow_hashes(size_t positions) {
  Word* bigger = core_.slab.allocate(std::max<size_t>(positions, 2 * static_cast<size_t>(len_)));
  for (uint32_t i = 0; i < len_; ++i) {
    WordSlab::data(bigger)[i].store(WordSlab::data(hashes_)[i].load(std::memory_order_relaxed),
                                    std::memory_order_relaxed);
  }
  if (hashes_ != published_hashes_) core_.slab.free(hashes_);  // never seen by a reader
  hashes_ = bigger;
}

void RunSession::append(SeqHash seq) {
  if (len_ + 1 > WordSlab::capacity(hashes_)) grow_hashes(len_ + 1);
  // Counts are writer-only: grow them at once.
  if (count_words(len_ + 1) > WordSlab::capacity(r_->holder_counts)) {
    Word* counts = core_.slab.allocate(count_words(WordSlab::capacity(hashes_)));
    const size_t old_words = WordSlab::capacity(r_->holder_counts);
    for (size_t i = 0; i < WordSlab::capacity(counts); ++i) {
      WordSlab::data(counts)[i].store(
          i < old_words ? WordSlab::data(r_->holder_counts)[i].load(std::memory_order_relaxed) : 0,
          std::memory_order_relaxed);
    }
    core_.slab.free(r_->holder_counts);
    r_->holder_counts = counts;
  }
  // Ask for the lines the appends after this one write, two lines ahead, once a line: a run's
  // hash and count arrays are slab blocks gone cold since they were recycled, and stores that
  // all miss fill the store buffer (stored blocks 75 to 79 ns against 83 to 85). Past the block's
  // end is harmless: a prefetch never faults.
  if ((len_ & 7) == 0) {
    prefetch_line(WordSlab::data(hashes_) + len_ + 16);
    if ((len_ & 31) == 0) prefetch_line(WordSlab::data(r_->holder_counts) + len_ / 4 + 16);
  }
  // Beyond the published length: no reader looks here until close() publishes it.
  WordSlab::data(hashes_)[len_].store(seq, std::memory_order_relaxed);
  set_count(r_->holder_counts, len_, 0);
  ++len_;
  ++appends_;
}

bool RunSession::append_held(SeqHash seq, bool device) {
  const uint32_t at = len_;
  if (entry_.any != at || (device && entry_.device != at) || !prefix_only() || !can_append() ||
      has_child(at, seq)) {
    return false;
  }
  append(seq);
  count_holder(at, +1);
  entry_.any = static_cast<uint16_t>(at + 1);
  if (device) entry_.device = static_cast<uint16_t>(at + 1);
  return true;
}

bool RunSession::release_held(uint32_t offset, bool device) {
  if (offset + 1 != entry_.any || (device ? entry_.device != offset + 1 : entry_.device > offset) ||
      !prefix_only()) {
    return false;
  }
  // Removals walk back through the run: ask for the count line before this one a while ahead.
  if ((offset & 15) == 0 && offset >= 32)
    prefetch_line(WordSlab::data(r_->holder_counts) + (offset - 32) / 4);
  count_holder(offset, -1);
  entry_.any = static_cast<uint16_t>(offset);
  if (device) entry_.device = static_cast<uint16_t>(offset);
  return true;
}

bool RunSession::has_child(uint32_t offset, SeqHash seq) const {
  return r_->children.load(std::memory_order_relaxed) != nullptr &&
         ChildTable::find(*r_, offset, seq) != kNoRun;
}

RunId RunSession::child(uint32_t offset, SeqHash seq, size_t capacity) {
  RunId c = ChildTable::find(*r_, offset, seq);
  if (c != kNoRun) return c;
  c = core_.new_run(run_, offset, seq, capacity);
  ChildTable::insert(core_.slab, *r_, offset, seq, c);
  // Lookups guess a run's latest child only below runs with a few children; a popular prefix's
  // hint is left alone, so that making a child under it does not dirty the line lookups read.
  if (r_->children_slots.load(std::memory_order_relaxed) <= kLatestChildMaxSlots)
    r_->latest_child.store(c, std::memory_order_relaxed);
  return c;
}

void RunSession::adjust(uint32_t offset, int d_any, int d_device) {
  const uint8_t extra = hs_.extra_bits(run_, offset);
  const bool held_any = offset < entry_.any || (extra & kAnyBit);
  const bool held_device = offset < entry_.device || (extra & kDeviceBit);

  const uint64_t key = place_key(run_, offset);
  auto multi = hs_.multi.empty() ? hs_.multi.end() : hs_.multi.find(key);
  int64_t n_any = multi != hs_.multi.end() ? multi->second.first : held_any;
  int64_t n_device = multi != hs_.multi.end() ? multi->second.second : held_device;
  n_any += d_any;
  n_device += d_device;
  if (n_any >= 2) {
    hs_.multi[key] = {static_cast<uint32_t>(n_any), static_cast<uint32_t>(n_device)};
  } else if (multi != hs_.multi.end()) {
    hs_.multi.erase(multi);
  }
  const bool now_any = n_any > 0;
  const bool now_device = n_device > 0;
  if (now_any == held_any && now_device == held_device) return;

  // Move the class's contiguous prefix, or its extras past a gap.
  uint32_t prefix[2] = {entry_.any, entry_.device};
  const auto set = [&](int cls, uint8_t bit) {
    uint32_t& p = prefix[cls];
    if (offset != p) {
      hs_.set_extra(run_, offset, bit);
      return;
    }
    ++p;
    while (hs_.extra_bits(run_, p) & bit) {
      hs_.clear_extra(run_, p, bit);
      ++p;
    }
  };
  const auto clear = [&](int cls, uint8_t bit) {
    uint32_t& p = prefix[cls];
    if (offset >= p) {
      hs_.clear_extra(run_, offset, bit);
      return;
    }
    for (uint32_t o = offset + 1; o < p; ++o) hs_.set_extra(run_, o, bit);
    p = offset;
  };
  if (now_any && !held_any) set(0, kAnyBit);
  if (now_device && !held_device) set(1, kDeviceBit);
  if (!now_device && held_device) clear(1, kDeviceBit);
  if (!now_any && held_any) clear(0, kAnyBit);
  entry_.any = static_cast<uint16_t>(prefix[0]);
  entry_.device = static_cast<uint16_t>(prefix[1]);

  if (now_any != held_any) count_holder(offset, now_any ? 1 : -1);
}

void RunSession::count_holder(uint32_t offset, int delta) {
  const uint32_t c = count_at(r_->holder_counts, offset) + delta;
  set_count(r_->holder_counts, offset, c);
  if (delta > 0 && c == 1) ++d_resident_;
  if (delta < 0 && c == 0) {
    --d_resident_;
    if (offset + 1 == len_) tail_released_ = true;
  }
  r_->memberships += delta;
  d_memberships_ += delta;
}

void RunSession::publish_entry() {
  Word* entries = r_->entries.load(std::memory_order_relaxed);
  const uint32_t n = r_->entry_count.load(std::memory_order_relaxed);
  if (found_ && entry_.any == 0) {
    for (uint32_t i = static_cast<uint32_t>(idx_); i + 1 < n; ++i) {
      WordSlab::data(entries)[i].store(
          WordSlab::data(entries)[i + 1].load(std::memory_order_relaxed),
          std::memory_order_relaxed);
    }
    r_->entry_count.store(n - 1, std::memory_order_relaxed);
  } else if (found_) {
    WordSlab::data(entries)[idx_].store(entry_.pack(), std::memory_order_relaxed);
  } else if (entry_.any > 0) {
    for (uint32_t i = n; i > idx_; --i) {
      WordSlab::data(entries)[i].store(
          WordSlab::data(entries)[i - 1].load(std::memory_order_relaxed),
          std::memory_order_relaxed);
    }
    WordSlab::data(entries)[idx_].store(entry_.pack(), std::memory_order_relaxed);
    r_->entry_count.store(n + 1, std::memory_order_relaxed);
  }
}

RunId RunSession::close() {
  if (run_ == kNoRun) return kNoRun;
  Run& r = *r_;
  const bool entry_changed = entry_.any != original_.any || entry_.device != original_.device;
  if (entry_changed || len_ != published_len_ || hashes_ != published_hashes_) {
    // An insertion into a full entry table moves the table to a bigger block, copied before the
    // write section; readers keep using the old block until the pointer changes inside it.
    Word* entries = r.entries.load(std::memory_order_relaxed);
    Word* replaced = nullptr;
    bool new_table = false;
    const uint32_t n = r.entry_count.load(std::memory_order_relaxed);
    if (!found_ && entry_.any > 0 && (entries == nullptr || n + 1 > WordSlab::capacity(entries))) {
      Word* bigger = core_.slab.allocate(std::max<size_t>(2, 2 * static_cast<size_t>(n)));
      for (uint32_t i = 0; i < n; ++i) {
        WordSlab::data(bigger)[i].store(WordSlab::data(entries)[i].load(std::memory_order_relaxed),
                                        std::memory_order_relaxed);
      }
      replaced = entries;
      entries = bigger;
      new_table = true;
    }
    r.begin_write();
    if (new_table) r.entries.store(entries, std::memory_order_release);
    if (entry_changed) publish_entry();
    r.hashes.store(hashes_, std::memory_order_release);
    r.length.store(len_, std::memory_order_relaxed);
    r.end_write();
    core_.slab.free(replaced);
    if (hashes_ != published_hashes_) core_.slab.free(published_hashes_);
  }
  // The index-wide counters, once per session rather than per block (stats() is exact whenever no
  // session is open).
  if (d_memberships_ != 0) {
    const uint64_t before = hs_.memberships;
    hs_.memberships = static_cast<uint64_t>(static_cast<int64_t>(before) + d_memberships_);
    core_.memberships.fetch_add(static_cast<uint64_t>(d_memberships_), std::memory_order_relaxed);
    if (before == 0 && hs_.memberships > 0) core_.holders.fetch_add(1, std::memory_order_relaxed);
    if (before > 0 && hs_.memberships == 0) core_.holders.fetch_sub(1, std::memory_order_relaxed);
  }
  if (d_resident_ != 0)
    core_.resident.fetch_add(static_cast<uint64_t>(d_resident_), std::memory_order_relaxed);
  if (appends_ != 0) core_.counters.appends.fetch_add(appends_, std::memory_order_relaxed);
  d_memberships_ = 0;
  d_resident_ = 0;
  appends_ = 0;
  if (tail_released_) core_.truncate_locked(r);
  const bool dead = core_.dead_candidate_locked(run_, r);
  const RunId rid = run_;
  core_.arena.unlock(run_);
  run_ = kNoRun;
  r_ = nullptr;
  return dead ? rid : kNoRun;
}

}  // namespace kvgate::index::chain::detail
