#include "kvgate/metrics/lazy_series.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kvgate::metrics {
namespace {

// The series of the registry's one family, as a scrape sees them.
std::vector<prometheus::ClientMetric> series_of(const Registry& reg) {
  for (const prometheus::MetricFamily& f : reg.Collect()) return f.metric;
  return {};
}

TEST(LazyCounter, ASeriesExistsFromTheFirstIncrementUntilRemoved) {
  Registry reg;
  LazyCounter c(counter_family(reg, "kvgate_test_total", "Test."), {{"reason", "gap"}});
  EXPECT_TRUE(series_of(reg).empty());
  c.add(0);
  EXPECT_TRUE(series_of(reg).empty()) << "nothing counted, no series";
  c.add(3);
  c.add(2);
  ASSERT_EQ(series_of(reg).size(), 1u);
  EXPECT_EQ(series_of(reg)[0].counter.value, 5);
  EXPECT_EQ(series_of(reg)[0].label.at(0).value, "gap");
  c.remove();
  EXPECT_TRUE(series_of(reg).empty());
}

// Writers on many threads, all starting at once at zero: one series, every increment in it.
TEST(LazyCounter, FirstIncrementsOnManyThreadsMakeOneSeries) {
  constexpr int kThreads = 8, kAdds = 2000;
  for (int round = 0; round < 20; ++round) {
    Registry reg;
    LazyCounter c(counter_family(reg, "kvgate_test_total", "Test."), {{"reason", "gap"}});
    std::atomic<int> ready{0};
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) std::this_thread::yield();
        for (int i = 0; i < kAdds; ++i) c.add(1);
      });
    }
    for (std::thread& t : writers) t.join();
    const auto series = series_of(reg);
    ASSERT_EQ(series.size(), 1u);
    EXPECT_EQ(series[0].counter.value, double{kThreads} * kAdds);
  }
}

TEST(PresenceGauge, ASeriesExistsOnlyWhileSet) {
  Registry reg;
  PresenceGauge g(gauge_family(reg, "kvgate_test_degraded", "Test."), {{"holder", "w0"}});
  g.set(false);
  EXPECT_TRUE(series_of(reg).empty());
  g.set(true);
  g.set(true);
  ASSERT_EQ(series_of(reg).size(), 1u);
  EXPECT_EQ(series_of(reg)[0].gauge.value, 1);
  g.set(false);
  EXPECT_TRUE(series_of(reg).empty());
}

}  // namespace
}  // namespace kvgate::metrics
