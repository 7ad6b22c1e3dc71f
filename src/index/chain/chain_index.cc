#include "index/chain/chain_index.h"

#include <algorithm>
#include <vector>

#include "index/chain/detail/child_table.h"
#include "index/detail/event_checks.h"

namespace kvgate::index::chain {

using detail::ChildTable;
using detail::HolderEntry;
using detail::kMaxRunLength;
using detail::kNoRun;
using detail::kRootRun;
using detail::Record;
using detail::Run;
using detail::RunGuard;
using detail::RunId;
using detail::TierCopies;
using detail::Word;
using detail::WordSlab;

namespace {

constexpr uint8_t kAny = 1;
constexpr uint8_t kDevice = 2;
constexpr size_t kDeviceTier = static_cast<size_t>(Tier::kDevice);

uint64_t place_key(RunId run, uint32_t offset) { return (uint64_t{run} << 16) | offset; }

// Per-position holder counts: u32, two per word.
uint32_t count_at(const Word* counts, uint32_t i) {
  return static_cast<uint32_t>(WordSlab::data(counts)[i / 2].load(std::memory_order_relaxed) >>
                               (32 * (i % 2)));
}
void set_count(Word* counts, uint32_t i, uint32_t v) {
  Word& w = WordSlab::data(counts)[i / 2];
  const uint64_t shift = 32 * (i % 2);
  const uint64_t old = w.load(std::memory_order_relaxed);
  w.store((old & ~(uint64_t{0xffffffff} << shift)) | (uint64_t{v} << shift),
          std::memory_order_relaxed);
}
size_t count_words(size_t positions) { return (positions + 1) / 2; }

void pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

// Everything the index keeps for one holder, owned by the lane that applies its events.
struct ChainIndex::HolderState {
  detail::RecordMap records;
  // Positions held beyond a gap in the holder's prefix of a run (run -> sorted offset << 2 | bits):
  // the runs' entries only carry the contiguous prefixes lookups need.
  absl::flat_hash_map<RunId, std::vector<uint32_t>> extras;
  // Places where two or more records sit (two engine hashes for one block): place -> records
  // holding it on any tier, on the device tier.
  absl::flat_hash_map<uint64_t, std::pair<uint32_t, uint32_t>> multi;
  // Copy counts above 15: (engine hash, tier) -> copies beyond 15.
  absl::flat_hash_map<std::pair<uint64_t, uint8_t>, uint32_t> overflow;
  uint64_t memberships = 0;
  uint64_t accounted_bytes = 0;

  uint32_t copies(const Record& r, size_t tier) const {
    const uint32_t n = r.copies.get(tier);
    if (n < 15) return n;
    auto it = overflow.find({r.engine, static_cast<uint8_t>(tier)});
    return n + (it == overflow.end() ? 0 : it->second);
  }
  void add_copy(Record& r, size_t tier) {
    const uint32_t n = r.copies.get(tier);
    if (n < 15) {
      r.copies.set(tier, n + 1);
    } else {
      ++overflow[{r.engine, static_cast<uint8_t>(tier)}];
    }
  }
  void drop_copy(Record& r, size_t tier) {
    auto it = overflow.find({r.engine, static_cast<uint8_t>(tier)});
    if (it != overflow.end()) {
      if (--it->second == 0) overflow.erase(it);
      return;
    }
    r.copies.set(tier, r.copies.get(tier) - 1);
  }
  void drop_overflow(const Record& r) {
    if (overflow.empty()) return;
    for (uint8_t t = 0; t < kTierCount; ++t) overflow.erase({r.engine, t});
  }

  uint8_t extra_bits(RunId run, uint32_t offset) const {
    auto it = extras.find(run);
    if (it == extras.end()) return 0;
    const auto& v = it->second;
    auto p = std::lower_bound(v.begin(), v.end(), offset << 2);
    return (p != v.end() && (*p >> 2) == offset) ? static_cast<uint8_t>(*p & 3) : 0;
  }
  void set_extra(RunId run, uint32_t offset, uint8_t bit) {
    auto& v = extras[run];
    auto p = std::lower_bound(v.begin(), v.end(), offset << 2);
    if (p != v.end() && (*p >> 2) == offset) {
      *p |= bit;
    } else {
      v.insert(p, (offset << 2) | bit);
    }
  }
  void clear_extra(RunId run, uint32_t offset, uint8_t bit) {
    auto it = extras.find(run);
    if (it == extras.end()) return;
    auto& v = it->second;
    auto p = std::lower_bound(v.begin(), v.end(), offset << 2);
    if (p == v.end() || (*p >> 2) != offset) return;
    *p &= ~static_cast<uint32_t>(bit);
    if ((*p & 3) == 0) v.erase(p);
    if (v.empty()) extras.erase(it);
  }
  uint64_t bytes() const {
    // Hash-map slots as abseil lays them out (value + one control byte), vectors by capacity.
    uint64_t b = sizeof(HolderState) + records.bytes();
    b += extras.capacity() * (sizeof(std::pair<RunId, std::vector<uint32_t>>) + 1);
    for (const auto& [run, v] : extras) b += v.capacity() * sizeof(uint32_t);
    b += multi.capacity() * (sizeof(std::pair<uint64_t, std::pair<uint32_t, uint32_t>>) + 1);
    b += overflow.capacity() * (sizeof(std::pair<std::pair<uint64_t, uint8_t>, uint32_t>) + 1);
    return b;
  }
};

ChainIndex::ChainIndex(const IndexerOptions& options, int numa_node)
    : hasher_(options.hash_seed), slab_(numa_node) {
  const RunId root = arena_.allocate();
  Run& r = arena_.at(root);
  RunGuard g(r);
  r.live = true;
  r.parent = kNoRun;
}

ChainIndex::~ChainIndex() {
  for (auto& chunk : holder_chunks_) {
    std::atomic<HolderState*>* c = chunk.load(std::memory_order_relaxed);
    if (c == nullptr) continue;
    for (uint32_t i = 0; i < (1u << kHolderChunkShift); ++i)
      delete c[i].load(std::memory_order_relaxed);
    delete[] c;
  }
}

ChainIndex::HolderState* ChainIndex::find_state(uint32_t holder) const {
  const uint32_t chunk = holder >> kHolderChunkShift;
  if (chunk >= kHolderChunks) return nullptr;
  std::atomic<HolderState*>* c = holder_chunks_[chunk].load(std::memory_order_acquire);
  return c ? c[holder & ((1u << kHolderChunkShift) - 1)].load(std::memory_order_acquire) : nullptr;
}

ChainIndex::HolderState& ChainIndex::state(uint32_t holder) {
  if (HolderState* hs = find_state(holder)) return *hs;
  const uint32_t chunk = holder >> kHolderChunkShift;
  std::atomic<HolderState*>* c = holder_chunks_[chunk].load(std::memory_order_acquire);
  if (c == nullptr) {
    std::lock_guard<std::mutex> lock(holder_chunks_mu_);
    c = holder_chunks_[chunk].load(std::memory_order_acquire);
    if (c == nullptr) {
      c = new std::atomic<HolderState*>[1u << kHolderChunkShift];
      for (uint32_t i = 0; i < (1u << kHolderChunkShift); ++i)
        c[i].store(nullptr, std::memory_order_relaxed);
      holder_chunks_[chunk].store(c, std::memory_order_release);
    }
  }
  auto* hs = new HolderState();
  c[holder & ((1u << kHolderChunkShift) - 1)].store(hs, std::memory_order_release);
  return *hs;
}

void ChainIndex::account(HolderState& hs) {
  const uint64_t now = hs.bytes();
  if (now >= hs.accounted_bytes) {
    holder_bytes_.fetch_add(now - hs.accounted_bytes, std::memory_order_relaxed);
  } else {
    holder_bytes_.fetch_sub(hs.accounted_bytes - now, std::memory_order_relaxed);
  }
  hs.accounted_bytes = now;
}

// ---------------------------------------------------------------------------------------------
// Runs

SeqHash ChainIndex::seq_at(RunId run, uint32_t offset) const {
  const Run& r = arena_.at(run);
  for (;;) {
    const uint64_t v1 = r.version.load(std::memory_order_acquire);
    if (v1 & 1) {
      pause();
      continue;
    }
    const Word* h = r.hashes.load(std::memory_order_relaxed);
    SeqHash s = 0;
    if (h != nullptr && offset < WordSlab::capacity(h))
      s = WordSlab::data(h)[offset].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r.version.load(std::memory_order_relaxed) == v1) return s;
  }
}

RunId ChainIndex::new_run(RunId parent, uint32_t offset, SeqHash seq) {
  const RunId id = arena_.allocate();
  Run& r = arena_.at(id);
  Word* hashes = slab_.allocate(4);
  Word* counts = slab_.allocate(count_words(4));
  WordSlab::data(hashes)[0].store(seq, std::memory_order_relaxed);
  for (size_t i = 0; i < WordSlab::capacity(counts); ++i)
    WordSlab::data(counts)[i].store(0, std::memory_order_relaxed);
  RunGuard g(r);
  r.begin_write();
  r.hashes.store(hashes, std::memory_order_relaxed);
  r.entries.store(nullptr, std::memory_order_relaxed);
  r.entry_count.store(0, std::memory_order_relaxed);
  r.length.store(1, std::memory_order_relaxed);
  r.end_write();
  r.live = true;
  r.parent = parent;
  r.parent_offset = static_cast<uint16_t>(offset);
  r.child_count = 0;
  r.extras = 0;
  r.memberships = 0;
  r.holder_counts = counts;
  counters_.runs_created.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void ChainIndex::append_locked(Run& r, SeqHash seq) {
  const uint32_t len = r.length.load(std::memory_order_relaxed);
  Word* hashes = r.hashes.load(std::memory_order_relaxed);
  Word* old_hashes = nullptr;
  if (len + 1 > WordSlab::capacity(hashes)) {
    old_hashes = hashes;
    hashes = slab_.allocate(std::max<size_t>(4, 2 * static_cast<size_t>(len)));
    for (uint32_t i = 0; i < len; ++i) {
      WordSlab::data(hashes)[i].store(WordSlab::data(old_hashes)[i].load(std::memory_order_relaxed),
                                      std::memory_order_relaxed);
    }
  }
  if (count_words(len + 1) > WordSlab::capacity(r.holder_counts)) {
    Word* counts = slab_.allocate(std::max<size_t>(2, count_words(2 * static_cast<size_t>(len))));
    const size_t old_words = WordSlab::capacity(r.holder_counts);
    for (size_t i = 0; i < WordSlab::capacity(counts); ++i) {
      WordSlab::data(counts)[i].store(
          i < old_words ? WordSlab::data(r.holder_counts)[i].load(std::memory_order_relaxed) : 0,
          std::memory_order_relaxed);
    }
    slab_.free(r.holder_counts);
    r.holder_counts = counts;
  }
  set_count(r.holder_counts, len, 0);
  r.begin_write();
  WordSlab::data(hashes)[len].store(seq, std::memory_order_relaxed);
  r.hashes.store(hashes, std::memory_order_relaxed);
  r.length.store(len + 1, std::memory_order_relaxed);
  r.end_write();
  if (old_hashes != nullptr) slab_.free(old_hashes);
  counters_.appends.fetch_add(1, std::memory_order_relaxed);
}

std::pair<RunId, uint32_t> ChainIndex::locate_locked(RunId qrid, int64_t qoff, SeqHash seq) {
  const uint32_t next = static_cast<uint32_t>(qoff + 1);
  Run& q = arena_.at(qrid);
  for (;;) {
    // The next position of the same run, read without the lock first.
    if (qrid != kRootRun && seq_at(qrid, next) == seq) {
      q.acquire();
      if (next < q.length.load(std::memory_order_relaxed) &&
          WordSlab::data(q.hashes.load(std::memory_order_relaxed))[next].load(
              std::memory_order_relaxed) == seq) {
        return {qrid, next};
      }
      q.release();
    }
    RunId c = ChildTable::find(q, next, seq);
    if (c == kNoRun) {
      q.acquire();
      const uint32_t len = q.length.load(std::memory_order_relaxed);
      if (qrid != kRootRun && next < len &&
          WordSlab::data(q.hashes.load(std::memory_order_relaxed))[next].load(
              std::memory_order_relaxed) == seq) {
        return {qrid, next};
      }
      c = ChildTable::find(q, next, seq);
      if (c == kNoRun) {
        if (qrid != kRootRun && next == len && len < kMaxRunLength) {
          append_locked(q, seq);
          return {qrid, next};
        }
        c = new_run(qrid, next, seq);
        ChildTable::insert(slab_, q, next, seq, c);
        ++q.child_count;
      }
      q.release();
    }
    Run& cr = arena_.at(c);
    cr.acquire();
    if (cr.live && cr.parent == qrid && cr.parent_offset == next &&
        cr.length.load(std::memory_order_relaxed) > 0 &&
        WordSlab::data(cr.hashes.load(std::memory_order_relaxed))[0].load(
            std::memory_order_relaxed) == seq) {
      return {c, 0};
    }
    // A child being killed, or a stale table entry: look again once it is unlinked.
    cr.release();
    pause();
  }
}

bool ChainIndex::dead_candidate_locked(RunId rid, const Run& r) const {
  return rid != kRootRun && r.live && r.memberships == 0 && r.child_count == 0;
}

void ChainIndex::truncate_locked(Run& r) {
  const uint32_t len = r.length.load(std::memory_order_relaxed);
  uint32_t end = len;
  while (end > 0 && count_at(r.holder_counts, end - 1) == 0) --end;
  if (end == len) return;
  const int64_t max_child = r.child_count > 0 ? ChildTable::max_offset(r) : -1;
  end = std::max<uint32_t>(end, static_cast<uint32_t>(std::max<int64_t>(max_child, 0)));
  if (end >= len || end == 0) return;  // a run emptied entirely dies instead
  r.begin_write();
  r.length.store(end, std::memory_order_relaxed);
  r.end_write();
  counters_.truncations.fetch_add(1, std::memory_order_relaxed);
}

void ChainIndex::kill(RunId rid) {
  while (rid != kNoRun && rid != kRootRun) {
    Run& r = arena_.at(rid);
    RunId parent;
    uint32_t offset;
    SeqHash first;
    {
      RunGuard g(r);
      if (!dead_candidate_locked(rid, r)) return;
      r.live = false;
      parent = r.parent;
      offset = r.parent_offset;
      first = WordSlab::data(r.hashes.load(std::memory_order_relaxed))[0].load(
          std::memory_order_relaxed);
      r.begin_write();
      r.length.store(0, std::memory_order_relaxed);
      r.entry_count.store(0, std::memory_order_relaxed);
      r.end_write();
    }
    RunId next = kNoRun;
    {
      Run& p = arena_.at(parent);
      RunGuard g(p);
      ChildTable::erase(slab_, p, offset, first);
      --p.child_count;
      if (p.live && parent != kRootRun) truncate_locked(p);
      if (dead_candidate_locked(parent, p)) next = parent;
    }
    {
      RunGuard g(r);
      Word* hashes = r.hashes.exchange(nullptr, std::memory_order_relaxed);
      Word* entries = r.entries.exchange(nullptr, std::memory_order_relaxed);
      ChildTable::release(slab_, r);
      slab_.free(hashes);
      slab_.free(entries);
      slab_.free(r.holder_counts);
      r.holder_counts = nullptr;
    }
    arena_.free(rid);
    counters_.runs_freed.fetch_add(1, std::memory_order_relaxed);
    rid = next;
  }
}

// ---------------------------------------------------------------------------------------------
// Holder entries and per-place accounting

namespace {

// Index of `holder` in the run's entry table (lock held), or the insertion point with found=false.
size_t entry_index(const Run& r, uint32_t holder, bool* found) {
  const Word* e = r.entries.load(std::memory_order_relaxed);
  size_t lo = 0, hi = r.entry_count.load(std::memory_order_relaxed);
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint32_t h =
        HolderEntry::unpack(WordSlab::data(e)[mid].load(std::memory_order_relaxed)).holder;
    if (h < holder) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  *found =
      e != nullptr && lo < r.entry_count.load(std::memory_order_relaxed) &&
      HolderEntry::unpack(WordSlab::data(e)[lo].load(std::memory_order_relaxed)).holder == holder;
  return lo;
}

}  // namespace

void ChainIndex::adjust_locked(HolderState& hs, uint32_t holder, RunId rid, Run& r, uint32_t offset,
                               int d_any, int d_device) {
  bool found = false;
  const size_t idx = entry_index(r, holder, &found);
  HolderEntry entry{holder, 0, 0};
  if (found)
    entry = HolderEntry::unpack(WordSlab::data(r.entries.load(std::memory_order_relaxed))[idx].load(
        std::memory_order_relaxed));
  const uint8_t extra = hs.extra_bits(rid, offset);
  const bool held_any = offset < entry.any || (extra & kAny);
  const bool held_device = offset < entry.device || (extra & kDevice);

  const uint64_t key = place_key(rid, offset);
  auto multi = hs.multi.find(key);
  int64_t n_any = multi != hs.multi.end() ? multi->second.first : held_any;
  int64_t n_device = multi != hs.multi.end() ? multi->second.second : held_device;
  n_any += d_any;
  n_device += d_device;
  if (n_any >= 2) {
    hs.multi[key] = {static_cast<uint32_t>(n_any), static_cast<uint32_t>(n_device)};
  } else if (multi != hs.multi.end()) {
    hs.multi.erase(multi);
  }
  const bool now_any = n_any > 0;
  const bool now_device = n_device > 0;
  if (now_any == held_any && now_device == held_device) return;

  // Move the class's contiguous prefix, or its extras past a gap.
  uint32_t prefix[2] = {entry.any, entry.device};
  const auto set = [&](int cls, uint8_t bit) {
    uint32_t& p = prefix[cls];
    if (offset != p) {
      hs.set_extra(rid, offset, bit);
      return;
    }
    ++p;
    while (hs.extra_bits(rid, p) & bit) {
      hs.clear_extra(rid, p, bit);
      ++p;
    }
  };
  const auto clear = [&](int cls, uint8_t bit) {
    uint32_t& p = prefix[cls];
    if (offset >= p) {
      hs.clear_extra(rid, offset, bit);
      return;
    }
    for (uint32_t o = offset + 1; o < p; ++o) hs.set_extra(rid, o, bit);
    p = offset;
  };
  if (now_any && !held_any) set(0, kAny);
  if (now_device && !held_device) set(1, kDevice);
  if (!now_device && held_device) clear(1, kDevice);
  if (!now_any && held_any) clear(0, kAny);

  if (now_any != held_any) {
    const int delta = now_any ? 1 : -1;
    const uint32_t c = count_at(r.holder_counts, offset) + delta;
    set_count(r.holder_counts, offset, c);
    if (now_any && c == 1) resident_.fetch_add(1, std::memory_order_relaxed);
    if (!now_any && c == 0) resident_.fetch_sub(1, std::memory_order_relaxed);
    r.memberships += delta;
    memberships_.fetch_add(static_cast<uint64_t>(static_cast<int64_t>(delta)),
                           std::memory_order_relaxed);
    hs.memberships += delta;
    if (now_any && hs.memberships == 1) holders_.fetch_add(1, std::memory_order_relaxed);
    if (!now_any && hs.memberships == 0) holders_.fetch_sub(1, std::memory_order_relaxed);
  }

  if (prefix[0] != entry.any || prefix[1] != entry.device) {
    const HolderEntry updated{holder, static_cast<uint16_t>(prefix[0]),
                              static_cast<uint16_t>(prefix[1])};
    Word* entries = r.entries.load(std::memory_order_relaxed);
    const uint32_t n = r.entry_count.load(std::memory_order_relaxed);
    if (found && updated.any == 0) {
      r.begin_write();
      for (uint32_t i = static_cast<uint32_t>(idx); i + 1 < n; ++i) {
        WordSlab::data(entries)[i].store(
            WordSlab::data(entries)[i + 1].load(std::memory_order_relaxed),
            std::memory_order_relaxed);
      }
      r.entry_count.store(n - 1, std::memory_order_relaxed);
      r.end_write();
    } else if (found) {
      r.begin_write();
      WordSlab::data(entries)[idx].store(updated.pack(), std::memory_order_relaxed);
      r.end_write();
    } else if (updated.any > 0) {
      Word* old = nullptr;
      Word* target = entries;
      if (entries == nullptr || n + 1 > WordSlab::capacity(entries)) {
        old = entries;
        target = slab_.allocate(std::max<size_t>(2, 2 * static_cast<size_t>(n)));
        for (uint32_t i = 0; i < n; ++i) {
          WordSlab::data(target)[i].store(WordSlab::data(old)[i].load(std::memory_order_relaxed),
                                          std::memory_order_relaxed);
        }
      }
      r.begin_write();
      for (uint32_t i = n; i > idx; --i) {
        WordSlab::data(target)[i].store(
            WordSlab::data(target)[i - 1].load(std::memory_order_relaxed),
            std::memory_order_relaxed);
      }
      WordSlab::data(target)[idx].store(updated.pack(), std::memory_order_relaxed);
      r.entries.store(target, std::memory_order_relaxed);
      r.entry_count.store(n + 1, std::memory_order_relaxed);
      r.end_write();
      if (old != nullptr) slab_.free(old);
    }
  }
  if (!now_any && held_any && offset + 1 == r.length.load(std::memory_order_relaxed))
    truncate_locked(r);
}

// ---------------------------------------------------------------------------------------------
// Events

ApplyResult ChainIndex::apply(HolderId holder, std::span<const Event> events) {
  ApplyResult r;
  HolderState& hs = state(holder.value());
  for (const Event& e : events) {
    if (index::detail::malformed(e)) {
      ++r.malformed_events;
      continue;
    }
    switch (e.kind) {
      case EventKind::kStored:
        store(hs, holder.value(), e, r);
        break;
      case EventKind::kRemoved:
        remove(hs, holder.value(), e, r);
        break;
      case EventKind::kCleared:
        clear_holder(hs, holder.value());
        ++r.clears;
        break;
    }
  }
  account(hs);
  return r;
}

void ChainIndex::store(HolderState& hs, uint32_t holder, const Event& e, ApplyResult& r) {
  const size_t n = e.engine_hashes.size();
  RunId qrun = kRootRun;
  int64_t qoff = -1;
  SeqHash prev = 0;
  if (e.has_parent) {
    const Record* parent = hs.records.find(e.parent);
    if (parent == nullptr) {
      ++r.orphan_events;
      r.orphan_blocks += static_cast<uint32_t>(n);
      return;
    }
    qrun = parent->run;
    qoff = parent->offset;
    prev = seq_at(qrun, parent->offset);
  }
  const size_t tier = static_cast<size_t>(e.tier);
  const int device_delta = tier == kDeviceTier ? 1 : 0;
  for (size_t i = 0; i < n; ++i) {
    const SeqHash seq =
        (i == 0 && !e.has_parent) ? e.local_hashes[0] : hasher_.chain(prev, e.local_hashes[i]);
    const EngineHash engine = e.engine_hashes[i];
    Record* rec = hs.records.find(engine);
    // Latest store wins: an engine hash re-stored at another place moves there. The old place is
    // released only after the new one is held, because the new place may hang below it.
    bool moved = rec != nullptr && seq_at(rec->run, rec->offset) != seq;
    RunId old_run = kNoRun;
    uint32_t old_offset = 0;
    int old_device = 0;
    if (moved) {
      old_run = rec->run;
      old_offset = rec->offset;
      old_device = hs.copies(*rec, kDeviceTier) > 0 ? -1 : 0;
      hs.drop_overflow(*rec);
      ++r.moved_blocks;
    }
    const auto [run, offset] = locate_locked(qrun, qoff, seq);
    Run& target = arena_.at(run);
    rec = hs.records.find(engine);
    if (rec == nullptr || moved) {
      TierCopies copies;
      copies.set(tier, 1);
      if (rec == nullptr) {
        hs.records.insert(engine, run, static_cast<uint16_t>(offset), copies);
      } else {
        rec->run = run;
        rec->offset = static_cast<uint16_t>(offset);
        rec->copies = copies;
      }
      adjust_locked(hs, holder, run, target, offset, +1, device_delta);
    } else {
      const bool first_on_tier = hs.copies(*rec, tier) == 0;
      hs.add_copy(*rec, tier);
      if (first_on_tier && device_delta) adjust_locked(hs, holder, run, target, offset, 0, 1);
    }
    target.release();
    if (moved) {
      Run& old = arena_.at(old_run);
      bool dead = false;
      {
        RunGuard g(old);
        adjust_locked(hs, holder, old_run, old, old_offset, -1, old_device);
        dead = dead_candidate_locked(old_run, old);
      }
      if (dead) kill(old_run);
    }
    ++r.stored_blocks;
    qrun = run;
    qoff = offset;
    prev = seq;
  }
}

void ChainIndex::remove(HolderState& hs, uint32_t holder, const Event& e, ApplyResult& r) {
  const size_t tier = static_cast<size_t>(e.tier);
  for (EngineHash engine : e.engine_hashes) {
    Record* rec = hs.records.find(engine);
    if (rec == nullptr || hs.copies(*rec, tier) == 0) {
      ++r.unknown_removals;
      continue;
    }
    const RunId run = rec->run;
    Run& target = arena_.at(run);
    bool dead = false;
    hs.drop_copy(*rec, tier);
    const bool any_left = rec->copies.any();
    {
      RunGuard g(target);
      const int d_device = (tier == kDeviceTier && hs.copies(*rec, kDeviceTier) == 0) ? -1 : 0;
      adjust_locked(hs, holder, run, target, rec->offset, any_left ? 0 : -1, d_device);
      dead = dead_candidate_locked(run, target);
    }
    if (!any_left) hs.records.erase(rec);
    ++r.removed_blocks;
    if (dead) kill(run);
  }
}

void ChainIndex::clear_holder(HolderState& hs, uint32_t holder) {
  // Group the holder's places by run, then drop its entry and counts run by run.
  absl::flat_hash_map<RunId, std::vector<uint32_t>> places;
  hs.records.for_each([&](const Record& rec) { places[rec.run].push_back(rec.offset); });
  for (auto& [run, offsets] : places) {
    std::sort(offsets.begin(), offsets.end());
    offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    Run& r = arena_.at(run);
    bool dead = false;
    {
      RunGuard g(r);
      bool found = false;
      const size_t idx = entry_index(r, holder, &found);
      if (found) {
        Word* entries = r.entries.load(std::memory_order_relaxed);
        const uint32_t n = r.entry_count.load(std::memory_order_relaxed);
        r.begin_write();
        for (uint32_t i = static_cast<uint32_t>(idx); i + 1 < n; ++i) {
          WordSlab::data(entries)[i].store(
              WordSlab::data(entries)[i + 1].load(std::memory_order_relaxed),
              std::memory_order_relaxed);
        }
        r.entry_count.store(n - 1, std::memory_order_relaxed);
        r.end_write();
      }
      for (uint32_t off : offsets) {
        const uint32_t c = count_at(r.holder_counts, off) - 1;
        set_count(r.holder_counts, off, c);
        if (c == 0) resident_.fetch_sub(1, std::memory_order_relaxed);
      }
      r.memberships -= static_cast<uint32_t>(offsets.size());
      memberships_.fetch_sub(offsets.size(), std::memory_order_relaxed);
      if (r.memberships > 0 || r.child_count > 0) truncate_locked(r);
      dead = dead_candidate_locked(run, r);
    }
    if (dead) kill(run);
  }
  if (hs.memberships > 0) holders_.fetch_sub(1, std::memory_order_relaxed);
  hs.memberships = 0;
  hs.records.clear();
  hs.extras.clear();
  hs.multi.clear();
  hs.overflow.clear();
}

void ChainIndex::remove_holder(HolderId holder) {
  HolderState* hs = find_state(holder.value());
  if (hs == nullptr) return;
  clear_holder(*hs, holder.value());
  hs->extras = {};
  hs->multi = {};
  hs->overflow = {};
  account(*hs);
}

// ---------------------------------------------------------------------------------------------
// Lookup

namespace {

// Per-thread scratch for a run's holder entries: lookups copy them out under the seqlock.
thread_local std::vector<uint64_t> tl_entries;

}  // namespace

void ChainIndex::lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const {
  lookup_traced(chain, out, nullptr);
}

void ChainIndex::lookup_traced(std::span<const SeqHash> chain, std::vector<HolderMatch>& out,
                               uint32_t* runs_walked) const {
  out.clear();
  if (runs_walked) *runs_walked = 0;
  if (chain.empty()) return;
  std::vector<uint64_t>& entries = tl_entries;
  RunId rid = ChildTable::find(arena_.at(kRootRun), 0, chain[0]);
  size_t pos = 0;  // chain position of the current run's offset 0
  bool first = true;
  while (rid != kNoRun && arena_.valid(rid)) {
    const Run& r = arena_.at(rid);
    uint32_t matched = 0;
    bool continues_inside = false;
    size_t alive_bound = 0;
    for (;;) {
      const uint64_t v1 = r.version.load(std::memory_order_acquire);
      if (v1 & 1) {
        pause();
        continue;
      }
      const Word* hashes = r.hashes.load(std::memory_order_relaxed);
      const Word* ents = r.entries.load(std::memory_order_relaxed);
      size_t len = r.length.load(std::memory_order_relaxed);
      size_t n = r.entry_count.load(std::memory_order_relaxed);
      len = hashes ? std::min(len, WordSlab::capacity(hashes)) : 0;
      n = ents ? std::min(n, WordSlab::capacity(ents)) : 0;
      entries.resize(n);
      for (size_t i = 0; i < n; ++i)
        entries[i] = WordSlab::data(ents)[i].load(std::memory_order_relaxed);
      // How far any holder still in the race could reach in this run bounds the comparison.
      alive_bound = 0;
      if (first) {
        for (size_t i = 0; i < n; ++i)
          alive_bound = std::max<size_t>(alive_bound, HolderEntry::unpack(entries[i]).any);
      } else {
        size_t j = 0;
        for (size_t i = 0; i < n && j < out.size(); ++i) {
          const HolderEntry e = HolderEntry::unpack(entries[i]);
          while (j < out.size() && out[j].holder.value() < e.holder) ++j;
          if (j < out.size() && out[j].holder.value() == e.holder && out[j].any_depth == pos) {
            alive_bound = std::max<size_t>(alive_bound, e.any);
          }
        }
      }
      const size_t limit = std::min({len, chain.size() - pos, alive_bound});
      matched = 0;
      const Word* h = hashes ? WordSlab::data(hashes) : nullptr;
      while (matched < limit && h[matched].load(std::memory_order_relaxed) == chain[pos + matched])
        ++matched;
      continues_inside = matched == limit && limit < len && pos + limit < chain.size() &&
                         h[limit].load(std::memory_order_relaxed) == chain[pos + limit];
      const bool valid_start = len > 0 && h[0].load(std::memory_order_relaxed) == chain[pos];
      std::atomic_thread_fence(std::memory_order_acquire);
      if (r.version.load(std::memory_order_relaxed) != v1) continue;
      if (!valid_start) {
        matched = 0;  // a run being killed, or a recycled slot: the chain ends before it
        alive_bound = 0;
      }
      break;
    }
    if (runs_walked) ++*runs_walked;
    if (matched == 0) break;
    if (first) {
      for (uint64_t w : entries) {
        const HolderEntry e = HolderEntry::unpack(w);
        const uint32_t any = std::min<uint32_t>(e.any, matched);
        if (any == 0) continue;
        out.push_back({HolderId(e.holder), std::min<uint32_t>(e.device, matched), any});
      }
      first = false;
    } else {
      size_t j = 0;
      for (uint64_t w : entries) {
        const HolderEntry e = HolderEntry::unpack(w);
        while (j < out.size() && out[j].holder.value() < e.holder) ++j;
        if (j == out.size()) break;
        HolderMatch& m = out[j];
        if (m.holder.value() != e.holder) continue;
        if (m.device_depth == pos && m.any_depth == pos)
          m.device_depth += std::min<uint32_t>(e.device, matched);
        if (m.any_depth == pos) m.any_depth += std::min<uint32_t>(e.any, matched);
      }
    }
    // Continue below this run only if some holder covered everything matched here.
    const size_t frontier = pos + matched;
    bool alive = false;
    for (const HolderMatch& m : out) alive = alive || m.any_depth == frontier;
    if (!alive || continues_inside || frontier >= chain.size()) break;
    rid = ChildTable::find(r, matched, chain[frontier]);
    pos = frontier;
  }
}

// ---------------------------------------------------------------------------------------------
// Statistics and content

IndexStats ChainIndex::stats() const {
  IndexStats s;
  s.holders = holders_.load(std::memory_order_relaxed);
  s.resident_blocks = resident_.load(std::memory_order_relaxed);
  s.memberships = memberships_.load(std::memory_order_relaxed);
  s.bytes = sizeof(*this) + slab_.reserved_bytes() + arena_.reserved_bytes() +
            holder_bytes_.load(std::memory_order_relaxed);
  return s;
}

uint64_t ChainIndex::live_positions() const {
  uint64_t n = 0;
  // Not synchronized with writers: a statistic for benchmarks taken between phases.
  for (RunId id = 1; arena_.valid(id); ++id)
    n += arena_.at(id).length.load(std::memory_order_relaxed);
  return n;
}

void ChainIndex::collect_resident(absl::flat_hash_set<SeqHash>& out) const {
  for (RunId id = 1; arena_.valid(id); ++id) {
    Run& r = arena_.at(id);
    RunGuard g(r);
    if (!r.live) continue;
    const Word* h = r.hashes.load(std::memory_order_relaxed);
    const uint32_t len = r.length.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < len; ++i) {
      if (count_at(r.holder_counts, i) > 0)
        out.insert(WordSlab::data(h)[i].load(std::memory_order_relaxed));
    }
  }
}

namespace {

void append_holder(uint32_t holder, const absl::flat_hash_map<SeqHash, uint8_t>& masks,
                   std::vector<Membership>& out) {
  const size_t start = out.size();
  for (const auto& [seq, mask] : masks) out.push_back({HolderId(holder), seq, mask});
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(),
            [](const Membership& a, const Membership& b) { return a.seq < b.seq; });
}

}  // namespace

Status ChainIndex::holder_memberships(HolderId holder, std::vector<Membership>& out) const {
  out.clear();
  const HolderState* hs = find_state(holder.value());
  if (hs == nullptr) return absl::OkStatus();
  absl::flat_hash_map<SeqHash, uint8_t> masks;
  hs->records.for_each([&](const Record& rec) {
    uint8_t mask = 0;
    for (size_t t = 0; t < kTierCount; ++t) {
      if (hs->copies(rec, t) > 0) mask |= tier_bit(static_cast<Tier>(t));
    }
    masks[seq_at(rec.run, rec.offset)] |= mask;
  });
  append_holder(holder.value(), masks, out);
  return absl::OkStatus();
}

Status ChainIndex::memberships(std::vector<Membership>& out) const {
  out.clear();
  std::vector<Membership> one;
  for (uint32_t chunk = 0; chunk < kHolderChunks; ++chunk) {
    if (holder_chunks_[chunk].load(std::memory_order_acquire) == nullptr) continue;
    for (uint32_t i = 0; i < (1u << kHolderChunkShift); ++i) {
      const uint32_t holder = (chunk << kHolderChunkShift) | i;
      if (find_state(holder) == nullptr) continue;
      if (Status st = holder_memberships(HolderId(holder), one); !st.ok()) return st;
      out.insert(out.end(), one.begin(), one.end());
    }
  }
  return absl::OkStatus();
}

}  // namespace kvgate::index::chain
