#include "kvgate/metrics/sharded.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace kvgate::metrics {

namespace {

struct ShardLease {
  size_t shard = 0;
  bool held = false;  // false: a shard shared with a thread that holds it
  ShardLease();
  ~ShardLease();
};

// The shards live threads hold; a thread that finds none free shares one, in turn.
class ShardLeases {
 public:
  void take(ShardLease& lease) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < held_.size(); ++i) {
      if (!held_[i]) {
        held_[i] = true;
        lease.shard = i;
        lease.held = true;
        return;
      }
    }
    lease.shard = overflow_++ % held_.size();
  }
  void give_back(const ShardLease& lease) {
    if (!lease.held) return;
    std::lock_guard<std::mutex> lock(mu_);
    held_[lease.shard] = false;
  }

 private:
  // std::mutex, not the annotated kvgate::Mutex: metrics depends on no other kvgate module.
  std::mutex mu_;
  std::vector<bool> held_ = std::vector<bool>(shard_count(), false);  // guarded by mu_
  size_t overflow_ = 0;                                               // guarded by mu_
};

ShardLeases& leases() {
  static ShardLeases* l = new ShardLeases;  // never destroyed: threads may exit after main
  return *l;
}

ShardLease::ShardLease() { leases().take(*this); }
ShardLease::~ShardLease() { leases().give_back(*this); }

}  // namespace

size_t shard_count() {
  static const size_t n = [] {
    const size_t cpus = std::max<size_t>(1, std::thread::hardware_concurrency());
    return std::clamp<size_t>(std::bit_ceil(cpus), 16, 256);
  }();
  return n;
}

size_t this_thread_shard() {
  thread_local const ShardLease lease;
  return lease.shard;
}

ShardedCounter::ShardedCounter(Counter& series)
    : shards_(new Shard[shard_count()]), series_(series) {}

uint64_t ShardedCounter::total() const {
  uint64_t sum = 0;
  for (size_t s = 0; s < shard_count(); ++s) sum += shards_[s].n.load(std::memory_order_relaxed);
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
      lines_(new Line[shard_count() * lines_per_shard_]),  // C++20 atomics start at 0: 0.0's bits
      published_counts_(bounds.size() + 1, 0) {
  if (series.Collect().histogram.bucket.size() != bounds.size() + 1) {
    throw std::invalid_argument("a sharded histogram's bounds differ from its series'");
  }
}

void ShardedHistogram::observe(double value) {
  const size_t s = this_thread_shard();
  const size_t bucket =
      std::isnan(value)
          ? bounds_.size()
          : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                bounds_.begin());
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
  for (size_t s = 0; s < shard_count(); ++s) {
    for (size_t b = 0; b < counts.size(); ++b)
      counts[b] += slot(s, b).load(std::memory_order_relaxed);
  }
  return counts;
}

double ShardedHistogram::sum() const {
  double total = 0;
  for (size_t s = 0; s < shard_count(); ++s) {
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
