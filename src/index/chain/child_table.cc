#include "index/chain/detail/child_table.h"
#include "index/chain/detail/prefetch.h"

namespace kvgate::index::chain::detail {
namespace {

constexpr uint64_t kOccupied = uint64_t{1} << 63;
constexpr uint64_t kTombstone = uint64_t{1} << 62;

uint64_t pack(uint32_t offset, RunId id) {
  return kOccupied | (uint64_t{offset & 0xffff} << 32) | id;
}
uint32_t offset_of(uint64_t v) { return static_cast<uint32_t>(v >> 32) & 0xffff; }
RunId id_of(uint64_t v) { return static_cast<RunId>(v); }

uint64_t slot_hash(uint32_t offset, uint64_t hash) {
  uint64_t k = hash ^ (uint64_t{offset} * 0x9e3779b97f4a7c15ULL);
  k ^= k >> 29;
  k *= 0xbf58476d1ce4e5b9ULL;
  k ^= k >> 32;
  return k;
}

size_t slots_for(size_t live) {
  size_t s = 4;
  while (s * 3 < (live + 1) * 4) s *= 2;  // keep load under 75%
  return s * 2;
}

Word* build(WordSlab& slab, size_t slots) {
  Word* b = slab.allocate(3 + 2 * slots);
  Word* d = WordSlab::data(b);
  d[0].store(slots, std::memory_order_relaxed);
  d[1].store(0, std::memory_order_relaxed);
  d[2].store(0, std::memory_order_relaxed);
  for (size_t i = 0; i < 2 * slots; ++i) d[3 + i].store(0, std::memory_order_relaxed);
  return b;
}

// Writer-side placement into a table the caller owns (not yet published, or under the run lock).
void put(Word* block, uint32_t offset, uint64_t hash, RunId child) {
  Word* d = WordSlab::data(block);
  const size_t slots = d[0].load(std::memory_order_relaxed);
  for (size_t i = slot_hash(offset, hash) & (slots - 1);; i = (i + 1) & (slots - 1)) {
    const uint64_t v = d[4 + 2 * i].load(std::memory_order_relaxed);
    if (v == 0 || (v & kTombstone)) {
      d[3 + 2 * i].store(hash, std::memory_order_relaxed);
      d[4 + 2 * i].store(pack(offset, child), std::memory_order_release);
      if (v == 0) d[1].store(d[1].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      d[2].store(d[2].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
  }
}

// Replaces the run's table (writer, run lock held): a new generation for readers validating a
// probe, the pointer, and the slot count lookups prefetch by.
void publish(Run& run, Word* table) {
  run.children_gen.store(run.children_gen.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
  run.children.store(table, std::memory_order_release);
  run.children_slots.store(
      table ? static_cast<uint32_t>(WordSlab::data(table)[0].load(std::memory_order_relaxed)) : 0,
      std::memory_order_relaxed);
}

}  // namespace

RunId ChildTable::probe(const Word* block, uint32_t offset, uint64_t hash) {
  const Word* d = WordSlab::data(block);
  const size_t cap = WordSlab::capacity(block);
  const size_t slots = d[0].load(std::memory_order_relaxed);
  if (slots == 0 || (slots & (slots - 1)) != 0 || 3 + 2 * slots > cap)
    return kNoRun;  // not a table (recycled)
  size_t i = slot_hash(offset, hash) & (slots - 1);
  for (size_t n = 0; n < slots; ++n, i = (i + 1) & (slots - 1)) {
    const uint64_t v1 = d[4 + 2 * i].load(std::memory_order_acquire);
    if (v1 == 0) return kNoRun;
    const uint64_t h = d[3 + 2 * i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t v2 = d[4 + 2 * i].load(std::memory_order_relaxed);
    if (v1 != v2) {  // the slot was rewritten under us: read it again
      i = (i + slots - 1) & (slots - 1);
      --n;
      continue;
    }
    if (!(v1 & kTombstone) && h == hash && offset_of(v1) == (offset & 0xffff)) return id_of(v1);
  }
  return kNoRun;
}

RunId ChildTable::find(const Run& run, uint32_t offset, uint64_t hash) {
  for (;;) {
    const uint32_t gen = run.children_gen.load(std::memory_order_acquire);
    const Word* table = run.children.load(std::memory_order_acquire);
    if (table == nullptr) return kNoRun;
    const RunId id = probe(table, offset, hash);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (run.children.load(std::memory_order_relaxed) == table &&
        run.children_gen.load(std::memory_order_relaxed) == gen) {
      return id;
    }
  }
}

void ChildTable::prefetch(const Run& run, uint32_t offset, uint64_t hash) {
  const Word* table = run.children.load(std::memory_order_relaxed);
  const uint32_t slots = run.children_slots.load(std::memory_order_relaxed);
  if (table == nullptr || slots == 0) return;
  const size_t i = slot_hash(offset, hash) & (slots - 1);
  prefetch_line(table);
  // The slot count may belong to the table this one replaced (a hint read apart from the pointer),
  // so the slot's address may lie past the block: computed as an integer, never dereferenced.
  const uintptr_t slot =
      reinterpret_cast<uintptr_t>(WordSlab::data(table)) + (3 + 2 * i) * sizeof(Word);
  prefetch_line(reinterpret_cast<const void*>(slot));
}

void ChildTable::insert(WordSlab& slab, Run& run, uint32_t offset, uint64_t hash, RunId child) {
  Word* table = run.children.load(std::memory_order_relaxed);
  if (table != nullptr) {
    const Word* d = WordSlab::data(table);
    const size_t slots = d[0].load(std::memory_order_relaxed);
    const size_t used = d[1].load(std::memory_order_relaxed);
    if ((used + 1) * 4 <= slots * 3) {
      put(table, offset, hash, child);
      return;
    }
  }
  // Rebuild (first child, or too full with live entries and tombstones) and publish.
  const size_t live = table ? WordSlab::data(table)[2].load(std::memory_order_relaxed) : 0;
  Word* fresh = build(slab, slots_for(live + 1));
  if (table != nullptr) {
    const Word* d = WordSlab::data(table);
    const size_t slots = d[0].load(std::memory_order_relaxed);
    for (size_t i = 0; i < slots; ++i) {
      const uint64_t v = d[4 + 2 * i].load(std::memory_order_relaxed);
      if (v != 0 && !(v & kTombstone))
        put(fresh, offset_of(v), d[3 + 2 * i].load(std::memory_order_relaxed), id_of(v));
    }
  }
  put(fresh, offset, hash, child);
  publish(run, fresh);
  slab.free(table);
}

void ChildTable::erase(WordSlab& slab, Run& run, uint32_t offset, uint64_t hash) {
  Word* table = run.children.load(std::memory_order_relaxed);
  if (table == nullptr) return;
  Word* d = WordSlab::data(table);
  const size_t slots = d[0].load(std::memory_order_relaxed);
  for (size_t i = slot_hash(offset, hash) & (slots - 1), n = 0; n < slots;
       ++n, i = (i + 1) & (slots - 1)) {
    const uint64_t v = d[4 + 2 * i].load(std::memory_order_relaxed);
    if (v == 0) return;
    if (!(v & kTombstone) && offset_of(v) == (offset & 0xffff) &&
        d[3 + 2 * i].load(std::memory_order_relaxed) == hash) {
      d[4 + 2 * i].store(v | kTombstone, std::memory_order_release);
      const size_t live = d[2].load(std::memory_order_relaxed) - 1;
      d[2].store(live, std::memory_order_relaxed);
      if (live == 0) {
        publish(run, nullptr);
        slab.free(table);
      }
      return;
    }
  }
}

int64_t ChildTable::max_offset(const Run& run) {
  const Word* table = run.children.load(std::memory_order_relaxed);
  if (table == nullptr) return -1;
  const Word* d = WordSlab::data(table);
  const size_t slots = d[0].load(std::memory_order_relaxed);
  int64_t best = -1;
  for (size_t i = 0; i < slots; ++i) {
    const uint64_t v = d[4 + 2 * i].load(std::memory_order_relaxed);
    if (v != 0 && !(v & kTombstone)) best = std::max<int64_t>(best, offset_of(v));
  }
  return best;
}

void ChildTable::release(WordSlab& slab, Run& run) {
  Word* table = run.children.load(std::memory_order_relaxed);
  if (table == nullptr) return;
  publish(run, nullptr);
  slab.free(table);
}

uint64_t ChildTable::bytes(const Run& run) {
  const Word* table = run.children.load(std::memory_order_relaxed);
  return table ? (WordSlab::capacity(table) + 1) * sizeof(Word) : 0;
}

}  // namespace kvgate::index::chain::detail
