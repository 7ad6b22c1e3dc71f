#include "app/fleet_pulse.h"

#include <gtest/gtest.h>

#include <limits>

namespace kvgate::app {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Buckets buckets(std::vector<uint64_t> cumulative) {
  return {.bounds = {1, 2, 4, kInf}, .counts = std::move(cumulative)};
}

TEST(FleetPulse, QuantilesInterpolateInsideTheBucketOfTheDifference) {
  const Buckets before = buckets({5, 5, 5, 5});
  // 10 new observations: 0 in (0,1], 8 in (1,2], 2 in (2,4].
  const Buckets after = buckets({5, 13, 15, 15});
  EXPECT_DOUBLE_EQ(*quantile_between(before, after, 0.5), 1.0 + 1.0 * 5 / 8);
  EXPECT_DOUBLE_EQ(*quantile_between(before, after, 0.9), 2.0 + 2.0 * 1 / 2);
  EXPECT_EQ(quantile_between(after, after, 0.5), std::nullopt) << "nothing observed";
  // Beyond the last finite bound: that bound, as histogram_quantile() answers.
  EXPECT_DOUBLE_EQ(*quantile_between(before, buckets({5, 5, 5, 9}), 0.99), 4.0);
  // From nothing (the first sample's histogram is empty).
  EXPECT_DOUBLE_EQ(*quantile_between({}, buckets({4, 4, 4, 4}), 0.5), 0.5);
}

PulseTotals totals(double seconds, uint64_t requests, uint64_t prompt, uint64_t matched,
                   std::vector<std::pair<std::string, uint64_t>> dispatched) {
  PulseTotals t;
  t.seconds = seconds;
  t.unix_ms = static_cast<int64_t>(seconds * 1000);
  t.requests = requests;
  t.prompt_tokens = prompt;
  t.matched_tokens = matched;
  t.decision_seconds = buckets({0, 0, 0, 0});
  t.dispatched = std::move(dispatched);
  return t;
}

TEST(FleetPulse, PointsAndTheWindowComeFromDifferences) {
  FleetPulse pulse(/*points=*/3, /*window_samples=*/2);
  EXPECT_EQ(pulse.window().seconds, 0);
  pulse.sample(totals(10, 100, 1000, 0, {{"a", 50}, {"b", 50}}));
  EXPECT_TRUE(pulse.series().empty()) << "a point needs two samples";
  pulse.sample(totals(11, 110, 2000, 500, {{"a", 55}, {"b", 55}}));
  pulse.sample(totals(12, 130, 2000, 500, {{"a", 70}, {"b", 60}}));
  const auto series = pulse.series();
  ASSERT_EQ(series.size(), 2u);
  EXPECT_DOUBLE_EQ(series[0].requests_per_second, 10);
  EXPECT_DOUBLE_EQ(*series[0].hit_ratio, 0.5);
  EXPECT_DOUBLE_EQ(series[1].requests_per_second, 20);
  EXPECT_EQ(series[1].hit_ratio, std::nullopt) << "no prompt routed in that second";
  EXPECT_EQ(series[1].decision_p99_us, std::nullopt);

  const PulseWindow w = pulse.window();
  EXPECT_DOUBLE_EQ(w.seconds, 2);
  EXPECT_DOUBLE_EQ(w.requests_per_second, 15);
  EXPECT_DOUBLE_EQ(*w.hit_ratio, 0.5);
  ASSERT_EQ(w.decision_share.size(), 2u);
  EXPECT_DOUBLE_EQ(w.decision_share[0].second, 20.0 / 30);  // a: 20 of the 30 sent
  EXPECT_DOUBLE_EQ(w.decision_share[1].second, 10.0 / 30);

  // The window slides (two intervals) and the ring keeps three points; a worker added since the
  // window began counts from zero.
  pulse.sample(totals(13, 130, 2000, 500, {{"a", 70}, {"b", 60}, {"c", 10}}));
  pulse.sample(totals(14, 130, 2000, 500, {{"a", 70}, {"b", 60}, {"c", 30}}));
  EXPECT_EQ(pulse.series().size(), 3u);
  const PulseWindow later = pulse.window();
  EXPECT_DOUBLE_EQ(later.requests_per_second, 0);
  EXPECT_EQ(later.hit_ratio, std::nullopt);
  ASSERT_EQ(later.decision_share.size(), 3u);
  EXPECT_DOUBLE_EQ(later.decision_share[2].second, 1.0);
}

}  // namespace
}  // namespace kvgate::app
