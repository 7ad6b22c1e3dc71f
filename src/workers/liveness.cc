#include "kvgate/workers/liveness.h"

#include <algorithm>

namespace kvgate::workers {

const char* liveness_name(Liveness l) {
  switch (l) {
    case Liveness::kLive:
      return "live";
    case Liveness::kUnreachable:
      return "unreachable";
    case Liveness::kWedged:
      return "wedged";
  }
  return "unknown";
}

const char* liveness_reason_name(LivenessReason r) {
  switch (r) {
    case LivenessReason::kNoProgress:
      return "no_progress";
    case LivenessReason::kStalled:
      return "stalled";
    case LivenessReason::kProgress:
      return "progress";
    case LivenessReason::kContact:
      return "contact";
    case LivenessReason::kConnectFailed:
      return "connect_failed";
    case LivenessReason::kCount:
      break;
  }
  return "unknown";
}

void LivenessTracker::note_stream_started(uint64_t prefill_tokens) {
  const int64_t now = now_ns();
  if (pile_.fetch_add(1, std::memory_order_relaxed) == 0) {
    pile_since_ns_.store(now, std::memory_order_relaxed);
  }
  if (prefill_tokens == 0 || config_.prefill_tokens_per_second <= 0) return;
  const auto prefill_ns = static_cast<int64_t>(static_cast<double>(prefill_tokens) /
                                               config_.prefill_tokens_per_second * 1e9);
  // Only a prefill longer than the wedge time excuses a silence: shorter ones are covered by the
  // wedge time itself, and excusing them would let the requests still routed to a frozen engine
  // put off its veto forever. The longest counts, not their sum: the engine prefills several
  // prompts in one step, and the streams that decode meanwhile show progress anyway.
  if (prefill_ns < config_.wedge.count()) return;
  const int64_t until = now + prefill_ns;
  int64_t seen = prefill_until_ns_.load(std::memory_order_relaxed);
  while (until > seen &&
         !prefill_until_ns_.compare_exchange_weak(seen, until, std::memory_order_relaxed)) {
  }
}

void LivenessTracker::note_stream_ended() {
  // The last stream gone: no prefill is expected any more (a cancelled long prompt must not
  // delay noticing a later freeze).
  if (pile_.fetch_sub(1, std::memory_order_relaxed) == 1) {
    prefill_until_ns_.store(0, std::memory_order_relaxed);
  }
}

void LivenessTracker::note_progress() {
  const int64_t now = now_ns();
  last_progress_ns_.store(now, std::memory_order_relaxed);
  last_contact_ns_.store(now, std::memory_order_relaxed);
}

void LivenessTracker::note_peer_progress(MonoTime at) {
  const int64_t t = at.time_since_epoch().count();
  int64_t seen = last_progress_ns_.load(std::memory_order_relaxed);
  while (t > seen && !last_progress_ns_.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
  }
}

std::optional<MonoTime> LivenessTracker::last_progress() const {
  const int64_t t = last_progress_ns_.load(std::memory_order_relaxed);
  if (t == 0) return std::nullopt;
  return MonoTime(Duration(t));
}

void LivenessTracker::note_contact() {
  last_contact_ns_.store(now_ns(), std::memory_order_relaxed);
}

void LivenessTracker::note_connect_failed() {
  last_connect_fail_ns_.store(now_ns(), std::memory_order_relaxed);
}

std::optional<LivenessTransition> LivenessTracker::evaluate() {
  const int64_t now = now_ns();
  const int64_t progress = last_progress_ns_.load(std::memory_order_relaxed);
  const int64_t contact = last_contact_ns_.load(std::memory_order_relaxed);
  const int64_t failed = last_connect_fail_ns_.load(std::memory_order_relaxed);
  const Liveness from = state();

  // Connection attempts failed after the last sign of life, and the silence lasted `stall`.
  const bool stalled =
      config_.stall.count() > 0 && failed > contact && now - contact >= config_.stall.count();
  // Streams wait and nothing moved since the latest of the last progress, the pile's start and
  // the end of its expected prefill.
  const int32_t pile = pile_.load(std::memory_order_relaxed);
  const int64_t quiet_since = std::max({progress, pile_since_ns_.load(std::memory_order_relaxed),
                                        prefill_until_ns_.load(std::memory_order_relaxed)});
  const bool wedged =
      config_.wedge.count() > 0 && pile > 0 && now - quiet_since >= config_.wedge.count();

  Liveness to = from;
  LivenessReason reason = LivenessReason::kProgress;
  switch (from) {
    case Liveness::kLive:
      if (stalled) {
        to = Liveness::kUnreachable;
        reason = LivenessReason::kStalled;
      } else if (wedged) {
        to = Liveness::kWedged;
        reason = LivenessReason::kNoProgress;
      }
      break;
    case Liveness::kWedged:
      // Requests the veto cut short drain the pile; only progress (or the engine vanishing)
      // ends it.
      if (progress > vetoed_at_ns_) {
        to = Liveness::kLive;
        reason = LivenessReason::kProgress;
      } else if (stalled) {
        to = Liveness::kUnreachable;
        reason = LivenessReason::kConnectFailed;
      }
      break;
    case Liveness::kUnreachable:
      if (contact > failed) {
        to = Liveness::kLive;
        reason = LivenessReason::kContact;
      }
      break;
  }
  if (to == from) return std::nullopt;
  if (to != Liveness::kLive) vetoed_at_ns_ = now;
  state_.store(static_cast<uint8_t>(to), std::memory_order_release);
  return LivenessTransition{from, to, reason};
}

}  // namespace kvgate::workers
