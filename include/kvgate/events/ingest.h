// EventIngest: the KV-event side of the gateway. Subscriptions per (worker, dp rank) on a few
// event threads, and lanes that apply admitted batches to the index.
//
//   event threads (IngestOptions::event_threads): each polls the sockets of the subscriptions it
//     owns and runs decode -> hash check -> normalize -> admission off the routing threads.
//   lanes (IngestOptions::lanes): an index::LanePool applies batches to the index. A worker (all
//     its ranks) is scheduled onto one lane at a time, so its batches apply in order, and a busy
//     worker does not hold a lane while others wait. A worker's queue holds at most
//     lane_queue_batches; beyond that its subscriptions keep admitted batches back (in order)
//     and offer them again as the lane drains, so a replay of thousands of batches waits for the
//     lanes instead of losing any (SubscriptionOptions::max_backlog bounds that).
//
// Bounds (docs/events.md, "Bounds"): a holder's index never holds more blocks than its limit,
// its engine's KV pool times capacity_margin or default_holder_blocks when the pool is unknown
// (block_bound.h says which blocks go and why); a batch whose publisher clock is off by more than
// lag_window is not counted in the apply lag (kvgate_events_apply_lag_seconds, per worker); the
// subscriptions' own bounds are SubscriptionOptions::bounds.
//
// Removal leaves nothing behind: remove() returns after the subscription's sockets are closed,
// every queued batch of the holder has been applied or discarded, the holder has been removed
// from the index (EventIngest calls Indexer::remove_holder, so the caller need not), and its
// metric series (and its worker's, with its last rank) are gone. Its HolderId may be reused then.
//
// The indexer must accept apply() from several lanes at once for different holders
// (Concurrency::writers_per_holder), e.g. an indexer wrapped by index::make_synchronized().
//
// Threading: add(), remove(), state() and stop() are control-path calls from any thread (they
// wait for the event thread or lane involved). The sinks and lanes are internal.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/core/clock.h"
#include "kvgate/core/ids.h"
#include "kvgate/core/result.h"
#include "kvgate/events/subscription.h"
#include "kvgate/index/indexer.h"
#include "kvgate/metrics/metrics.h"

namespace kvgate::events {

struct IngestOptions {
  size_t event_threads = 1;
  size_t lanes = 2;
  size_t lane_queue_batches = 1024;  // per worker
  // NUMA: one CPU list per node (two or more): the lanes split per node and worker w's batches
  // apply on node w % nodes (index::LanePoolOptions::group_cpus), where its index shard is.
  std::vector<std::vector<int>> lane_cpus;
  // How soon an event thread looks again at batches waiting for a busy lane, and the finest
  // grain of replay timeouts. An idle event thread sleeps until a socket is readable.
  std::chrono::milliseconds poll_interval{20};
  SubscriptionOptions subscription;
  // A holder's block limit: its engine's KV pool (SubscriptionSpec::kv_capacity_blocks) times the
  // margin, or default_holder_blocks when the pool is unknown.
  double capacity_margin = 2.0;
  uint64_t default_holder_blocks = uint64_t{1} << 20;
  // Publisher timestamps further than this from the gateway's clock are not counted in the lag.
  std::chrono::milliseconds lag_window{300'000};
};

// The apply lag of a batch published at `published` and applied at `now` (Unix seconds), at
// least 0; nullopt when the two clocks differ by more than `window` either way: a bogus or badly
// skewed timestamp says nothing about the lag.
std::optional<double> apply_lag_seconds(double published, double now,
                                        std::chrono::milliseconds window);

// A snapshot of one holder, for tools and tests.
struct HolderState {
  CursorStats cursor;
  std::optional<uint64_t> last_seq;
  bool degraded = false;
  bool awaiting_replay = false;
  uint32_t block_size = 0;
  HashCheckCounts hash;
  std::array<uint64_t, kDropReasonCount> dropped_events{};
  uint64_t backlogged = 0;       // admitted batches that waited for a busy lane (none lost)
  size_t backlog = 0;            // batches waiting for the lane now
  uint64_t applied_batches = 0;  // admitted batches the lane applied to the index
  uint64_t blocks = 0;           // block copies the holder holds, from what each apply did
  uint8_t tiers = 0;             // index::tier_bit of each tier it stored on since its last clear
  uint64_t block_limit = 0;      // the most it may hold
  uint64_t evicted_blocks = 0;   // block copies evicted to stay within it
  uint64_t limit_clears = 0;     // times nothing remembered was left to evict: cleared instead
  uint64_t replays_sent = 0;     // replay requests sent (the pacer spaces them)
  uint64_t replays_deferred = 0;
  uint64_t turns_capped = 0;  // turns that ended with the budget spent
  uint64_t disconnects = 0;   // connections to the publisher that dropped (made again)
  bool quarantined = false;   // its engine hashes do not agree: not indexed
  uint64_t quarantined_batches = 0;
};

class EventIngest {
 public:
  EventIngest(index::Indexer& index, metrics::Registry& registry, const Clock& clock,
              IngestOptions options = {});
  ~EventIngest();
  EventIngest(const EventIngest&) = delete;
  EventIngest& operator=(const EventIngest&) = delete;

  // Starts a subscription (connects in the background). Fails for a key already subscribed or an
  // endpoint ZMQ cannot parse.
  Status add(SubscriptionSpec spec);
  // See the header comment. Returns false if the key was not subscribed.
  bool remove(HolderKey key);
  std::optional<HolderState> state(HolderKey key) const;
  // Waits until every batch queued for the lanes so far has been applied (for tests and tools
  // that read the index's content, which needs no writer running).
  void flush();
  // Stops every thread; subscriptions are closed, queued batches discarded. Idempotent.
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::events
