#include "kvgate/metrics/metrics.h"

#include <gtest/gtest.h>

namespace kvgate::metrics {
namespace {

TEST(Metrics, TextExpositionCarriesHelpTypeAndLabels) {
  Registry reg;
  auto& fam = counter_family(reg, "kvgate_test_events_total", "Events seen, by reason.");
  auto& bad = fam.Add({{"reason", "truncated"}});
  bad.Increment(3);
  auto& h =
      histogram_family(reg, "kvgate_test_seconds", "Latency.").Add({}, latency_buckets_seconds());
  h.Observe(0.002);
  const std::string text = text_exposition(reg);
  EXPECT_NE(text.find("# HELP kvgate_test_events_total Events seen, by reason."),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE kvgate_test_events_total counter"), std::string::npos);
  EXPECT_NE(text.find("kvgate_test_events_total{reason=\"truncated\"} 3"), std::string::npos);
  EXPECT_NE(text.find("kvgate_test_seconds_count 1"), std::string::npos);
}

TEST(Metrics, BucketsAreIncreasing) {
  for (const auto* b : {&latency_buckets_seconds(), &fast_op_buckets_seconds()}) {
    for (size_t i = 1; i < b->size(); ++i) EXPECT_LT((*b)[i - 1], (*b)[i]);
  }
}

}  // namespace
}  // namespace kvgate::metrics
