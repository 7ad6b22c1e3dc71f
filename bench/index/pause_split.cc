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

PauseSplit run_pause_split(const corpus::Corpus& c, index::Indexer& index, bool announce) {
  PauseSplit r;
  if (std::thread::hardware_concurrency() < 2) return r;  // no core for the sentinel
  if (announce) announce_capacity(c, index);
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
  std::vector<int64_t> start_ns(c.lookup_count());
  std::vector<uint32_t> lookup_ns(c.lookup_count());
  std::vector<index::HolderMatch> out;
  out.reserve(1024);
  const int64_t t_begin = now_ns();
  for (const corpus::Corpus::Op& op : c.ops()) {
    if (op.kind == corpus::Corpus::Op::Kind::kLookup) {
      const int64_t t0 = now_ns();
      index.lookup(c.lookup(op.index), out);
      const int64_t t1 = now_ns();
      start_ns[op.index] = t0;
      lookup_ns[op.index] = static_cast<uint32_t>(std::min<int64_t>(t1 - t0, UINT32_MAX));
    } else {
      const auto& b = c.batches()[op.index];
      index.apply(b.holder, c.events(b));
    }
  }
  const int64_t t_end = now_ns();
  stop.store(true, std::memory_order_relaxed);
  sentinel.join();
  // Lookups in start order against the pauses (in time order): overlapped when a pause interval
  // intersects the lookup's.
  std::vector<uint32_t> order(start_ns.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return start_ns[a] < start_ns[b]; });
  std::vector<uint32_t> clean, all(lookup_ns);
  clean.reserve(lookup_ns.size());
  size_t j = 0;
  for (uint32_t i : order) {
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
  r.all = percentiles(all);
  if (!clean.empty()) r.clean = percentiles(clean);
  return r;
}

}  // namespace kvgate::bench
