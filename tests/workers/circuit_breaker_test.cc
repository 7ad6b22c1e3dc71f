#include "kvgate/workers/circuit_breaker.h"

#include <gtest/gtest.h>

namespace kvgate::workers {
namespace {

using std::chrono::seconds;

class BreakerTest : public ::testing::Test {
 protected:
  ManualClock clock;
  CircuitBreaker breaker{
      {.consecutive_failures = 3, .open_for = seconds(5), .max_open_for = seconds(12)}, clock};
};

TEST_F(BreakerTest, ClientErrorsAndCancelsNeverOpenIt) {
  for (int i = 0; i < 100; ++i) {
    breaker.record(Outcome::kClientError);
    breaker.record(Outcome::kCancelled);
  }
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  EXPECT_TRUE(breaker.allows());
}

TEST_F(BreakerTest, ConsecutiveWorkerFailuresOpenItAndASuccessResetsTheCount) {
  breaker.record(Outcome::kServerError);
  breaker.record(Outcome::kTimeout);
  breaker.record(Outcome::kSuccess);  // resets
  breaker.record(Outcome::kConnectFailed);
  breaker.record(Outcome::kServerError);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  breaker.record(Outcome::kTimeout);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  EXPECT_FALSE(breaker.allows());
  EXPECT_EQ(breaker.opened_total(), 1u);
}

TEST_F(BreakerTest, HalfOpenLetsOneTrialThroughAndClosesOnSuccess) {
  for (int i = 0; i < 3; ++i) breaker.record(Outcome::kServerError);
  clock.advance(seconds(4));
  EXPECT_FALSE(breaker.allows());
  EXPECT_FALSE(breaker.try_begin_trial());
  clock.advance(seconds(1));
  EXPECT_TRUE(breaker.allows());
  EXPECT_TRUE(breaker.try_begin_trial());
  EXPECT_EQ(breaker.state(), BreakerState::kHalfOpen);
  EXPECT_FALSE(breaker.allows());  // only one trial at a time
  EXPECT_FALSE(breaker.try_begin_trial());
  breaker.record(Outcome::kSuccess);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
  EXPECT_TRUE(breaker.allows());
}

TEST_F(BreakerTest, FailedTrialReopensWithDoubledCappedCoolDown) {
  for (int i = 0; i < 3; ++i) breaker.record(Outcome::kServerError);
  clock.advance(seconds(5));
  ASSERT_TRUE(breaker.try_begin_trial());
  breaker.record(Outcome::kTimeout);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  clock.advance(seconds(9));
  EXPECT_FALSE(breaker.allows());  // 10 s now
  clock.advance(seconds(1));
  ASSERT_TRUE(breaker.try_begin_trial());
  breaker.record(Outcome::kServerError);
  clock.advance(seconds(11));
  EXPECT_FALSE(breaker.allows());  // capped at 12 s
  clock.advance(seconds(1));
  EXPECT_TRUE(breaker.allows());
  breaker.reset();
  EXPECT_EQ(breaker.state(), BreakerState::kClosed);
}

TEST(Breaker, ZeroThresholdDisablesIt) {
  ManualClock clock;
  CircuitBreaker b({.consecutive_failures = 0}, clock);
  for (int i = 0; i < 50; ++i) b.record(Outcome::kServerError);
  EXPECT_TRUE(b.allows());
}

}  // namespace
}  // namespace kvgate::workers
