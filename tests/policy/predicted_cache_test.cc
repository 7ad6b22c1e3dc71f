#include "policy/detail/predicted_cache.h"

#include <gtest/gtest.h>

namespace kvgate::policy::detail {
namespace {

TEST(PredictedCache, RecordsPrefixesPerWorkerWithTtl) {
  ManualClock clock;
  PredictedCache c(std::chrono::seconds(10), 1000, clock);
  const std::vector<SeqHash> chain = {1, 2, 3, 4};
  c.record(WorkerId(1), chain);
  EXPECT_EQ(c.depth(WorkerId(1), chain), 4u);
  EXPECT_EQ(c.depth(WorkerId(2), chain), 0u);
  EXPECT_EQ(c.depth(WorkerId(1), std::vector<SeqHash>{1, 2, 9}), 2u);
  clock.advance(std::chrono::seconds(6));
  c.record(WorkerId(1), std::vector<SeqHash>{1, 2});  // refresh the head only
  clock.advance(std::chrono::seconds(5));
  EXPECT_EQ(c.depth(WorkerId(1), chain), 2u);
  c.forget(WorkerId(1));
  EXPECT_EQ(c.depth(WorkerId(1), chain), 0u);
}

TEST(PredictedCache, CapacityBoundsMemoryEvenUnderAnEndlessTtl) {
  ManualClock clock;
  PredictedCache c(std::chrono::hours(1000), 16 * 64, clock);
  for (SeqHash h = 0; h < 100000; ++h) c.record(WorkerId(h % 7), std::vector<SeqHash>{h});
  EXPECT_LE(c.size(), 16u * 64u);
  EXPECT_EQ(c.depth(WorkerId(99999 % 7), std::vector<SeqHash>{99999}), 1u);  // newest kept
}

}  // namespace
}  // namespace kvgate::policy::detail
