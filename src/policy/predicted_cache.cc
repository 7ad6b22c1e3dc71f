#include "policy/detail/predicted_cache.h"

#include <algorithm>

namespace kvgate::policy::detail {
namespace {
int64_t ns(MonoTime t) { return t.time_since_epoch().count(); }
}  // namespace

PredictedCache::PredictedCache(Duration ttl, size_t capacity, const Clock& clock)
    : ttl_ns_(ttl.count()),
      capacity_per_shard_(std::max<size_t>(1, capacity / kShards)),
      clock_(clock) {}

void PredictedCache::drop_locked(Shard& s, SeqHash h, const Placement& p) {
  auto it = s.blocks.find(h);
  if (it == s.blocks.end()) return;
  auto& v = it->second;
  // Only the placement this fifo entry created: a refresh pushed a newer entry with a later expiry.
  auto pit = std::find_if(v.begin(), v.end(), [&](const Placement& q) {
    return q.worker == p.worker && q.expires_ns == p.expires_ns;
  });
  if (pit == v.end()) return;
  v.erase(pit);
  if (v.empty()) s.blocks.erase(it);
}

void PredictedCache::record(WorkerId worker, std::span<const SeqHash> chain) {
  const int64_t now = ns(clock_.now());
  const Placement p{worker.value(), now + ttl_ns_};
  for (SeqHash h : chain) {
    Shard& s = shard(h);
    MutexLock lock(&s.mu);
    auto& v = s.blocks[h];
    auto pit =
        std::find_if(v.begin(), v.end(), [&](const Placement& q) { return q.worker == p.worker; });
    if (pit != v.end()) {
      pit->expires_ns = p.expires_ns;
    } else {
      v.push_back(p);
    }
    s.fifo.emplace_back(h, p);
    while (!s.fifo.empty() &&
           (s.fifo.size() > capacity_per_shard_ || s.fifo.front().second.expires_ns <= now)) {
      drop_locked(s, s.fifo.front().first, s.fifo.front().second);
      s.fifo.pop_front();
    }
  }
}

uint32_t PredictedCache::depth(WorkerId worker, std::span<const SeqHash> chain) const {
  const int64_t now = ns(clock_.now());
  uint32_t d = 0;
  for (SeqHash h : chain) {
    Shard& s = shard(h);
    MutexLock lock(&s.mu);
    auto it = s.blocks.find(h);
    if (it == s.blocks.end()) break;
    const auto& v = it->second;
    const bool held = std::any_of(v.begin(), v.end(), [&](const Placement& q) {
      return q.worker == worker.value() && q.expires_ns > now;
    });
    if (!held) break;
    ++d;
  }
  return d;
}

void PredictedCache::forget(WorkerId worker) {
  for (Shard& s : shards_) {
    MutexLock lock(&s.mu);
    for (auto it = s.blocks.begin(); it != s.blocks.end();) {
      auto& v = it->second;
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&](const Placement& q) { return q.worker == worker.value(); }),
              v.end());
      if (v.empty()) {
        s.blocks.erase(it++);
      } else {
        ++it;
      }
    }
  }
}

size_t PredictedCache::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    MutexLock lock(&s.mu);
    n += s.blocks.size();
  }
  return n;
}

}  // namespace kvgate::policy::detail
