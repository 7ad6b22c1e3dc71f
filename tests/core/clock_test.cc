#include "kvgate/core/clock.h"

#include <gtest/gtest.h>

namespace kvgate {
namespace {

TEST(ManualClock, MovesOnlyWhenAdvanced) {
  ManualClock c;
  const auto t0 = c.now();
  const auto w0 = c.wall();
  EXPECT_EQ(c.now(), t0);
  c.advance(std::chrono::milliseconds(1500));
  EXPECT_EQ(c.now() - t0, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.wall() - w0, std::chrono::milliseconds(1500));
  EXPECT_DOUBLE_EQ(to_seconds(c.now() - t0), 1.5);
}

TEST(RealClock, IsMonotonic) {
  const Clock& c = Clock::real();
  const auto a = c.now();
  const auto b = c.now();
  EXPECT_LE(a, b);
  EXPECT_GT(to_unix_seconds(c.wall()), 1.6e9);
}

}  // namespace
}  // namespace kvgate
