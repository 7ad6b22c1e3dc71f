// ReplayPacer: when one holder may send its next replay request.
//
// A healthy stream asks for a replay now and then (a batch lost on the wire, a restart). A
// publisher whose sequence numbers jump or go back again and again would have the subscription
// ask for the engine's whole retained window on every jump: ten thousand requests in ten seconds,
// each a replay the engine serves and the gateway decodes. So requests are spaced at least
// `min_interval` apart (no more than 1 / min_interval a second), and a request that follows the
// previous one closely (within four spacings) doubles the spacing, up to `max_interval`; one after
// a calm spell starts again from `min_interval`. A request that must wait is not lost: the
// subscription sends it when the pacer allows (live batches wait for it, as for any replay).
//
// Pure: the caller passes the time.
// Threading: one thread at a time (the holder's subscription).
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "kvgate/core/clock.h"

namespace kvgate::events {

struct ReplayPacing {
  std::chrono::milliseconds min_interval{100};  // 10 requests a second at most
  std::chrono::milliseconds max_interval{5000};
};

class ReplayPacer {
 public:
  explicit ReplayPacer(ReplayPacing pacing = {})
      : pacing_(pacing), interval_(pacing.min_interval) {}

  // Whether a request may go out at `now`, and from when it may.
  bool ready(MonoTime now) const { return !last_ || now >= ready_at_; }
  MonoTime ready_at() const { return last_ ? ready_at_ : MonoTime{}; }

  // A request went out at `now`.
  void sent(MonoTime now) {
    if (last_ && now - *last_ < 4 * interval_) {
      interval_ = std::min<Duration>(2 * interval_, pacing_.max_interval);
    } else {
      interval_ = pacing_.min_interval;
    }
    last_ = now;
    ready_at_ = now + interval_;
  }

  // The spacing the next request waits for.
  Duration interval() const { return interval_; }

 private:
  ReplayPacing pacing_;
  Duration interval_;
  std::optional<MonoTime> last_;
  MonoTime ready_at_{};
};

}  // namespace kvgate::events
