// HealthTracker: a worker's health from periodic probes, with hysteresis so one lost probe does not
// flap it out of rotation: `failure_threshold` consecutive failures make it unhealthy,
// `success_threshold` consecutive successes make it healthy again. A new worker starts unknown and
// becomes healthy on its first success (so a fleet is routable as soon as it answers).
//
// Threading: record() from the prober (one thread per worker at a time); state() from any thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace kvgate::workers {

enum class Health : uint8_t { kUnknown = 0, kHealthy = 1, kUnhealthy = 2 };
const char* health_name(Health h);

struct HealthConfig {
  uint32_t failure_threshold = 3;
  uint32_t success_threshold = 2;
};

class HealthTracker {
 public:
  // `state`: where to keep the state instead of inside (a Worker keeps its trackers' states
  // beside its load figures, where routing decisions read them). It must outlive the tracker; only
  // the tracker writes it (release), anyone may read it (acquire).
  explicit HealthTracker(HealthConfig config, std::atomic<uint8_t>* state = nullptr)
      : state_(state != nullptr ? *state : own_state_), config_(config) {}

  // Returns true when the state changed.
  bool record(bool probe_ok);
  Health state() const { return static_cast<Health>(state_.load(std::memory_order_acquire)); }
  // Operator override (e.g. a worker added with health checks off is healthy at once).
  void force(Health h) { state_.store(static_cast<uint8_t>(h), std::memory_order_release); }

 private:
  // The state: `state` given to the constructor, else own_state_ (see there).
  std::atomic<uint8_t> own_state_{0};
  std::atomic<uint8_t>& state_;
  const HealthConfig config_;
  uint32_t consecutive_ok_ = 0;    // prober thread only
  uint32_t consecutive_fail_ = 0;  // prober thread only
};

}  // namespace kvgate::workers
