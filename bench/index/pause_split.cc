// Lookup latency split by machine pauses: the index's own tail apart from the machine's. See
// replay.h.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "replay.h"

namespace kvgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace

PauseSplit run_pause_split(const corpus::Corpus& c, index::Indexer& index,
                           const ReplaySetup& setup) {
  PauseSplit r;
  if (std::thread::hardware_concurrency() < 2) return r;  // no core for the sentinel
  if (setup.announce_capacity) announce_capacity(c, index);
  ChainFeed feed(setup.chains);
  // Gaps of at least kPauseNs in the sentinel's clock loop, as [last read before, first after].
  constexpr int64_t kPauseNs = 1000;
  std::vector<std::pair<int64_t, int64_t>> pauses;
  pauses.reserve(size_t{1} << 20);  // a million: 18,000 a second fill it in a minute
  std::atomic<bool> started{false}, stop{false};
  std::thread sentinel([&] {
    int64_t prev = now_ns();
    started.store(true, std::memory_order_release);
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t now = now_ns();
      if (now - prev >= kPauseNs && pauses.size() < pauses.capacity())
        pauses.emplace_back(prev, now);
      prev = now;
    }
  });
  while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
  // Each lookup's start and duration, in the order they ran (so in time order).
  std::vector<int64_t> start_ns;
  std::vector<uint32_t> lookup_ns;
  start_ns.reserve(c.lookup_count());
  lookup_ns.reserve(c.lookup_count());
  std::vector<index::HolderMatch> out;
  out.reserve(1024);
  const int64_t t_begin = now_ns();
  for (const corpus::Corpus::Op& op : c.ops()) {
    if (op.kind == corpus::Corpus::Op::Kind::kLookup) {
      const auto chain = feed(c.lookup(op.index));
      const int64_t t0 = now_ns();
      index.lookup(chain, out);
      const int64_t t1 = now_ns();
      start_ns.push_back(t0);
      lookup_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(t1 - t0, UINT32_MAX)));
    } else {
      const auto& b = c.batches()[op.index];
      index.apply(b.holder, c.events(b));
    }
  }
  const int64_t t_end = now_ns();
  stop.store(true, std::memory_order_relaxed);
  sentinel.join();
  // Both in time order: a lookup is overlapped when a pause interval intersects its own.
  std::vector<uint32_t> clean;
  clean.reserve(lookup_ns.size());
  size_t j = 0;
  for (size_t i = 0; i < lookup_ns.size(); ++i) {
    const int64_t s = start_ns[i], e = s + lookup_ns[i];
    while (j < pauses.size() && pauses[j].second < s) ++j;
    if (j < pauses.size() && pauses[j].first < e) {
      ++r.overlapped;
    } else {
      clean.push_back(lookup_ns[i]);
    }
  }
  r.measured = true;
  r.pauses_per_second = pauses.size() / ((t_end - t_begin) * 1e-9);
  r.overlapped_fraction = lookup_ns.empty() ? 0 : double(r.overlapped) / lookup_ns.size();
  r.all = percentiles(lookup_ns);  // reorders lookup_ns: last use
  if (!clean.empty()) r.clean = percentiles(clean);
  return r;
}

}  // namespace kvgate::bench
