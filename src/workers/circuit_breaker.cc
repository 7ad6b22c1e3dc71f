#include "kvgate/workers/circuit_breaker.h"

#include <algorithm>

namespace kvgate::workers {
namespace {
int64_t ns(MonoTime t) { return t.time_since_epoch().count(); }
}  // namespace

bool counts_against_worker(Outcome o) {
  return o == Outcome::kServerError || o == Outcome::kTimeout || o == Outcome::kConnectFailed;
}

const char* breaker_state_name(BreakerState s) {
  switch (s) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

bool CircuitBreaker::allows_when_not_closed() const {
  if (state() == BreakerState::kHalfOpen) return false;  // its one trial is in flight
  return ns(clock_.now()) >= open_until_ns_.load(std::memory_order_acquire);
}

bool CircuitBreaker::try_begin_trial() {
  if (state() == BreakerState::kClosed) return true;
  MutexLock lock(&mu_);
  if (state() == BreakerState::kClosed) return true;
  if (trial_in_flight_ || ns(clock_.now()) < open_until_ns_.load(std::memory_order_acquire))
    return false;
  trial_in_flight_ = true;
  state_.store(static_cast<uint8_t>(BreakerState::kHalfOpen), std::memory_order_release);
  return true;
}

void CircuitBreaker::open_locked(MonoTime now) {
  current_open_for_ = current_open_for_ == Duration::zero()
                          ? config_.open_for
                          : std::min<Duration>(current_open_for_ * 2, config_.max_open_for);
  open_until_ns_.store(ns(now + current_open_for_), std::memory_order_release);
  state_.store(static_cast<uint8_t>(BreakerState::kOpen), std::memory_order_release);
  opened_total_.fetch_add(1, std::memory_order_relaxed);
}

void CircuitBreaker::record(Outcome outcome) {
  if (config_.consecutive_failures == 0 || outcome == Outcome::kCancelled) return;
  const bool failure = counts_against_worker(outcome);
  if (!failure && outcome != Outcome::kSuccess) return;  // a client's 4xx: no information
  MutexLock lock(&mu_);
  const auto s = state();
  if (s == BreakerState::kHalfOpen) {
    trial_in_flight_ = false;
    if (failure) {
      open_locked(clock_.now());
    } else {
      failures_ = 0;
      current_open_for_ = Duration::zero();
      state_.store(static_cast<uint8_t>(BreakerState::kClosed), std::memory_order_release);
    }
    return;
  }
  if (!failure) {
    failures_ = 0;
    return;
  }
  if (s == BreakerState::kClosed && ++failures_ >= config_.consecutive_failures) {
    failures_ = 0;
    open_locked(clock_.now());
  }
}

void CircuitBreaker::reset() {
  MutexLock lock(&mu_);
  failures_ = 0;
  trial_in_flight_ = false;
  current_open_for_ = Duration::zero();
  state_.store(static_cast<uint8_t>(BreakerState::kClosed), std::memory_order_release);
}

}  // namespace kvgate::workers
