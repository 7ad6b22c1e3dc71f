// Time as the rest of kvgate sees it. Components take a `const Clock&` so tests drive time with a
// ManualClock instead of sleeping.
//
// Threading: Clock::real() is safe from any thread; ManualClock's reads and advances are atomic.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kvgate {

using MonoTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;
using Duration = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time, for intervals, timeouts and ages.
  virtual MonoTime now() const = 0;
  // Wall-clock time, only to compare with timestamps other processes wrote (event batch ts).
  virtual WallTime wall() const = 0;

  // The process's real clocks.
  static const Clock& real();
};

// A clock that moves only when told. Starts at an arbitrary fixed point for repeatable tests.
class ManualClock final : public Clock {
 public:
  ManualClock();
  MonoTime now() const override;
  WallTime wall() const override;
  void advance(Duration d);

 private:
  std::atomic<int64_t> offset_ns_{0};
  MonoTime mono_origin_;
  WallTime wall_origin_;
};

// Seconds as a double, for metrics and JSON.
inline double to_seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
inline double to_unix_seconds(WallTime t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
inline int64_t to_unix_ms(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace kvgate
