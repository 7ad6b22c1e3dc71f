// RunSession: a writer's locked edit of one run on behalf of one holder.
//
// A stored event's blocks mostly land in consecutive positions of one run (a prompt continuing its
// prefix, a decode tail appended block by block), and a removal's blocks mostly sit in one run. A
// session keeps that run locked across them and buffers what readers see (the run's length, its
// hash array, the holder's entry): close() publishes it all in one seqlock write section, so a
// whole event costs one lock and one version bump per run it touches, not per block. Per-position
// holder counts and the holder's own writer-side state change at once (no reader looks at them).
//
// Threading: used by the one lane applying the holder's events; holds at most one run lock.
#pragma once

#include <cstdint>

#include "index/chain/detail/core.h"
#include "index/chain/detail/holder_state.h"

namespace kvgate::index::chain::detail {

class RunSession {
 public:
  RunSession(IndexCore& core, HolderState& hs, uint32_t holder)
      : core_(core), hs_(hs), holder_(holder) {}
  ~RunSession() { close(); }
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  bool is_open() const { return run_ != kNoRun; }
  RunId run() const { return run_; }

  // Locks `rid` and loads the holder's entry. False (and nothing locked) when the run is not live.
  // `first_offset`: the position the session will edit first, whose count line is asked for while
  // the entry is searched (two misses overlapped instead of one after the other).
  bool open(RunId rid, uint32_t first_offset = 0);
  // Publishes the buffered changes, drops a tail nobody holds any more, unlocks. Returns the run
  // when it is left with neither holders nor children (the caller kills it), else kNoRun.
  RunId close();

  uint32_t length() const { return len_; }
  SeqHash hash_at(uint32_t offset) const;
  uint16_t parent_offset() const { return r_->parent_offset; }
  RunId parent() const { return r_->parent; }
  bool can_append() const { return run_ != kRootRun && len_ < kMaxRunLength; }
  void append(SeqHash seq);
  // append() and adjust(its offset, +1, device ? 1 : 0) in one step, when that is all it takes:
  // the holder's prefix (on the device tier too when `device`) ends at the run's end, the holder
  // has no extras or shared places, and no child hangs there. False (nothing done) otherwise.
  bool append_held(SeqHash seq, bool device);
  // adjust(offset, -1, device ? -1 : 0) in one step, its mirror: the holder's last record of the
  // place goes, the place ends the holder's prefix (its device prefix too when `device`, else that
  // ends before it), and the holder has no extras or shared places. Engines evict a sequence's
  // blocks tail first, so this is every removal of the corpus. False (nothing done) otherwise.
  bool release_held(uint32_t offset, bool device);
  bool has_child(uint32_t offset, SeqHash seq) const;
  // The child of the open run at (offset, seq), created (with room for `capacity` positions) when
  // absent.
  RunId child(uint32_t offset, SeqHash seq, size_t capacity);
  // Changes how many of the holder's records hold the place (offset) on any tier and on the device
  // tier, and with it the holder's prefix, extras and the run's counts.
  void adjust(uint32_t offset, int d_any, int d_device);

 private:
  void grow_hashes(size_t positions);
  // Whether all the holder holds is what its entries' prefixes say: no extras past a gap and no
  // places held by two records, so a block at a prefix's end only moves that end.
  bool prefix_only() const { return hs_.extras.empty() && hs_.multi.empty(); }
  // One more (delta +1) or one fewer (-1) holder of the position, and the counters that follow.
  void count_holder(uint32_t offset, int delta);
  void publish_entry();

  IndexCore& core_;
  HolderState& hs_;
  const uint32_t holder_;
  RunId run_ = kNoRun;
  Run* r_ = nullptr;
  uint32_t len_ = 0;  // length with buffered appends
  uint32_t published_len_ = 0;
  Word* hashes_ = nullptr;  // where positions live now (a new block until published)
  Word* published_hashes_ = nullptr;
  bool found_ = false;  // the holder has an entry in the run
  size_t idx_ = 0;      // its index, or where it would go
  HolderEntry original_{};
  HolderEntry entry_{};
  bool tail_released_ = false;  // a tail position lost its last holder: try to truncate
  int64_t d_memberships_ = 0;   // counter changes, published by close()
  int64_t d_resident_ = 0;
  uint64_t appends_ = 0;
};

}  // namespace kvgate::index::chain::detail
