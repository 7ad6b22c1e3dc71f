#include "kvgate/workers/health.h"

#include <gtest/gtest.h>

namespace kvgate::workers {
namespace {

TEST(Health, FirstSuccessMakesANewWorkerHealthy) {
  HealthTracker h({.failure_threshold = 3, .success_threshold = 2});
  EXPECT_EQ(h.state(), Health::kUnknown);
  EXPECT_TRUE(h.record(true));
  EXPECT_EQ(h.state(), Health::kHealthy);
}

TEST(Health, HysteresisBothWays) {
  HealthTracker h({.failure_threshold = 3, .success_threshold = 2});
  h.record(true);
  EXPECT_FALSE(h.record(false));
  EXPECT_FALSE(h.record(false));
  EXPECT_FALSE(h.record(true));  // streak broken
  EXPECT_FALSE(h.record(false));
  EXPECT_FALSE(h.record(false));
  EXPECT_TRUE(h.record(false));
  EXPECT_EQ(h.state(), Health::kUnhealthy);
  EXPECT_FALSE(h.record(true));
  EXPECT_EQ(h.state(), Health::kUnhealthy);
  EXPECT_TRUE(h.record(true));
  EXPECT_EQ(h.state(), Health::kHealthy);
}

TEST(Health, NewWorkerThatNeverAnswersBecomesUnhealthy) {
  HealthTracker h({.failure_threshold = 2, .success_threshold = 1});
  h.record(false);
  EXPECT_EQ(h.state(), Health::kUnknown);
  h.record(false);
  EXPECT_EQ(h.state(), Health::kUnhealthy);
}

}  // namespace
}  // namespace kvgate::workers
