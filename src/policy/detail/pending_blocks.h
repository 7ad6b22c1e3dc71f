// PendingBlocks: the prompts routed to a KV holder that its events have not confirmed yet.
//
// Between a request's dispatch and its engine's first BlockStored event (its prefill, then the
// event's trip), the index cannot see that the holder is computing the prompt's blocks: a burst
// of requests sharing a new prefix would be spread by the load gates, and every worker would
// compute the same prefix. So each dispatch credits its holder with the prompt's chain as
// pending, and lookups count it beside the index's confirmed depth (as a prediction).
//
// A credit ends when:
//  - its request fails or is cancelled (withdraw): the holder may never compute the blocks;
//  - `grace` after its first token (prefilled): the engine has computed the blocks and its
//    events, which the index then holds exactly, arrive within the event lag;
//  - `max_age` after its dispatch, whatever happened (a request that never got a first token);
//  - its holder's worker leaves the fleet (forget);
//  - room is needed for a newer one (more than `max_requests` credits or `capacity_blocks`
//    blocks): the oldest goes first.
//
// A lookup answers, per holder with pending credits, the longest prefix of the chain some live
// credit of that holder covers, for the holders at the `depth_levels` deepest such prefixes (a
// level is every holder at one depth): the deepest credits are those that steer a request to
// where its prefix is being computed, and shallower ones mostly repeat what the index already
// confirms (a shared system prompt), while each level costs a binary search. Sequence hashes name
// whole prefixes, so a credit covers position i of a chain exactly when it shares the chain's first
// i+1 blocks: the positions a holder's credits cover are a prefix of the chain, and a binary search
// finds its end in log2(blocks) probes of the block map.
//
// Threading: safe from any thread. Lookups share a reader lock; add, prefilled, withdraw and
// forget take it exclusively. A lookup with no live credit takes no lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/core/clock.h"
#include "kvgate/core/ids.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/index/indexer.h"
#include "kvgate/policy/policy.h"

namespace kvgate::policy::detail {

class PendingBlocks {
 public:
  struct Options {
    Duration max_age = std::chrono::seconds(30);
    Duration grace = std::chrono::seconds(1);
    uint32_t max_requests = 4096;
    size_t capacity_blocks = size_t{1} << 20;
    uint32_t depth_levels = 4;
  };
  // What the credits did since the start, for the metrics (the policy's figures as they are).
  using Stats = Policy::PendingStats;

  PendingBlocks(const Options& options, const Clock& clock);

  // Credits `holder` (of `worker`) with `chain`; returns the credit's ticket (never 0). An empty
  // chain is not credited (0).
  uint64_t add(WorkerId worker, HolderId holder, std::span<const SeqHash> chain);
  // The credit's request had its first token: it ends `grace` from now (or sooner).
  void prefilled(uint64_t ticket);
  // The credit's request failed or was cancelled: it ends now. Unknown or ended tickets: no-op.
  void withdraw(uint64_t ticket);
  // Ends every credit of `worker` (it left the fleet; its holders' ids may be reused).
  void forget(WorkerId worker);

  // Appends to `out` one match per holder with a live credit sharing a prefix with `chain`:
  // any_depth is the longest such prefix, device_depth 0. Holders in no particular order.
  void lookup(std::span<const SeqHash> chain, std::vector<index::HolderMatch>& out) const;

  bool empty() const { return live_.load(std::memory_order_relaxed) == 0; }
  Stats stats() const;

 private:
  struct Slot {
    uint64_t ticket = 0;  // 0: never used
    bool live = false;
    WorkerId worker;
    HolderId holder;
    int64_t expires_ns = 0;
    std::vector<SeqHash> chain;  // capacity kept across tickets
  };
  using Tickets = absl::InlinedVector<uint64_t, 2>;

  // (A mask when the ring's size is a power of two, as the default's is: a division per probe
  // was a visible share of a lookup.)
  size_t index_of(uint64_t ticket) const {
    return ring_mask_ != 0 ? ticket & ring_mask_ : ticket % ring_size_;
  }
  Slot& slot_of(uint64_t ticket) KVGATE_REQUIRES(mu_) { return slots_[index_of(ticket)]; }
  const Slot& slot_of(uint64_t ticket) const KVGATE_REQUIRES_SHARED(mu_) {
    return slots_[index_of(ticket)];
  }
  // The slot of `ticket` if the credit is live and unexpired at `now`, else null.
  const Slot* live_slot(uint64_t ticket, int64_t now) const KVGATE_REQUIRES_SHARED(mu_);
  void end_locked(Slot& s) KVGATE_REQUIRES(mu_);
  // Ends expired credits from the oldest on, then the oldest live ones while `blocks` more would
  // not fit.
  void make_room_locked(int64_t now, size_t blocks) KVGATE_REQUIRES(mu_);
  // The holders a lookup found so far, in order, and marked by holder id for a test in constant
  // time (a shared prompt's blocks carry hundreds of credits: a linear search per credit was
  // quadratic). Holder ids are small and dense; a new lookup's epoch unmarks them all at once.
  struct Seen {
    std::vector<HolderId> order;
    std::vector<uint32_t> mark;  // by holder id: the epoch that found it
    uint32_t epoch = 1;
    bool contains(HolderId h) const { return h.value() < mark.size() && mark[h.value()] == epoch; }
    void insert(HolderId h) {
      if (h.value() >= mark.size()) mark.resize(h.value() + 1, 0);
      mark[h.value()] = epoch;
      order.push_back(h);
    }
    void clear() {
      order.clear();
      if (++epoch == 0) {  // wrapped: forget every mark
        std::fill(mark.begin(), mark.end(), 0);
        epoch = 1;
      }
    }
  };
  // Whether a live credit of a holder not in `seen` covers `block`; with `collect`, every such
  // holder is added to `seen` (once).
  bool covered(SeqHash block, int64_t now, Seen& seen, bool collect) const
      KVGATE_REQUIRES_SHARED(mu_);
  // The deepest position of `chain` below `end` that a live credit of a holder not in `seen`
  // covers (-1: none), and those holders added to `seen`.
  int64_t deepest_unseen(std::span<const SeqHash> chain, int64_t end, int64_t now, Seen& seen) const
      KVGATE_REQUIRES_SHARED(mu_);

  const Options options_;
  const Clock& clock_;
  const size_t ring_size_;
  const size_t ring_mask_;  // ring_size_ - 1 when a power of two, else 0
  mutable Mutex mu_;
  std::vector<Slot> slots_ KVGATE_GUARDED_BY(mu_);
  absl::flat_hash_map<SeqHash, Tickets> blocks_ KVGATE_GUARDED_BY(mu_);
  uint64_t next_ticket_ KVGATE_GUARDED_BY(mu_) = 1;
  uint64_t oldest_ KVGATE_GUARDED_BY(mu_) = 1;  // no live credit has a smaller ticket
  size_t live_blocks_ KVGATE_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> live_{0};
  std::atomic<uint64_t> credited_{0};
  std::atomic<uint64_t> withdrawn_{0};
  std::atomic<uint64_t> evicted_{0};
};

}  // namespace kvgate::policy::detail
