// StreamGuard: the bounds of one relayed stream, and what counts as its progress.
//
// A worker can hold a client's stream without ever failing: it trickles a byte a second, sends
// an endless body, or keeps a stream open with comments. A byte is no progress; an event that
// carries data is (http::SseEventCounter). The guard ends a stream that
//   - makes no progress for `idle` (--stream-idle-timeout-secs): measured between events, so a
//     trickle cannot keep it open;
//   - runs past its `total` deadline from the request's start (--request-timeout-secs, the same
//     bound a whole answer has);
//   - grows past `max_bytes` (--max-answer-bytes).
// Only events reported as progress reach the worker's liveness tracker, so a worker that trickles
// is vetoed as wedged within --worker-wedge-secs and steered around, and its streams end.
//
// Threading: one stream's coroutine.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "kvgate/core/clock.h"
#include "kvgate/http/sse.h"

namespace kvgate::app {

enum class StreamEnd : uint8_t {
  kNone,      // within its bounds
  kSilent,    // no event for `idle`
  kDeadline,  // past `total`
  kTooLarge,  // past `max_bytes`
};

class StreamGuard {
 public:
  // `start`: the request's start (the total deadline's origin); `first_piece`: when the stream's
  // first piece arrived (the idle clock's origin).
  StreamGuard(MonoTime start, MonoTime first_piece, Duration total, Duration idle,
              uint64_t max_bytes)
      : deadline_(start + total), last_event_(first_piece), idle_(idle), max_bytes_(max_bytes) {}

  // Takes a piece that arrived at `now`; returns whether it completed an event (progress).
  bool add(std::string_view piece, MonoTime now);
  // Whether the stream is still within its bounds at `now`, and if not which one it passed.
  StreamEnd check(MonoTime now) const;
  // How long the next read may wait at `now`: until the idle or the total deadline, whichever
  // comes first (at least a millisecond; check() first).
  std::chrono::milliseconds next_wait(MonoTime now) const;
  uint64_t bytes() const { return bytes_; }

 private:
  http::SseEventCounter events_;
  const MonoTime deadline_;
  MonoTime last_event_;
  const Duration idle_;
  const uint64_t max_bytes_;
  uint64_t bytes_ = 0;
};

// What the client's error event says for a stream that ended by `end`.
std::string_view stream_end_reason(StreamEnd end);

}  // namespace kvgate::app
