#include "app/stream_guard.h"

#include <algorithm>

namespace kvgate::app {

bool StreamGuard::add(std::string_view piece, MonoTime now) {
  bytes_ += piece.size();
  if (events_.feed(piece) == 0) return false;
  last_event_ = now;
  return true;
}

StreamEnd StreamGuard::check(MonoTime now) const {
  if (bytes_ > max_bytes_) return StreamEnd::kTooLarge;
  if (now >= deadline_) return StreamEnd::kDeadline;
  if (now >= last_event_ + idle_) return StreamEnd::kSilent;
  return StreamEnd::kNone;
}

std::chrono::milliseconds StreamGuard::next_wait(MonoTime now) const {
  const Duration left = std::min(deadline_, last_event_ + idle_) - now;
  return std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(left));
}

std::string_view stream_end_reason(StreamEnd end) {
  switch (end) {
    case StreamEnd::kSilent:
      return "the worker sent no event for --stream-idle-timeout-secs";
    case StreamEnd::kDeadline:
      return "the stream ran past --request-timeout-secs";
    case StreamEnd::kTooLarge:
      return "the answer grew past --max-answer-bytes";
    case StreamEnd::kNone:
      break;
  }
  return "";
}

}  // namespace kvgate::app
