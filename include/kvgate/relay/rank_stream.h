// RankStream: one engine rank as the relay serves it. The rank's admitted batches (in the
// engine's sequence numbers, gaps already refilled by the relay's own admission cursor) go into a
// bounded history and into the rank's BlockSet; subscribers read the history from where they
// are, or get the block set as a snapshot when the history cannot continue them.
//
// Epochs: an epoch is one unbroken run of the stream. A new one starts (a fresh random id) when
// the relay starts, when the engine restarts (its numbering starts over) and when the relay's
// cursor had to resync (part of the engine's stream was lost, the rank is degraded until the
// engine clears or restarts). Within an epoch the batches' seqs are consecutive.
//
// What a subscriber at Cursor gets from next():
//   fresh (no epoch) and the history still holds its epoch from the first batch: the history,
//     then live batches;
//   fresh otherwise, another epoch, a seq older than the history keeps (trimmed by the limits,
//     also under a subscriber too slow to keep up: it never holds the history back), or a seq
//     past the newest batch: one OutOfRange, the snapshot chunks at the newest seq, then the
//     batches after it;
//   else the batches from its seq on.
// An empty answer means nothing new: wait with notify_once().
//
// Messages are built once, when a batch arrives or a snapshot is taken, and shared by every
// subscriber (a snapshot taken for one is reused by others at the same seq).
//
// Threading: every method from any thread. append() is the writer's (one thread per rank).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/relay/block_set.h"
#include "kvgate/relay/v1/relay.pb.h"

namespace kvgate::relay {

struct HistoryLimits {
  size_t max_batches = 10'000;
  size_t max_bytes = 64 << 20;  // memory the kept messages hold, not their wire size
  // Blocks per snapshot chunk (a gRPC message stays well under its 4 MiB default limit).
  size_t snapshot_chunk_blocks = 16'384;
};

// One admitted batch as the relay receives it (events view the caller's buffers).
struct RankBatch {
  uint64_t seq = 0;
  // Starts a new epoch first: the engine restarted, or the relay's cursor resynced
  // (`degraded`: the rank then holds only part of what the engine holds).
  bool new_epoch = false;
  bool degraded = false;
  double engine_ts = 0;  // the publisher's wall clock (0: unknown)
  std::span<const index::Event> events;
};

class RankStream {
 public:
  using Message = std::shared_ptr<const v1::SubscribeResponse>;

  struct Cursor {
    uint64_t epoch = 0;  // 0: fresh
    uint64_t next_seq = 0;
    bool await_first = false;  // positioned before the epoch's first batch
    bool served = false;       // has been sent something (a later trim is "fell behind")
  };

  RankStream(HistoryLimits limits, uint64_t hash_seed = kDefaultHashSeed);

  // The writer's: one admitted batch, in order.
  void append(const RankBatch& batch);
  // A new epoch with no batch yet: the rank was cleared with nothing admitted behind the clear
  // (the engine restarted and has not published since, or a resync).
  void restart(bool degraded);
  // The engine's latest load, carried by later batches and heartbeats.
  void set_load(const v1::Load& load);

  // Up to `max_batches` messages for the subscriber at `cursor` (a snapshot's chunks count as
  // one), the cursor moved past them. Empty: nothing new; then notify_once() with the version()
  // read before this call.
  std::vector<Message> next(Cursor& cursor, size_t max_batches);
  // A heartbeat with the newest seq and load for the subscriber at `cursor`, or nullptr when the
  // cursor has not been given everything yet (read next() first). A subscriber takes a heartbeat
  // naming a seq it never received for a lost batch, so one must never overtake a batch: the
  // writer appends before it wakes the waiting subscribers, and a heartbeat in between would.
  Message heartbeat(const Cursor& cursor) const;
  // Calls `wake` once, on the writer's thread and outside any lock of this stream, after the next
  // append; returns a token for cancel(). nullopt (and no call) if one came since `seen_version`:
  // read again.
  std::optional<uint64_t> notify_once(uint64_t seen_version, std::function<void()> wake);
  void cancel(uint64_t token);
  uint64_t version() const;  // moves with every append

  void describe(v1::RankInfo* out) const;

 private:
  struct Entry {
    uint64_t seq;
    size_t bytes;
    Message message;
  };
  void start_epoch(bool degraded) KVGATE_REQUIRES(mu_);
  void trim() KVGATE_REQUIRES(mu_);
  void out_of_range(Cursor& cursor, v1::OutOfRange::Reason reason, std::vector<Message>* out)
      KVGATE_REQUIRES(mu_);
  uint64_t oldest_seq() const KVGATE_REQUIRES(mu_);

  const HistoryLimits limits_;
  mutable Mutex mu_;
  BlockSet blocks_ KVGATE_GUARDED_BY(mu_);
  uint64_t epoch_ KVGATE_GUARDED_BY(mu_) = 0;
  bool degraded_ KVGATE_GUARDED_BY(mu_) = false;
  // Every batch of the epoch is still in the history (nothing trimmed since it began).
  bool complete_ KVGATE_GUARDED_BY(mu_) = true;
  std::optional<uint64_t> last_seq_ KVGATE_GUARDED_BY(mu_);
  std::deque<Entry> history_ KVGATE_GUARDED_BY(mu_);
  size_t history_bytes_ KVGATE_GUARDED_BY(mu_) = 0;
  v1::Load load_ KVGATE_GUARDED_BY(mu_);
  uint64_t version_ KVGATE_GUARDED_BY(mu_) = 0;
  // The last snapshot taken, for the next subscriber at the same place.
  uint64_t snapshot_version_ KVGATE_GUARDED_BY(mu_) = 0;
  std::vector<Message> snapshot_ KVGATE_GUARDED_BY(mu_);
  uint64_t next_token_ KVGATE_GUARDED_BY(mu_) = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> waiters_ KVGATE_GUARDED_BY(mu_);
};

// A fresh epoch id: random, never 0.
uint64_t new_epoch_id();

}  // namespace kvgate::relay
