// When each request of an open-loop replay is due: the row's trace timestamp divided by the
// speedup, counted from the earliest timestamp of the selection.
//
// Every step saturates: a timestamp before the reference cannot underflow (it is due at once), a
// due time beyond what a steady_clock duration holds is clamped to the largest one, and the send
// order is the due order (stable for equal times), so an unsorted trace replays in time order.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "kvgate/core/result.h"

namespace kvgate::replay {

// --speedup must be positive and finite.
Status validate_speedup(double speedup);

struct Schedule {
  std::vector<std::chrono::nanoseconds> due;  // per input row, from the replay's start
  std::vector<size_t> order;                  // input rows sorted by due time (stable)
  std::chrono::nanoseconds span{0};           // the last due time
};

// `timestamps_ms` of the selected rows in trace order; `speedup` already validated.
Schedule make_schedule(const std::vector<uint64_t>& timestamps_ms, double speedup);

// start + offset, clamped to time_point::max() instead of overflowing.
std::chrono::steady_clock::time_point due_at(std::chrono::steady_clock::time_point start,
                                             std::chrono::nanoseconds offset);

// (a - b) / speedup in nanoseconds, saturating at 0 and at nanoseconds::max().
std::chrono::nanoseconds scaled_offset(uint64_t a_ms, uint64_t b_ms, double speedup);

}  // namespace kvgate::replay
