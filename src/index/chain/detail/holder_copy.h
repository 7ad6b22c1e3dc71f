// Copying a run's holder table into a lookup's answer, each depth clamped to how far the chain
// matched in the run.
//
// The first run of almost every lookup is a popular prefix with a hundred holders or more, and
// this copy was half of a one-run lookup: the scalar loop is bound by renaming its 22 µops per
// holder (3.7 cycles a holder with the table in L1). Where the CPU has AVX2 (decided once), a
// kernel copies four holders a step.
//
// Threading: the table may be changing under a writer. The kernels read it with plain loads and
// the caller must read under the run's seqlock and discard the copy when the version moved (a
// torn copy is never used). Built for ThreadSanitizer, only the scalar kernel with atomic loads is
// compiled, so the race checker sees the same atomic reads as everywhere else in the index.
#pragma once

#include <cstddef>
#include <cstdint>

#include "index/chain/detail/word_slab.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index::chain::detail {

struct ClampedCopy {
  uint32_t max_any = 0;  // the largest any-tier depth in the table, before clamping
  uint32_t zeros = 0;    // holders whose clamped any-tier depth is 0 (the caller drops them)
  uint32_t full = 0;     // holders whose any-tier depth reaches the limit
};

// Writes out[i] = {holder, min(device, limit), min(any, limit)} for each of the `n` packed
// HolderEntry words at `entries` (a slab block's data), in table order.
ClampedCopy copy_clamped(const Word* entries, size_t n, uint32_t limit, HolderMatch* out);

// The portable kernel, and whether copy_clamped uses the vector one (for tests and benchmarks).
ClampedCopy copy_clamped_scalar(const Word* entries, size_t n, uint32_t limit, HolderMatch* out);
bool copy_clamped_is_vectorized();

}  // namespace kvgate::index::chain::detail
