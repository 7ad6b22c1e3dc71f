#include "index/chain/detail/core.h"

#include <algorithm>

#include "index/chain/detail/child_table.h"

namespace kvgate::index::chain::detail {

SeqHash IndexCore::seq_at(RunId run, uint32_t offset) const {
  const Run& r = arena.at(run);
  for (;;) {
    const uint32_t v1 = r.version.load(std::memory_order_acquire);
    if (v1 & 1) {
      cpu_pause();
      continue;
    }
    const Word* h = r.hashes.load(std::memory_order_acquire);
    SeqHash s = 0;
    if (h != nullptr && offset < WordSlab::capacity(h))
      s = WordSlab::data(h)[offset].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r.version.load(std::memory_order_relaxed) == v1) return s;
  }
}

RunId IndexCore::new_run(RunId parent, uint32_t offset, SeqHash seq, size_t capacity) {
  const RunId id = arena.allocate();
  Run& r = arena.at(id);
  capacity = std::clamp<size_t>(capacity, 1, kMaxRunLength);
  Word* hashes = slab.allocate(capacity);
  Word* counts = slab.allocate(count_words(WordSlab::capacity(hashes)));
  WordSlab::data(hashes)[0].store(seq, std::memory_order_relaxed);
  for (size_t i = 0; i < WordSlab::capacity(counts); ++i)
    WordSlab::data(counts)[i].store(0, std::memory_order_relaxed);
  RunGuard g(arena, id);
  r.begin_write();
  r.hashes.store(hashes, std::memory_order_release);
  r.entries.store(nullptr, std::memory_order_relaxed);
  r.entry_count.store(0, std::memory_order_relaxed);
  r.length.store(1, std::memory_order_relaxed);
  r.end_write();
  r.live = true;
  r.parent = parent;
  r.parent_offset = static_cast<uint16_t>(offset);
  r.memberships = 0;
  r.holder_counts = counts;
  r.latest_child.store(kNoRun, std::memory_order_relaxed);  // a recycled slot's hint is not ours
  counters.runs_created.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void IndexCore::truncate_locked(Run& r) {
  const uint32_t len = r.length.load(std::memory_order_relaxed);
  uint32_t end = len;
  while (end > 0 && count_at(r.holder_counts, end - 1) == 0) --end;
  if (end == len) return;
  const int64_t max_child = ChildTable::max_offset(r);  // -1 without children
  end = std::max<uint32_t>(end, static_cast<uint32_t>(std::max<int64_t>(max_child, 0)));
  if (end >= len || end == 0) return;  // a run emptied entirely dies instead
  r.begin_write();
  r.length.store(end, std::memory_order_relaxed);
  r.end_write();
  counters.truncations.fetch_add(1, std::memory_order_relaxed);
}

void IndexCore::kill(RunId rid) {
  while (rid != kNoRun && rid != kRootRun) {
    Run& r = arena.at(rid);
    RunId parent;
    uint32_t offset;
    SeqHash first;
    {
      RunGuard g(arena, rid);
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
      Run& p = arena.at(parent);
      RunGuard g(arena, parent);
      ChildTable::erase(slab, p, offset, first);
      // A hint only, but a stale one would send lookups to load an unrelated run.
      if (p.latest_child.load(std::memory_order_relaxed) == rid)
        p.latest_child.store(kNoRun, std::memory_order_relaxed);
      if (p.live && parent != kRootRun) truncate_locked(p);
      if (dead_candidate_locked(parent, p)) next = parent;
    }
    {
      RunGuard g(arena, rid);
      Word* hashes = r.hashes.exchange(nullptr, std::memory_order_relaxed);
      Word* entries = r.entries.exchange(nullptr, std::memory_order_relaxed);
      ChildTable::release(slab, r);
      slab.free(hashes);
      slab.free(entries);
      slab.free(r.holder_counts);
      r.holder_counts = nullptr;
    }
    arena.free(rid);
    counters.runs_freed.fetch_add(1, std::memory_order_relaxed);
    rid = next;
  }
}

}  // namespace kvgate::index::chain::detail
