#include "kvgate/workers/prefill_rate.h"

#include <cmath>

namespace kvgate::workers {

std::optional<double> PrefillRate::observe(uint64_t tokens, Duration took, MonoTime now) {
  if (!learning() || took.count() <= 0) return std::nullopt;
  MutexLock l(&mu_);
  if (samples_ > 0 && now > last_) {
    const double halves = std::chrono::duration<double>(now - last_).count() /
                          std::chrono::duration<double>(config_.half_life).count();
    const double keep = std::exp2(-halves);
    tokens_ *= keep;
    seconds_ *= keep;
  }
  if (now > last_) last_ = now;
  tokens_ += static_cast<double>(tokens);
  seconds_ += std::chrono::duration<double>(took).count();
  ++samples_;
  return estimate();
}

double PrefillRate::tokens_per_second() const {
  if (!learning()) return config_.prior_tokens_per_second;
  MutexLock l(&mu_);
  return estimate();
}

double PrefillRate::estimate() const {
  const double prior = config_.prior_tokens_per_second;
  const double seconds = config_.prior_tokens / prior + seconds_;
  return seconds > 0 ? (config_.prior_tokens + tokens_) / seconds : prior;
}

uint64_t PrefillRate::samples() const {
  MutexLock l(&mu_);
  return samples_;
}

}  // namespace kvgate::workers
