// AdmissionCursor: which of one holder's batches reach the index, in what order, and when the
// holder must be cleared. Pure: no sockets, no clocks; the subscription feeds it sequence numbers
// and carries out the actions it returns. (It is the part that goes wrong; tests/events/
// admission_test.cc drives it through every case and against a model of a lossy publisher.)
//
// The rules, with c the last admitted seq:
//   live s <= the newest live seq seen -> the publisher restarted (one process's live stream
//                             only moves forward: ZMQ neither reorders nor redelivers): clear
//                             the holder and take s as a first batch.
//   live s == c + 1        -> apply.
//   live s <= c otherwise  -> a replay already delivered it: a duplicate, dropped.
//   live s >  c + 1        -> a gap: ask the replay socket from c + 1 and buffer live batches
//                             (bounded) until the replay ends; replayed batches apply first, then
//                             the buffer through these same rules.
//   a gap left after a replay -> the engine read its buffer for the replay at some moment after
//                             the request. A missing batch newer than every live batch seen at the
//                             request may have been published after that read and lost on the
//                             wire: the replay is asked again from it (which bounds the retries:
//                             the next request has seen a newer live batch). A missing batch
//                             older than that was in the engine's buffer for the replay: the
//                             replay ended short (kReplayIncomplete).
//   first batch s (nothing admitted yet, or after a restart): s == 0 applies; s > 0 is a gap from
//                             the publisher's start and asks the replay from 0.
//   a gap that cannot be replayed -> clear the holder (a resync), mark it degraded, and rebuild
//                             from the earliest batch still available. Reasons: no replay socket,
//                             the replay timed out, the replay started after the seq asked for
//                             (its window had moved on), the replay ended short of the buffered
//                             live batches, the live buffer overflowed, or a batch was lost after
//                             admission (lane queue full).
//   A restart whose first delivered live seq is above the old process's newest is invisible to
//   any seq rule (it reads as a gap, and the replay fills it from the new process).
//   start (on_start): a subscriber that comes up on a running engine asks at once for everything
//                             the replay socket retains (from seq 0), instead of waiting for a live
//                             batch to show a gap: a restarted gateway rebuilds the holder in one
//                             pass. If that replay fails before delivering anything, nothing is
//                             lost by it: live batches that arrived meanwhile go through the
//                             rules above (a gap asks the replay again), no resync.
//   beyond the window: the replay's first batch is later than asked for; the holder is cleared
//                             and rebuilt from it (kReplayWindow). It then holds a subset of the
//                             engine's cache (what was stored since), routes on that and refills
//                             from live traffic; it stays marked degraded (partial) until the
//                             engine clears or restarts.
//   degraded ends when the engine clears its cache (AllBlocksCleared) or restarts from seq 0: the
//   holder is exact again from there.
//
// Threading: one thread (the holder's subscription) at a time.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace kvgate::events {

enum class ResyncReason : uint8_t {
  kNoReplayEndpoint,  // a gap on a stream without a replay socket
  kReplayTimeout,     // the replay did not end in time (or its socket failed)
  kReplayWindow,      // the replay started after the seq asked for
  kReplayIncomplete,  // after the replay, the buffered live batches still left a gap
  kBufferOverflow,    // too many live batches arrived while waiting for the replay
  kLostDownstream,    // an admitted batch was dropped before the index (lane queue full)
};
inline constexpr size_t kResyncReasonCount = static_cast<size_t>(ResyncReason::kLostDownstream) + 1;
std::string_view resync_reason_name(ResyncReason r);

struct CursorStats {
  uint64_t applied = 0;        // live batches admitted in order
  uint64_t replayed = 0;       // batches admitted from the replay socket
  uint64_t duplicates = 0;     // batches dropped as already admitted
  uint64_t gaps = 0;           // sequence gaps seen (including a first batch after seq 0)
  uint64_t replays = 0;        // replay requests made
  uint64_t restarts = 0;       // publisher restarts detected
  uint64_t stray_replays = 0;  // replay batches with no replay in flight
  std::array<uint64_t, kResyncReasonCount> resyncs{};
};

template <class T>
class AdmissionCursor {
 public:
  struct Options {
    bool replay = true;          // the holder has a replay socket
    size_t max_buffered = 4096;  // live batches held while a replay is in flight
  };

  struct Action {
    enum class Kind { kApply, kClear, kRequestReplay, kCancelReplay };
    Kind kind = Kind::kApply;
    uint64_t seq = 0;       // kApply: the batch; kRequestReplay: the first seq wanted
    bool replayed = false;  // kApply: came from the replay socket
    T payload{};            // kApply
    // kClear: the resync reason, or nullopt for a publisher restart.
    std::optional<ResyncReason> reason;
  };
  using Actions = std::vector<Action>;

  explicit AdmissionCursor(Options options = {}) : options_(options) {}

  // The subscription is up: with a replay socket, ask for everything the engine retains.
  void on_start(Actions* out) {
    if (!options_.replay || last_ || awaiting_) return;
    request_replay(0, out);
    speculative_ = true;
  }

  // A batch from the live (SUB) socket.
  void on_live(uint64_t seq, T payload, Actions* out) {
    // One publisher's live stream only moves forward (ZMQ neither reorders nor redelivers), so
    // a live seq at or below the newest live seq seen means a new publisher process.
    if (last_live_ && seq <= *last_live_) {
      if (awaiting_) cancel_replay(out);
      last_live_ = seq;
      restart(seq, std::move(payload), out);
      return;
    }
    last_live_ = seq;
    if (awaiting_) {
      if (buffer_.size() >= options_.max_buffered) {
        cancel_replay(out);
        resync_and_flush(ResyncReason::kBufferOverflow, out);
        live(seq, std::move(payload), out, ResyncReason::kBufferOverflow);
        return;
      }
      buffer_.emplace_back(seq, std::move(payload));
      return;
    }
    live(seq, std::move(payload), out, default_no_replay());
  }

  // A batch from the replay socket (either reply shape; the caller parsed the seq).
  void on_replay(uint64_t seq, T payload, Actions* out) {
    if (!awaiting_) {
      ++stats_.stray_replays;
      return;
    }
    speculative_ = false;
    if (!last_) {
      if (seq != requested_) resync(ResyncReason::kReplayWindow, out);
      admit(seq, std::move(payload), true, out);
      return;
    }
    const uint64_t c = *last_;
    if (seq <= c) {
      ++stats_.duplicates;
      return;
    }
    if (seq != c + 1) resync(ResyncReason::kReplayWindow, out);
    admit(seq, std::move(payload), true, out);
  }

  // The replay's end marker.
  void on_replay_end(Actions* out) {
    if (!awaiting_) return;
    awaiting_ = false;
    speculative_ = false;
    release_held(/*replay_ended=*/true, out);
  }

  // The replay failed (timeout, socket error): what it could not deliver is lost.
  void on_replay_failed(ResyncReason reason, Actions* out) {
    if (!awaiting_) return;
    awaiting_ = false;
    if (std::exchange(speculative_, false) && !last_) {
      // The start's replay, and nothing of it arrived: nothing is lost by that. What the live
      // socket delivered meanwhile goes through the usual rules (a gap asks again).
      release_held(/*replay_ended=*/false, out);
      return;
    }
    resync_and_flush(reason, out);
  }

  // An admitted batch never reached the index: the next admitted batch starts with a clear.
  void on_lost_downstream() { pending_clear_ = ResyncReason::kLostDownstream; }

  // The engine emptied its cache (an applied AllBlocksCleared): the holder is exact again.
  void on_engine_cleared() { degraded_ = false; }

  // The subscription emptied the holder for a reason of its own and skipped batches (their
  // engine hashes did not agree): a subset of the engine's cache from here, as after a resync.
  void on_holder_emptied() { degraded_ = true; }

  std::optional<uint64_t> cursor() const { return last_; }
  bool awaiting_replay() const { return awaiting_; }
  bool degraded() const { return degraded_; }
  size_t buffered() const { return buffer_.size(); }
  const CursorStats& stats() const { return stats_; }

 private:
  // `no_replay`: replays are not to be asked (no socket, or flushing after a replay); a gap then
  // resyncs for that reason.
  void live(uint64_t seq, T payload, Actions* out, std::optional<ResyncReason> no_replay) {
    if (!last_) {
      first(seq, std::move(payload), out, no_replay);
      return;
    }
    const uint64_t c = *last_;
    if (seq == c + 1) {
      admit(seq, std::move(payload), false, out);
      return;
    }
    if (seq <= c) {  // newer than every live batch, yet admitted: a replay delivered it
      ++stats_.duplicates;
      return;
    }
    ++stats_.gaps;
    if (!no_replay) {
      request_replay(c + 1, out);
      buffer_.emplace_back(seq, std::move(payload));
      return;
    }
    resync(*no_replay, out);
    admit(seq, std::move(payload), false, out);
  }

  void first(uint64_t seq, T payload, Actions* out, std::optional<ResyncReason> no_replay) {
    if (seq == 0) {
      admit(seq, std::move(payload), false, out);
      return;
    }
    ++stats_.gaps;
    if (!no_replay) {
      request_replay(0, out);
      buffer_.emplace_back(seq, std::move(payload));
      return;
    }
    resync(*no_replay, out);
    admit(seq, std::move(payload), false, out);
  }

  void restart(uint64_t seq, T payload, Actions* out) {
    ++stats_.restarts;
    Action a;
    a.kind = Action::Kind::kClear;
    out->push_back(std::move(a));
    pending_clear_.reset();
    last_.reset();
    buffer_.clear();    // the old publisher's batches
    degraded_ = false;  // the new publisher's stream is complete from its seq 0
    first(seq, std::move(payload), out, default_no_replay());
  }

  // Feeds the live batches held during a replay back through the rules; once one of them asks
  // for a replay again, the rest are held for it. `replay_ended`: a gap the replay should have
  // filled (see the rules above) is kReplayIncomplete instead of a new request.
  void release_held(bool replay_ended, Actions* out) {
    const std::optional<uint64_t> seen = live_at_request_;
    std::deque<std::pair<uint64_t, T>> held;
    held.swap(buffer_);
    for (auto& [seq, payload] : held) {
      if (awaiting_) {
        buffer_.emplace_back(seq, std::move(payload));
        continue;
      }
      std::optional<ResyncReason> no_replay = default_no_replay();
      const uint64_t missing = last_ ? *last_ + 1 : 0;
      if (replay_ended && seen && missing <= *seen) no_replay = ResyncReason::kReplayIncomplete;
      live(seq, std::move(payload), out, no_replay);
    }
  }

  void request_replay(uint64_t from, Actions* out) {
    ++stats_.replays;
    awaiting_ = true;
    requested_ = from;
    live_at_request_ = last_live_;
    Action a;
    a.kind = Action::Kind::kRequestReplay;
    a.seq = from;
    out->push_back(std::move(a));
  }

  void cancel_replay(Actions* out) {
    awaiting_ = false;
    speculative_ = false;
    Action a;
    a.kind = Action::Kind::kCancelReplay;
    out->push_back(std::move(a));
  }

  void resync(ResyncReason reason, Actions* out) {
    ++stats_.resyncs[static_cast<size_t>(reason)];
    degraded_ = true;
    pending_clear_.reset();
    Action a;
    a.kind = Action::Kind::kClear;
    a.reason = reason;
    out->push_back(std::move(a));
  }

  // Clears, then rebuilds from the earliest buffered batch.
  void resync_and_flush(ResyncReason reason, Actions* out) {
    resync(reason, out);
    last_.reset();
    if (buffer_.empty()) return;
    auto [seq, payload] = std::move(buffer_.front());
    buffer_.pop_front();
    admit(seq, std::move(payload), false, out);
    flush(reason, out);
  }

  void flush(ResyncReason reason, Actions* out) {
    std::deque<std::pair<uint64_t, T>> pending;
    pending.swap(buffer_);
    for (auto& [seq, payload] : pending) live(seq, std::move(payload), out, reason);
  }

  void admit(uint64_t seq, T payload, bool replayed, Actions* out) {
    if (pending_clear_) {
      const ResyncReason r = *pending_clear_;
      resync(r, out);
    }
    ++(replayed ? stats_.replayed : stats_.applied);
    last_ = seq;
    Action a;
    a.kind = Action::Kind::kApply;
    a.seq = seq;
    a.replayed = replayed;
    a.payload = std::move(payload);
    out->push_back(std::move(a));
  }

  std::optional<ResyncReason> default_no_replay() const {
    return options_.replay ? std::nullopt : std::optional(ResyncReason::kNoReplayEndpoint);
  }

  Options options_;
  std::optional<uint64_t> last_;       // the last admitted seq
  std::optional<uint64_t> last_live_;  // the newest seq seen on the live socket
  bool awaiting_ = false;
  bool speculative_ = false;  // the replay in flight is on_start's, and nothing arrived yet
  uint64_t requested_ = 0;    // first seq of the replay in flight
  std::optional<uint64_t> live_at_request_;  // the newest live seq seen when it was asked for
  bool degraded_ = false;
  std::optional<ResyncReason> pending_clear_;
  std::deque<std::pair<uint64_t, T>> buffer_;
  CursorStats stats_;
};

}  // namespace kvgate::events
