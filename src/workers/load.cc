#include "kvgate/workers/load.h"

namespace kvgate::workers {

OverloadRule::OverloadRule(const OverloadThresholds& t)
    : kv_usage_ppm_(uint64_t{1'000'001}),
      waiting_(t.waiting_requests ? *t.waiting_requests : uint64_t{1} << 32),
      in_flight_(t.in_flight_requests ? int64_t{*t.in_flight_requests} : int64_t{1} << 32),
      prefilling_(t.prefilling_requests ? int64_t{*t.prefilling_requests} : int64_t{1} << 32) {
  if (!t.token_usage) return;
  // The least ppm whose usage (ppm / 1e6, as workers report it) reaches the threshold: the
  // division is monotonic, so a binary search over [0, 1e6] finds it.
  const double threshold = *t.token_usage;
  uint64_t lo = 0, hi = 1'000'001;  // answer in [lo, hi]; hi: never
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (static_cast<uint32_t>(mid) / 1e6 >= threshold) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  kv_usage_ppm_ = lo;
}

}  // namespace kvgate::workers
