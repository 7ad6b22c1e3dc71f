#include "kvgate/metrics/sharded.h"

#include <algorithm>
#include <bit>

namespace kvgate::metrics {

size_t this_thread_shard() {
  static std::atomic<size_t> next{0};
  thread_local const size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return shard;
}

uint64_t ShardedCounter::total() const {
  uint64_t sum = 0;
  for (const Shard& s : shards_) sum += s.n.load(std::memory_order_relaxed);
  return sum;
}

void ShardedCounter::publish() {
  std::lock_guard<std::mutex> lock(publish_mu_);
  const uint64_t now = total();
  if (now > published_) series_.Increment(static_cast<double>(now - published_));
  published_ = now;
}

ShardedHistogram::ShardedHistogram(Histogram& series, const Histogram::BucketBoundaries& bounds)
    : series_(series),
      bounds_(bounds),
      lines_per_shard_((bounds.size() + 2 + 7) / 8),
      lines_(new Line[kShards * lines_per_shard_]),
      published_counts_(bounds.size() + 1, 0) {}  // C++20 atomics start at zero: 0.0's bits too

void ShardedHistogram::observe(double value) {
  const size_t s = this_thread_shard();
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  slot(s, bucket).fetch_add(1, std::memory_order_relaxed);
  // A double has no atomic add here that is not a compare-and-swap loop either; on the caller's
  // own shard it succeeds the first time.
  std::atomic<uint64_t>& sum = slot(s, sum_slot());
  uint64_t bits = sum.load(std::memory_order_relaxed);
  while (!sum.compare_exchange_weak(bits,
                                    std::bit_cast<uint64_t>(std::bit_cast<double>(bits) + value),
                                    std::memory_order_relaxed)) {
  }
}

std::vector<uint64_t> ShardedHistogram::bucket_counts() const {
  std::vector<uint64_t> counts(bounds_.size() + 1, 0);
  for (size_t s = 0; s < kShards; ++s) {
    for (size_t b = 0; b < counts.size(); ++b)
      counts[b] += slot(s, b).load(std::memory_order_relaxed);
  }
  return counts;
}

double ShardedHistogram::sum() const {
  double total = 0;
  for (size_t s = 0; s < kShards; ++s) {
    total += std::bit_cast<double>(slot(s, sum_slot()).load(std::memory_order_relaxed));
  }
  return total;
}

void ShardedHistogram::publish() {
  std::lock_guard<std::mutex> lock(publish_mu_);
  const std::vector<uint64_t> counts = bucket_counts();
  const double total = sum();
  std::vector<double> gained(counts.size());
  bool any = false;
  for (size_t b = 0; b < counts.size(); ++b) {
    // Counts only grow; a bucket read before its observation's sum is caught up next time.
    gained[b] = static_cast<double>(counts[b] - published_counts_[b]);
    any = any || counts[b] != published_counts_[b];
  }
  if (!any && total == published_sum_) return;
  series_.ObserveMultiple(gained, total - published_sum_);
  published_counts_ = counts;
  published_sum_ = total;
}

}  // namespace kvgate::metrics
