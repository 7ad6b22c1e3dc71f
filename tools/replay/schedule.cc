#include "replay/schedule.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace kvgate::replay {

Status validate_speedup(double speedup) {
  if (!std::isfinite(speedup) || !(speedup > 0)) {
    return absl::InvalidArgumentError("--speedup must be a positive finite number, not " +
                                      std::to_string(speedup));
  }
  return Status();
}

std::chrono::nanoseconds scaled_offset(uint64_t a_ms, uint64_t b_ms, double speedup) {
  using ns = std::chrono::nanoseconds;
  if (a_ms <= b_ms) return ns(0);
  const double v = static_cast<double>(a_ms - b_ms) * 1e6 / speedup;
  // 2^63 is exactly representable; anything at or beyond it does not fit.
  if (!(v < 9.2233720368547758e18)) return ns::max();
  return ns(static_cast<int64_t>(v));
}

std::chrono::steady_clock::time_point due_at(std::chrono::steady_clock::time_point start,
                                             std::chrono::nanoseconds offset) {
  using tp = std::chrono::steady_clock::time_point;
  const auto room = tp::max() - start;
  if (offset >= std::chrono::duration_cast<std::chrono::nanoseconds>(room)) return tp::max();
  return start + std::chrono::duration_cast<tp::duration>(offset);
}

Schedule make_schedule(const std::vector<uint64_t>& timestamps_ms, double speedup) {
  Schedule s;
  if (timestamps_ms.empty()) return s;
  const uint64_t t0 = *std::min_element(timestamps_ms.begin(), timestamps_ms.end());
  s.due.reserve(timestamps_ms.size());
  for (uint64_t t : timestamps_ms) s.due.push_back(scaled_offset(t, t0, speedup));
  s.order.resize(timestamps_ms.size());
  std::iota(s.order.begin(), s.order.end(), size_t{0});
  std::stable_sort(s.order.begin(), s.order.end(),
                   [&](size_t a, size_t b) { return s.due[a] < s.due[b]; });
  s.span = s.due[s.order.back()];
  return s;
}

}  // namespace kvgate::replay
