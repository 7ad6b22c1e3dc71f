// Subscription: one holder's (worker, dp rank) KV-event stream. A SUB socket on the engine's
// publisher with a topic filter, a DEALER on its replay socket, and the pipeline of one message:
// decode -> engine-hash check -> normalize -> admission cursor -> sink.
//
// It has no thread of its own: its owner polls the sockets it lists (poll_items) and calls
// handle() with the results, and tick() for timeouts. ZMQ connects in the background and
// reconnects with exponential backoff (100 ms doubling to `reconnect_max`) when the engine goes
// away; ZMTP heartbeats notice a silent peer. A connection ZMQ drops for a protocol error (a
// message over IntakeBounds::max_message_bytes) it never makes again (libzmq 4.3 leaves the
// endpoint dead), so a monitor of the SUB socket watches for dropped connections and the
// subscription connects again itself, no more often than ZMQ's own backoff. Nothing here blocks: a
// replay is waited for by the owner's poll loop, so an owner that stops polling stops the
// subscription at once.
//
// Threading: every call from the owner's thread (ZMQ sockets are never shared between threads).
// The zmq::context_t must outlive the subscription.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "kvgate/core/clock.h"
#include "kvgate/core/ids.h"
#include "kvgate/events/admission.h"
#include "kvgate/events/decode.h"
#include "kvgate/events/hash_check.h"
#include "kvgate/events/load_record.h"
#include "kvgate/events/normalize.h"
#include "kvgate/events/replay_pacer.h"

namespace kvgate::events {

struct SubscriptionSpec {
  HolderKey key;
  HolderId holder;              // the index's id for this holder
  std::string worker_name;      // for metrics and logs (e.g. the worker's URL)
  std::string endpoint;         // the engine's PUB socket, e.g. tcp://10.0.0.5:5557
  std::string replay_endpoint;  // its replay ROUTER socket; empty: none
  std::string topic;            // ZMQ prefix filter; empty: every message
  HashCheckOptions hash_check;
  // The engine's KV pool in blocks (per rank), when it says (0: unknown). The index sizes the
  // holder's structures for it up front (Indexer::expect_capacity).
  uint64_t kv_capacity_blocks = 0;
  // Receives the load records the publisher pushes (load_record.h), on the event thread: it must
  // only store them (atomics), never block. Empty: they are counted and dropped.
  std::function<void(const LoadRecord&)> on_load;
};

// What one publisher can make its subscription hold and do (docs/events.md, "Bounds"). Memory
// queued in ZMQ is at most hwm messages of max_message_bytes per socket; a typical batch is 10 KB.
struct IntakeBounds {
  // Messages the SUB socket queues before it stops reading the connection; the engine's PUB then
  // drops what its own queue cannot take, which the subscription sees as a gap and replays.
  int live_hwm = 1000;
  // The replay DEALER's queue: an engine's whole retained window at once (vLLM keeps 10,000
  // batches), which its ROUTER would otherwise drop.
  int replay_hwm = 10000;
  // ZMQ_MAXMSGSIZE on both sockets: a larger message drops the connection (ZMQ reconnects within
  // reconnect_max) and is never allocated. A batch of 1M prompt tokens is about 5 MB.
  int64_t max_message_bytes = int64_t{16} << 20;
  // Work per socket per service()/handle() call, so one publisher cannot hold its event thread
  // while the others wait: whichever of the two is reached first.
  size_t turn_messages = 256;
  size_t turn_bytes = size_t{4} << 20;
  // Live messages wait in ZMQ (not here) while this many admitted batches wait for the lane.
  size_t pause_backlog = 1024;
  ReplayPacing replay_pacing;
  QuarantineOptions quarantine;
};

struct SubscriptionOptions {
  uint64_t hash_seed = kDefaultHashSeed;
  DecodeLimits limits;
  IntakeBounds bounds;
  size_t max_buffered = 4096;  // live batches held while a replay is in flight
  // Admitted batches held while the lanes are busy (a replay arrives faster than it applies);
  // beyond this the holder resyncs. Above any engine's replay window (vLLM's is 10,000).
  size_t max_backlog = 65536;
  // A replay that sends nothing for this long has failed (measured from the request or the last
  // replay message).
  std::chrono::milliseconds replay_timeout{2000};
  // A restarted engine is resubscribed within about this long of its port answering again.
  std::chrono::milliseconds reconnect_max{1000};
  std::chrono::milliseconds heartbeat{1000};  // ZMTP heartbeat interval (timeout: 3x)
};

// What became of one received message, for observers (the operator's tool, tests, metrics).
struct MessageReport {
  bool from_replay = false;
  bool replay_end = false;
  std::optional<uint64_t> seq;          // nullopt: the frames were not a KV-event message
  const DecodedBatch* batch = nullptr;  // decoded payload (nullptr for bad frames / end marker)
  DropCounts dropped{};                 // the payload's decode and normalization drops
  // The cursor's verdict, e.g. "applied", "duplicate", "gap: replay from 12",
  // "resync (replay_window)", "restart", "buffered".
  std::string verdict;
};

// Readies a ZMQ context for many subscriptions: each holds four sockets (SUB, replay DEALER, the
// SUB's monitor and libzmq's end of it), and libzmq's default of 1,023 sockets a context would
// stop at 255 holders.
void configure_context(zmq::context_t& ctx);

class Subscription {
 public:
  // Receives admitted batches in order (clear_first set where the holder must be cleared first;
  // a batch with no events may carry only a clear).
  // The sink takes the batch (moving it out of `batch`) or leaves it and returns false; the
  // subscription then keeps it, in order with later ones, and offers it again on the next
  // handle() or tick(): a busy lane slows a replay down, it never loses a batch.
  using Sink = std::function<bool(std::unique_ptr<NormalizedBatch>& batch)>;
  using Observer = std::function<void(const MessageReport&)>;

  Subscription(zmq::context_t& ctx, SubscriptionSpec spec, SubscriptionOptions options, Sink sink,
               const Clock& clock);
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // Connects the sockets (asynchronously: an absent engine is not an error).
  Status start();

  // Two ways to wait for it. With zmq_poll (a tool, a few subscriptions): poll_items() appends
  // this subscription's items (one or two), handle() drains what they found readable.
  void poll_items(std::vector<zmq_pollitem_t>* items);
  void handle(const zmq_pollitem_t* items);
  // With epoll (an event thread with hundreds of subscriptions, where zmq_poll's scan of every
  // socket on every wake-up would cost more than the events): the sockets' ZMQ_FD descriptors,
  // readable when a socket's state may have changed, and `version`, which changes when a socket
  // is replaced. service() receives what the sockets hold, up to the turn's budget per socket
  // (IntakeBounds::turn_messages, turn_bytes), and returns whether more is waiting (call it again
  // without waiting for the descriptors then, after the thread's other subscriptions had theirs).
  struct Descriptors {
    int sub = -1;
    int replay = -1;   // -1: no replay socket
    int monitor = -1;  // the SUB socket's connection events; -1: none
    uint64_t version = 0;
  };
  Descriptors descriptors();
  bool service();
  // Timeouts (the replay's), a replay request the pacer held back, and batches held for a busy
  // lane; call by next_tick() at the latest.
  void tick();
  // When tick() has work next: already (a time in the past) while batches wait for a lane or live
  // reads are paused for them, when the pacer lets a held-back replay request go, the replay's
  // deadline while one is in flight, else never (nullopt): an idle subscription needs no timer.
  std::optional<MonoTime> next_tick() const;

  void set_observer(Observer observer) { observer_ = std::move(observer); }

  const SubscriptionSpec& spec() const { return spec_; }
  const CursorStats& cursor_stats() const { return cursor_.stats(); }
  // A subset of the engine's cache: since a resync, or while its hashes do not agree.
  bool degraded() const { return cursor_.degraded() || quarantine_.quarantined(); }
  bool awaiting_replay() const { return cursor_.awaiting_replay(); }
  std::optional<uint64_t> cursor() const { return cursor_.cursor(); }
  uint32_t block_size() const { return normalizer_.block_size(); }
  const NormalizerStats& normalizer_stats() const { return normalizer_.stats(); }
  const HashCheckCounts& hash_counts() const { return checker_.counts(); }
  // Decode and normalization drops since start, per reason.
  const std::array<uint64_t, kDropReasonCount>& dropped_events() const { return dropped_; }
  uint64_t bad_frames() const { return bad_frames_; }
  uint64_t load_records() const { return load_records_; }
  // Admitted batches that waited for a busy lane (never lost), and those waiting now.
  uint64_t backlogged() const { return backlogged_; }
  size_t backlog() const { return backlog_.size(); }
  // Admitted batches lost because the backlog overflowed (the holder resynced).
  uint64_t lost() const { return lost_; }
  uint64_t rejected_payloads() const { return rejected_payloads_; }
  // Replay requests sent to the engine, and those the pacer held back for a while first.
  uint64_t replays_sent() const { return replays_sent_; }
  uint64_t replays_deferred() const { return replays_deferred_; }
  // Turns that ended with the budget spent and messages still waiting (a publisher sending more
  // than its share).
  uint64_t turns_capped() const { return turns_capped_; }
  // Connections to the publisher that dropped (each connected again).
  uint64_t disconnects() const { return disconnects_; }
  // The engine-hash quarantine: now, episodes since start, and admitted batches not indexed.
  bool quarantined() const { return quarantine_.quarantined(); }
  uint64_t quarantines() const { return quarantine_.episodes(); }
  uint64_t quarantined_batches() const { return quarantined_batches_; }

 private:
  using Cursor = AdmissionCursor<std::unique_ptr<NormalizedBatch>>;

  void open_replay_socket();
  // Receives from the SUB socket (replay = false) or the replay socket while ZMQ_EVENTS says a
  // message is there, within the turn's budget; returns whether one still is. Live messages stay
  // in ZMQ while the backlog is at IntakeBounds::pause_backlog.
  bool drain(bool replay);
  zmq::socket_t* socket(bool replay) { return replay ? (replay_ ? &*replay_ : nullptr) : &sub_; }
  // Sends the replay request the cursor asked for when the pacer allows (else leaves it pending).
  void send_replay_when_due();
  void judge_hashes();
  void open_monitor();
  // Reads the SUB socket's monitor; connects again after a dropped connection when due.
  void watch_connection();
  void on_live_message(std::vector<zmq::message_t>& frames);
  void on_replay_message(std::vector<zmq::message_t>& frames);
  // Decodes and normalizes a payload; nullptr never (a rejected payload yields an empty batch).
  std::unique_ptr<NormalizedBatch> prepare(const zmq::message_t& payload, MessageReport* report);
  void run_actions(MessageReport* report);
  void deliver(std::unique_ptr<NormalizedBatch> batch);
  // A batch that only clears the holder (its publisher restarted, or it was quarantined).
  void deliver_clear();
  void drain_backlog();
  void report(MessageReport& r);

  zmq::context_t& ctx_;
  SubscriptionSpec spec_;
  SubscriptionOptions options_;
  Sink sink_;
  Observer observer_;
  const Clock& clock_;
  zmq::socket_t sub_;
  std::optional<zmq::socket_t> monitor_;  // after sub_: closed before it
  std::optional<zmq::socket_t> replay_;
  BatchDecoder decoder_;
  DecodedBatch decoded_;
  Normalizer normalizer_;
  EngineHashChecker checker_;
  HashQuarantine quarantine_;
  Cursor cursor_;
  ReplayPacer pacer_;
  std::optional<uint64_t> pending_replay_;  // the first seq of a request the pacer holds back
  ReplayPacer reconnect_pacer_;             // ZMQ's own backoff, for the reconnects made here
  bool reconnect_pending_ = false;
  bool live_paused_ = false;  // live reads stopped for the backlog, messages perhaps waiting
  Cursor::Actions actions_;
  MonoTime replay_deadline_{};
  std::array<uint64_t, kDropReasonCount> dropped_{};
  uint64_t bad_frames_ = 0;
  uint64_t rejected_payloads_ = 0;
  std::vector<zmq::message_t> frames_;
  std::deque<std::unique_ptr<NormalizedBatch>> backlog_;
  std::optional<uint64_t> checked_through_;  // the highest seq the hash checker saw
  uint64_t backlogged_ = 0;
  uint64_t lost_ = 0;
  uint64_t sockets_version_ = 0;  // bumped when the replay socket is replaced
  uint64_t load_records_ = 0;
  uint64_t replays_sent_ = 0;
  uint64_t replays_deferred_ = 0;
  uint64_t turns_capped_ = 0;
  uint64_t quarantined_batches_ = 0;
  uint64_t disconnects_ = 0;
};

}  // namespace kvgate::events
