#include "policy/detail/pending_blocks.h"

#include <algorithm>

namespace kvgate::policy::detail {
namespace {
int64_t pending_ns(MonoTime t) { return t.time_since_epoch().count(); }

// A slot's chain keeps its capacity for the next ticket, unless it grew past this (one long
// prompt should not pin its memory in every slot it ever passed through).
constexpr size_t kKeptChainCapacity = 1024;
}  // namespace

PendingBlocks::PendingBlocks(const Options& options, const Clock& clock)
    : options_(options),
      clock_(clock),
      ring_size_(std::max<uint32_t>(1, options_.max_requests)),
      ring_mask_((ring_size_ & (ring_size_ - 1)) == 0 ? ring_size_ - 1 : 0) {
  MutexLock lock(&mu_);
  slots_.resize(ring_size_);
}

uint64_t PendingBlocks::add(WorkerId worker, HolderId holder, std::span<const SeqHash> chain) {
  if (chain.empty() || options_.capacity_blocks == 0) return 0;
  chain = chain.first(std::min(chain.size(), options_.capacity_blocks));
  const int64_t now = pending_ns(clock_.now());
  MutexLock lock(&mu_);
  make_room_locked(now, chain.size());
  const uint64_t ticket = next_ticket_++;
  Slot& s = slot_of(ticket);
  if (s.live) {  // the ring came round to a credit still live: the oldest goes
    end_locked(s);
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
  s.ticket = ticket;
  s.live = true;
  s.worker = worker;
  s.holder = holder;
  s.expires_ns = now + options_.max_age.count();
  s.chain.assign(chain.begin(), chain.end());
  for (SeqHash h : chain) blocks_[h].push_back(ticket);
  live_blocks_ += chain.size();
  live_.fetch_add(1, std::memory_order_relaxed);
  credited_.fetch_add(1, std::memory_order_relaxed);
  return ticket;
}

void PendingBlocks::prefilled(uint64_t ticket) {
  if (ticket == 0) return;
  const int64_t until = pending_ns(clock_.now()) + options_.grace.count();
  MutexLock lock(&mu_);
  Slot& s = slot_of(ticket);
  if (s.ticket == ticket && s.live) s.expires_ns = std::min(s.expires_ns, until);
}

void PendingBlocks::withdraw(uint64_t ticket) {
  if (ticket == 0) return;
  MutexLock lock(&mu_);
  Slot& s = slot_of(ticket);
  if (s.ticket != ticket || !s.live) return;
  end_locked(s);
  withdrawn_.fetch_add(1, std::memory_order_relaxed);
}

void PendingBlocks::forget(WorkerId worker) {
  MutexLock lock(&mu_);
  for (Slot& s : slots_) {
    if (s.live && s.worker == worker) end_locked(s);
  }
}

void PendingBlocks::end_locked(Slot& s) {
  for (SeqHash h : s.chain) {
    auto it = blocks_.find(h);
    if (it == blocks_.end()) continue;
    Tickets& t = it->second;
    t.erase(std::remove(t.begin(), t.end(), s.ticket), t.end());
    if (t.empty()) blocks_.erase(it);
  }
  live_blocks_ -= s.chain.size();
  live_.fetch_sub(1, std::memory_order_relaxed);
  s.live = false;
  if (s.chain.capacity() > kKeptChainCapacity) {
    std::vector<SeqHash>().swap(s.chain);
  } else {
    s.chain.clear();
  }
}

void PendingBlocks::make_room_locked(int64_t now, size_t blocks) {
  for (; oldest_ < next_ticket_; ++oldest_) {
    Slot& s = slot_of(oldest_);
    if (s.ticket != oldest_ || !s.live) continue;  // ended already
    if (s.expires_ns <= now) {
      end_locked(s);
    } else if (live_blocks_ + blocks > options_.capacity_blocks) {
      end_locked(s);
      evicted_.fetch_add(1, std::memory_order_relaxed);
    } else {
      break;
    }
  }
}

const PendingBlocks::Slot* PendingBlocks::live_slot(uint64_t ticket, int64_t now) const {
  const Slot& s = slot_of(ticket);
  return s.ticket == ticket && s.live && s.expires_ns > now ? &s : nullptr;
}

bool PendingBlocks::covered(SeqHash block, int64_t now, Seen& seen, bool collect) const {
  auto it = blocks_.find(block);
  if (it == blocks_.end()) return false;
  bool any = false;
  for (uint64_t ticket : it->second) {
    const Slot* s = live_slot(ticket, now);
    if (s == nullptr || seen.contains(s->holder)) continue;
    any = true;
    if (!collect) break;
    seen.insert(s->holder);
  }
  return any;
}

int64_t PendingBlocks::deepest_unseen(std::span<const SeqHash> chain, int64_t end, int64_t now,
                                      Seen& seen) const {
  // Whether a live credit of an unseen holder covers a position is true on a prefix of them.
  int64_t lo = 0;
  int64_t hi = end;  // the first uncovered position is in [lo, hi]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (covered(chain[static_cast<size_t>(mid)], now, seen, /*collect=*/false)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return -1;
  covered(chain[static_cast<size_t>(lo - 1)], now, seen, /*collect=*/true);
  return lo - 1;
}

void PendingBlocks::lookup(std::span<const SeqHash> chain,
                           std::vector<index::HolderMatch>& out) const {
  if (chain.empty() || empty()) return;
  const int64_t now = pending_ns(clock_.now());
  ReaderMutexLock lock(&mu_);
  thread_local Seen seen;  // (its capacity kept: no allocation per lookup)
  seen.clear();
  // Each round finds the holders whose credits reach deepest among those not found yet.
  uint32_t levels = 0;
  for (int64_t end = static_cast<int64_t>(chain.size()); end > 0 && levels < options_.depth_levels;
       ++levels) {
    const size_t before = seen.order.size();
    const int64_t deepest = deepest_unseen(chain, end, now, seen);
    if (deepest < 0) break;
    for (size_t i = before; i < seen.order.size(); ++i) {
      out.push_back({.holder = seen.order[i],
                     .device_depth = 0,
                     .any_depth = static_cast<uint32_t>(deepest + 1)});
    }
    end = deepest;
  }
}

PendingBlocks::Stats PendingBlocks::stats() const {
  Stats s{.credited = credited_.load(std::memory_order_relaxed),
          .withdrawn = withdrawn_.load(std::memory_order_relaxed),
          .evicted = evicted_.load(std::memory_order_relaxed),
          .live_requests = live_.load(std::memory_order_relaxed)};
  ReaderMutexLock lock(&mu_);
  s.live_blocks = live_blocks_;
  return s;
}

}  // namespace kvgate::policy::detail
