// Request-path counters and histograms that threads update without sharing a cache line, folded
// into their Prometheus series when /metrics is scraped.
//
// prometheus-cpp's series are shared by every thread: a Counter is one atomic double updated by a
// compare-and-swap loop, and a Histogram takes a mutex and then updates two such counters. On a
// gateway serving from several threads every request moved those cache lines between cores (five
// counters and three histograms per proxied request: seventeen shared writes). Here each thread
// writes its own shard (a cache-line aligned slot picked once per thread), and publish() sums the
// shards and advances the series by what they gained since the last publish, so the exposition is
// Prometheus's own.
//
// A series fed by a sharded metric must not be updated directly as well: publish() adds only the
// shards' gains, and a direct update would simply be added on top (it is not lost, but the two
// would then count the same thing twice if both were used for it).
//
// Threading: add()/observe() from any thread, lock-free (an uncontended atomic add on the
// caller's shard). publish() from any thread; concurrent publishes are serialized. A value is
// visible in the series after the first publish() that follows it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kvgate/metrics/metrics.h"

namespace kvgate::metrics {

// How many shards every sharded metric has: the CPUs' count rounded up to a power of two, 16 to
// 256, fixed for the process.
size_t shard_count();
// The shard the calling thread writes. A thread takes the lowest free one at its first update and
// gives it back when it exits, so up to shard_count() live threads never share one; more share
// shards, which stays correct (the updates are atomic) and merely shares their cache lines again.
size_t this_thread_shard();

class ShardedCounter {
 public:
  // `series` must outlive this object.
  explicit ShardedCounter(Counter& series);
  ShardedCounter(const ShardedCounter&) = delete;
  ShardedCounter& operator=(const ShardedCounter&) = delete;

  void add(uint64_t n = 1) {
    shards_[this_thread_shard()].n.fetch_add(n, std::memory_order_relaxed);
  }
  // The sum of every update so far.
  uint64_t total() const;
  // Advances the series by what the shards gained since the last publish.
  void publish();

 private:
  struct alignas(64) Shard {
    std::atomic<uint64_t> n{0};
  };
  std::unique_ptr<Shard[]> shards_;  // shard_count() of them
  Counter& series_;
  // std::mutex, not the annotated kvgate::Mutex: metrics depends on no other kvgate module.
  std::mutex publish_mu_;
  uint64_t published_ = 0;  // guarded by publish_mu_
};

class ShardedHistogram {
 public:
  // `series` must have been made with `bounds` (std::invalid_argument otherwise) and must
  // outlive this object.
  ShardedHistogram(Histogram& series, const Histogram::BucketBoundaries& bounds);
  ShardedHistogram(const ShardedHistogram&) = delete;
  ShardedHistogram& operator=(const ShardedHistogram&) = delete;

  // Counts `value` in the first bucket whose upper bound is >= value (+Inf past the last, and for
  // NaN), as Histogram::Observe does.
  void observe(double value);
  // Every observation so far: per bucket (the last is +Inf, not cumulative) and the values' sum.
  std::vector<uint64_t> bucket_counts() const;
  double sum() const;
  // Adds to the series the observations made since the last publish.
  void publish();

 private:
  struct alignas(64) Line {
    std::atomic<uint64_t> slot[8];
  };
  // Slot i of shard s. A shard's slots: one count per bucket (the last +Inf), then the bits of the
  // sum of its values (a double).
  std::atomic<uint64_t>& slot(size_t s, size_t i) const {
    return lines_[s * lines_per_shard_ + i / 8].slot[i % 8];
  }
  size_t sum_slot() const { return bounds_.size() + 1; }

  Histogram& series_;
  const std::vector<double> bounds_;
  const size_t lines_per_shard_;
  std::unique_ptr<Line[]> lines_;
  // std::mutex, not the annotated kvgate::Mutex: metrics depends on no other kvgate module.
  std::mutex publish_mu_;
  std::vector<uint64_t> published_counts_;  // guarded by publish_mu_
  double published_sum_ = 0;                // guarded by publish_mu_
};

}  // namespace kvgate::metrics
