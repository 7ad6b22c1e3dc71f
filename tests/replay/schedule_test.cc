#include "replay/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "replay/progress.h"
#include "replay/runner.h"

namespace kvgate::replay {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(Speedup, MustBePositiveAndFinite) {
  for (double bad : {0.0, -1.0, -0.0, std::nan(""), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(validate_speedup(bad).ok()) << bad;
  }
  for (double ok : {1e-6, 0.5, 1.0, 3.0, 1e9}) EXPECT_TRUE(validate_speedup(ok).ok()) << ok;
}

TEST(Schedule, DividesTimestampsBySpeedupFromTheEarliest) {
  const Schedule s = make_schedule({1000, 2000, 4000}, 2.0);
  ASSERT_EQ(s.due.size(), 3u);
  EXPECT_EQ(s.due[0], nanoseconds(0));
  EXPECT_EQ(s.due[1], milliseconds(500));
  EXPECT_EQ(s.due[2], milliseconds(1500));
  EXPECT_EQ(s.order, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(s.span, milliseconds(1500));
}

TEST(Schedule, UnsortedTimestampsDoNotUnderflowAndSendInTimeOrder) {
  const Schedule s = make_schedule({5000, 1000, 3000, 1000}, 1.0);
  EXPECT_EQ(s.due[0], milliseconds(4000));
  EXPECT_EQ(s.due[1], nanoseconds(0));
  EXPECT_EQ(s.due[2], milliseconds(2000));
  EXPECT_EQ(s.due[3], nanoseconds(0));
  EXPECT_EQ(s.order, (std::vector<size_t>{1, 3, 2, 0}));  // stable for equal times
  EXPECT_EQ(s.span, milliseconds(4000));
  // The raw subtraction the other way round saturates at zero.
  EXPECT_EQ(scaled_offset(1000, 5000, 1.0), nanoseconds(0));
}

TEST(Schedule, DueTimesSaturate) {
  const uint64_t big = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(scaled_offset(big, 0, 1.0), nanoseconds::max());
  EXPECT_EQ(scaled_offset(2000, 0, 1e-300), nanoseconds::max());
  const Schedule s = make_schedule({0, big}, 1e-3);
  EXPECT_EQ(s.due[1], nanoseconds::max());
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ(due_at(now, nanoseconds::max()), std::chrono::steady_clock::time_point::max());
  EXPECT_EQ(due_at(now, milliseconds(5)), now + milliseconds(5));
}

TEST(Schedule, Empty) {
  const Schedule s = make_schedule({}, 1.0);
  EXPECT_TRUE(s.due.empty());
  EXPECT_TRUE(s.order.empty());
}

TEST(MaxTokens, OutputLengthCappedAndAtLeastOne) {
  EXPECT_EQ(max_tokens_for(343, 0), 343u);
  EXPECT_EQ(max_tokens_for(343, 64), 64u);
  EXPECT_EQ(max_tokens_for(10, 64), 10u);
  EXPECT_EQ(max_tokens_for(0, 0), 1u);
}

TEST(Progress, Line) {
  EXPECT_EQ(Progress::line(400, 120, 90, 10, 12.4, 40, 10),
            "[==>       ] 120/400 sent, 90 done, 10 failed, 20 in flight, 12 s (arrivals end at "
            "40 s)");
  EXPECT_EQ(Progress::line(4, 4, 4, 0, 1, 1, 4),
            "[====] 4/4 sent, 4 done, 0 failed, 0 in flight, "
            "1 s (arrivals end at 1 s)");
}

}  // namespace
}  // namespace kvgate::replay
