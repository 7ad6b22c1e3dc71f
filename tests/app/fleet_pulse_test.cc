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
  FleetPulse pulse(/*points=*/3, /*keep_samples=*/2);
  EXPECT_EQ(pulse.window(2).seconds, 0);
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

  const PulseWindow w = pulse.window(2);
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
  const PulseWindow later = pulse.window(2);
  EXPECT_DOUBLE_EQ(later.requests_per_second, 0);
  EXPECT_EQ(later.hit_ratio, std::nullopt);
  ASSERT_EQ(later.decision_share.size(), 3u);
  EXPECT_DOUBLE_EQ(later.decision_share[2].second, 1.0);
  EXPECT_DOUBLE_EQ(pulse.window(99).seconds, 2) << "no further back than the samples kept";
}

TEST(FleetPulse, AWindowOfFewerSamplesEndsAtTheNewestSample) {
  FleetPulse pulse(/*points=*/10, /*keep_samples=*/5);
  for (int s = 0; s <= 5; ++s) {
    // 10 requests a second for three seconds, then 40.
    const uint64_t requests = s <= 3 ? 10u * s : 30u + 40u * (s - 3);
    pulse.sample(totals(s, requests, 0, 0, {}));
  }
  EXPECT_DOUBLE_EQ(pulse.window(5).seconds, 5);
  EXPECT_DOUBLE_EQ(pulse.window(5).requests_per_second, 110.0 / 5);
  EXPECT_DOUBLE_EQ(pulse.window(2).seconds, 2);
  EXPECT_DOUBLE_EQ(pulse.window(2).requests_per_second, 40);
  EXPECT_DOUBLE_EQ(pulse.window(1).requests_per_second, 40);
}

TEST(FleetPulse, ErrorsAndStatusClassesCountOverTheWindow) {
  FleetPulse pulse(/*points=*/10, /*keep_samples=*/4);
  PulseTotals a = totals(0, 0, 0, 0, {});
  a.requests_by_status = {{"2xx", 100}, {"4xx", 3}, {"5xx", 1}};
  a.errors_by_reason = {{"bad_request", 2}, {"unknown_model", 1}};
  pulse.sample(a);
  PulseTotals b = totals(4, 0, 0, 0, {});
  b.requests_by_status = {{"2xx", 140}, {"4xx", 5}, {"5xx", 1}};
  // An unknown model twice more, and a reason first seen now.
  b.errors_by_reason = {{"bad_request", 2}, {"no_worker", 2}, {"unknown_model", 3}};
  pulse.sample(b);
  const PulseWindow w = pulse.window(4);
  ASSERT_EQ(w.requests_by_status.size(), 3u) << "every class, idle ones too";
  EXPECT_EQ(w.requests_by_status[1].name, "4xx");
  EXPECT_EQ(w.requests_by_status[1].count, 2u);
  EXPECT_DOUBLE_EQ(w.requests_by_status[1].per_second, 0.5);
  EXPECT_EQ(w.requests_by_status[2].count, 0u);
  ASSERT_EQ(w.errors_by_reason.size(), 2u) << "only the reasons that occurred";
  EXPECT_EQ(w.errors_by_reason[0].name, "no_worker");
  EXPECT_EQ(w.errors_by_reason[0].count, 2u);
  EXPECT_EQ(w.errors_by_reason[1].name, "unknown_model");
  EXPECT_EQ(w.errors_by_reason[1].count, 2u);
  EXPECT_EQ(w.errors, 4u);
  EXPECT_DOUBLE_EQ(w.errors_per_second, 1.0);
}

TEST(FleetPulse, LatencyPercentilesTokensAndAdmissionOverTheWindow) {
  FleetPulse pulse(/*points=*/10, /*keep_samples=*/3);
  PulseTotals a = totals(0, 0, 1000, 0, {});
  a.completion_tokens = 50;
  a.ttft_seconds = buckets({1, 1, 1, 1});
  a.request_seconds = buckets({0, 0, 0, 0});
  a.admission = {.running = 3, .queued = 1, .shed = 1, .waited = 4};
  pulse.sample(a);
  PulseTotals b = totals(2, 0, 5000, 0, {});
  b.completion_tokens = 250;
  // 10 first tokens in the window: 1 in (0,1], 8 in (1,2], 1 in (2,4].
  b.ttft_seconds = buckets({2, 10, 11, 11});
  b.request_seconds = buckets({0, 0, 0, 0});
  b.admission = {.running = 2, .queued = 5, .queued_by_class = {0, 5, 0}, .shed = 3, .waited = 9};
  pulse.sample(b);
  const PulseWindow w = pulse.window(3);
  EXPECT_EQ(w.ttft_ms.count, 10u);
  EXPECT_DOUBLE_EQ(*w.ttft_ms.p50, 1e3 * (1.0 + 1.0 * 4 / 8));
  EXPECT_DOUBLE_EQ(*w.ttft_ms.p90, 1e3 * 2.0);
  EXPECT_DOUBLE_EQ(*w.ttft_ms.p99, 1e3 * (2.0 + 2.0 * 0.9));
  EXPECT_EQ(w.request_ms.count, 0u);
  EXPECT_EQ(w.request_ms.p50, std::nullopt) << "no request ended in the window";
  EXPECT_DOUBLE_EQ(w.prompt_tokens_per_second, 2000);
  EXPECT_DOUBLE_EQ(w.completion_tokens_per_second, 100);
  EXPECT_EQ(w.admission.waited, 5u);
  EXPECT_EQ(w.admission.shed, 2u);
  EXPECT_EQ(w.admission.queued, 5u) << "the queue as the newest sample found it";
  EXPECT_EQ(w.admission.queued_by_class[1], 5u);
  EXPECT_EQ(w.admission.running, 2u);
}

TEST(FleetPulse, RegistryTotalsAddUpTheSeriesOfEachLabelValue) {
  metrics::Registry reg;
  auto& requests = metrics::counter_family(reg, "kvgate_requests_total", "Requests.");
  requests.Add({{"route", "completions"}, {"status", "2xx"}}).Increment(5);
  requests.Add({{"route", "completions"}, {"status", "4xx"}}).Increment(2);
  requests.Add({{"route", "chat"}, {"status", "4xx"}}).Increment(1);
  auto& errors = metrics::counter_family(reg, "kvgate_request_errors_total", "Errors.");
  errors.Add({{"reason", "unknown_model"}}).Increment(3);
  auto& durations = metrics::histogram_family(reg, "kvgate_request_duration_seconds", "Times.");
  durations.Add({{"route", "completions"}}, std::vector<double>{1, 2}).Observe(1.5);
  durations.Add({{"route", "chat"}}, std::vector<double>{1, 2}).Observe(0.5);
  const PulseTotals t = read_registry_totals(reg);
  EXPECT_EQ(t.requests, 8u);
  const LabelledCounts by_status = {{"2xx", 5}, {"4xx", 3}};
  EXPECT_EQ(t.requests_by_status, by_status);
  EXPECT_EQ(t.errors_by_reason, (LabelledCounts{{"unknown_model", 3}}));
  EXPECT_EQ(t.request_seconds.counts, (std::vector<uint64_t>{1, 2, 2}));
}

}  // namespace
}  // namespace kvgate::app
