#include "kvgate/metrics/sharded.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace kvgate::metrics {
namespace {

// The first series of the registry's histogram family, as a scrape sees it.
prometheus::ClientMetric::Histogram histogram_of(const Registry& reg) {
  for (const prometheus::MetricFamily& f : reg.Collect()) {
    if (f.type == prometheus::MetricType::Histogram) return f.metric.at(0).histogram;
  }
  ADD_FAILURE() << "no histogram family";
  return {};
}

TEST(ShardedCounter, PublishAdvancesTheSeriesByTheGainOnly) {
  Registry reg;
  Counter& series = counter_family(reg, "kvgate_test_total", "Test.").Add({});
  ShardedCounter c(series);
  c.add();
  c.add(4);
  EXPECT_EQ(c.total(), 5u);
  EXPECT_EQ(series.Value(), 0);  // not published yet
  c.publish();
  EXPECT_EQ(series.Value(), 5);
  c.publish();
  EXPECT_EQ(series.Value(), 5);
  c.add(2);
  c.publish();
  EXPECT_EQ(series.Value(), 7);
}

TEST(ShardedHistogram, BucketsAndSumMatchPrometheusOwnHistogram) {
  const Histogram::BucketBoundaries bounds = {0.001, 0.01, 0.1, 1.0};
  Registry sharded_reg;
  Registry reference_reg;
  Histogram& series = histogram_family(sharded_reg, "kvgate_test_seconds", "T.").Add({}, bounds);
  Histogram& reference =
      histogram_family(reference_reg, "kvgate_test_seconds", "T.").Add({}, bounds);
  ShardedHistogram h(series, bounds);
  // Values on a bound belong to that bucket (le), past the last bound to +Inf.
  const std::vector<double> values = {0.0, 0.001, 0.0010001, 0.01, 0.05, 0.1, 1.0, 2.0, 30.0};
  for (size_t round = 0; round < 2; ++round) {
    for (double v : values) {
      h.observe(v);
      reference.Observe(v);
    }
    h.publish();
    const auto got = histogram_of(sharded_reg);
    const auto want = histogram_of(reference_reg);
    EXPECT_EQ(got.sample_count, want.sample_count);
    EXPECT_DOUBLE_EQ(got.sample_sum, want.sample_sum);
    ASSERT_EQ(got.bucket.size(), want.bucket.size());
    for (size_t b = 0; b < got.bucket.size(); ++b) {
      EXPECT_EQ(got.bucket[b].cumulative_count, want.bucket[b].cumulative_count) << "bucket " << b;
    }
  }
  const std::vector<uint64_t> counts = h.bucket_counts();
  EXPECT_EQ(counts, (std::vector<uint64_t>{4, 4, 4, 2, 4}));
}

TEST(ShardedMetrics, LiveThreadsHoldDistinctShardsAndGiveThemBackOnExit) {
  constexpr size_t kThreads = 8;  // fewer than the 16 shards there are at least
  std::vector<size_t> shards(kThreads);
  std::atomic<size_t> arrived{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      shards[t] = this_thread_shard();
      ++arrived;
      while (arrived.load() < kThreads) std::this_thread::yield();  // all alive at once
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(std::set<size_t>(shards.begin(), shards.end()).size(), kThreads);
  size_t first = 0;
  size_t second = 0;
  std::thread([&] { first = this_thread_shard(); }).join();
  std::thread([&] { second = this_thread_shard(); }).join();
  EXPECT_EQ(first, second) << "an exited thread's shard is taken again";
  EXPECT_LT(first, shard_count());
}

// Writers on more threads than shards, a publisher racing them, and nothing lost at the end.
TEST(ShardedMetrics, ConcurrentUpdatesAndPublishesLoseNothing) {
  Registry reg;
  Counter& counter_series = counter_family(reg, "kvgate_test_total", "Test.").Add({});
  const Histogram::BucketBoundaries bounds = {1.0, 2.0};
  Histogram& histogram_series = histogram_family(reg, "kvgate_test_seconds", "T.").Add({}, bounds);
  ShardedCounter counter(counter_series);
  ShardedHistogram histogram(histogram_series, bounds);
  const int kWriters = static_cast<int>(shard_count()) + 3;
  constexpr int kEach = 20000;
  std::atomic<bool> done{false};
  std::thread publisher([&] {
    while (!done.load()) {
      counter.publish();
      histogram.publish();
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        counter.add();
        histogram.observe(static_cast<double>((t + i) % 3));  // 0, 1 or 2: integers sum exactly
      }
    });
  }
  for (std::thread& w : writers) w.join();
  done = true;
  publisher.join();
  counter.publish();
  histogram.publish();
  EXPECT_EQ(counter_series.Value(), static_cast<double>(kWriters) * kEach);
  const auto h = histogram_of(reg);
  EXPECT_EQ(h.sample_count, static_cast<uint64_t>(kWriters) * kEach);
  uint64_t twos = 0;
  double want_sum = 0;
  for (int t = 0; t < kWriters; ++t) {
    for (int i = 0; i < kEach; ++i) {
      want_sum += (t + i) % 3;
      twos += (t + i) % 3 == 2 ? 1 : 0;
    }
  }
  EXPECT_EQ(h.sample_sum, want_sum);
  EXPECT_EQ(h.bucket.back().cumulative_count, static_cast<uint64_t>(kWriters) * kEach);
  EXPECT_EQ(h.bucket[1].cumulative_count - h.bucket[0].cumulative_count, twos);
}

}  // namespace
}  // namespace kvgate::metrics
