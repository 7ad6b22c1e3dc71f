// A run's child table: (offset, next sequence hash) -> child run, open addressing in one slab
// block.
//
//   data[0] slots (power of two)   data[1] used slots (live + tombstones)   data[2] live entries
//   slot i: data[3 + 2i] = next hash, data[4 + 2i] = value
//   value: 0 empty; else bit 63 set, bit 62 tombstone, bits 32..47 offset, bits 0..31 run id.
//
// Readers probe without locks: the writer stores a slot's hash before its value (release), the
// reader loads the value (acquire), the hash, and the value again, and then confirms that the
// run's table pointer and generation did not change while it probed. Writers hold the run's lock.
#pragma once

#include <cstdint>

#include "index/chain/detail/run.h"
#include "index/chain/detail/word_slab.h"

namespace kvgate::index::chain::detail {

class ChildTable {
 public:
  // Lock-free lookup; kNoRun when absent. Safe on stale or recycled tables (bounded probing; the
  // caller's validation catches a replaced table).
  static RunId find(const Run& run, uint32_t offset, uint64_t hash);

  // Starts loading the slot find(run, offset, hash) will probe first, without waiting for the
  // table (prefetch hints: safe on any table state). Lookups call it as soon as they can guess the
  // key, so the probe does not cost a memory round trip of its own.
  static void prefetch(const Run& run, uint32_t offset, uint64_t hash);

  // Writer (run lock held): insert a child known to be absent.
  static void insert(WordSlab& slab, Run& run, uint32_t offset, uint64_t hash, RunId child);
  // Writer (run lock held): remove a present child.
  static void erase(WordSlab& slab, Run& run, uint32_t offset, uint64_t hash);
  // Writer (run lock held): the largest offset any child hangs at, or -1.
  static int64_t max_offset(const Run& run);
  // Writer (run lock held, run being freed): release the table.
  static void release(WordSlab& slab, Run& run);
  static uint64_t bytes(const Run& run);

 private:
  static RunId probe(const Word* block, uint32_t offset, uint64_t hash);
};

}  // namespace kvgate::index::chain::detail
