// CircuitBreaker: stops sending traffic to a worker that keeps failing, and lets a trial request
// through after a cool-down to find out whether it recovered.
//
// Only the worker's own failures count: 5xx answers, timeouts and connection failures. A client's
// 4xx says nothing about the worker and never opens the breaker.
//
//   closed --(consecutive_failures failures)--> open --(open_for elapsed)--> half-open
//   half-open --(trial succeeds)--> closed;  half-open --(trial fails)--> open (cool-down doubled,
//   capped at max_open_for)
//
// Threading: allows() is a lock-free read for the routing path (it may admit a half-open worker
// to several concurrent decisions; try_begin_trial() then lets only one of them through). The
// record_*() calls take a small per-breaker lock; they run once per request end.
#pragma once

#include <atomic>
#include <cstdint>

#include "kvgate/core/clock.h"
#include "kvgate/core/thread_annotations.h"

namespace kvgate::workers {

enum class Outcome : uint8_t {
  kSuccess,
  kClientError,    // 4xx other than 408/429: the request's fault; not counted
  kServerError,    // 5xx, 408, 429
  kTimeout,        // no answer in time
  kConnectFailed,  // connection refused / reset before an answer
  kCancelled,      // the client went away; says nothing about the worker
};
bool counts_against_worker(Outcome o);

enum class BreakerState : uint8_t { kClosed = 0, kOpen = 1, kHalfOpen = 2 };
const char* breaker_state_name(BreakerState s);

struct BreakerConfig {
  uint32_t consecutive_failures = 5;  // 0 disables the breaker
  Duration open_for = std::chrono::seconds(5);
  Duration max_open_for = std::chrono::seconds(60);
};

class CircuitBreaker {
 public:
  // `state`: where to keep the state instead of inside (a Worker keeps its trackers' states
  // beside its load figures, where routing decisions read them). It must outlive the tracker; only
  // the tracker writes it (release), anyone may read it (acquire).
  CircuitBreaker(BreakerConfig config, const Clock& clock, std::atomic<uint8_t>* state = nullptr)
      : state_(state != nullptr ? *state : own_state_), config_(config), clock_(clock) {}

  // Whether a routing decision may pick this worker now (closed, or open past its cool-down).
  bool allows() const { return state() == BreakerState::kClosed || allows_when_not_closed(); }
  // Called when a decision picked a worker that is not closed: true for the one trial request.
  bool try_begin_trial();
  void record(Outcome outcome);
  // Forget failures (worker re-admitted by the operator or a passing health check after removal).
  void reset();

  BreakerState state() const {
    return static_cast<BreakerState>(state_.load(std::memory_order_acquire));
  }
  uint64_t opened_total() const { return opened_total_.load(std::memory_order_relaxed); }

 private:
  bool allows_when_not_closed() const;
  void open_locked(MonoTime now) KVGATE_REQUIRES(mu_);

  // The state: `state` given to the constructor, else own_state_ (see there).
  std::atomic<uint8_t> own_state_{0};
  std::atomic<uint8_t>& state_;
  const BreakerConfig config_;
  const Clock& clock_;
  std::atomic<int64_t> open_until_ns_{0};  // steady-clock ns since epoch
  std::atomic<uint64_t> opened_total_{0};
  Mutex mu_;
  uint32_t failures_ KVGATE_GUARDED_BY(mu_) = 0;
  bool trial_in_flight_ KVGATE_GUARDED_BY(mu_) = false;
  Duration current_open_for_ KVGATE_GUARDED_BY(mu_){};
};

}  // namespace kvgate::workers
