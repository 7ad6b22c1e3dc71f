#include "kvgate/core/clock.h"

namespace kvgate {
namespace {
class RealClock final : public Clock {
 public:
  MonoTime now() const override { return std::chrono::steady_clock::now(); }
  WallTime wall() const override { return std::chrono::system_clock::now(); }
};
}  // namespace

const Clock& Clock::real() {
  static const RealClock clock;
  return clock;
}

ManualClock::ManualClock()
    : mono_origin_(MonoTime(std::chrono::hours(1))),
      wall_origin_(WallTime(std::chrono::seconds(1'700'000'000))) {}

MonoTime ManualClock::now() const {
  return mono_origin_ + Duration(offset_ns_.load(std::memory_order_acquire));
}

WallTime ManualClock::wall() const {
  return wall_origin_ + std::chrono::duration_cast<WallTime::duration>(
                            Duration(offset_ns_.load(std::memory_order_acquire)));
}

void ManualClock::advance(Duration d) {
  offset_ns_.fetch_add(d.count(), std::memory_order_acq_rel);
}

}  // namespace kvgate
