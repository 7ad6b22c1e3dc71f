#include "kvgate/workers/health.h"

namespace kvgate::workers {

const char* health_name(Health h) {
  switch (h) {
    case Health::kUnknown:
      return "unknown";
    case Health::kHealthy:
      return "healthy";
    case Health::kUnhealthy:
      return "unhealthy";
  }
  return "unknown";
}

bool HealthTracker::record(bool probe_ok) {
  const Health before = state();
  Health after = before;
  if (probe_ok) {
    consecutive_fail_ = 0;
    ++consecutive_ok_;
    if (before == Health::kUnknown ||
        (before == Health::kUnhealthy && consecutive_ok_ >= config_.success_threshold)) {
      after = Health::kHealthy;
    }
  } else {
    consecutive_ok_ = 0;
    ++consecutive_fail_;
    if (before != Health::kUnhealthy && consecutive_fail_ >= config_.failure_threshold) {
      after = Health::kUnhealthy;
    }
  }
  if (after == before) return false;
  state_.store(static_cast<uint8_t>(after), std::memory_order_release);
  return true;
}

}  // namespace kvgate::workers
