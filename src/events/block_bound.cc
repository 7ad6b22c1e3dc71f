#include "kvgate/events/block_bound.h"

#include <algorithm>
#include <cmath>

namespace kvgate::events {
namespace {

// Stores remembered at least (unless the limit is lower): a holder's first fills need no growth.
constexpr uint64_t kMinRemembered = 4096;

}  // namespace

uint64_t holder_block_limit(uint64_t pool_blocks, double margin, uint64_t default_blocks) {
  // A pool no GPU holds is not believed (index::kMaxCapacityHint): the default applies.
  if (pool_blocks == 0 || pool_blocks > index::kMaxCapacityHint) return default_blocks;
  const double limit = std::ceil(static_cast<double>(pool_blocks) * std::max(1.0, margin));
  return std::max<uint64_t>(1, static_cast<uint64_t>(limit));
}

BlockBound::BlockBound(uint64_t limit) : limit_(std::max<uint64_t>(1, limit)) {}

std::span<const index::Event> BlockBound::make_room(uint64_t held, uint64_t incoming) {
  incoming = std::min(incoming, limit_);
  if (held <= limit_ - incoming) return {};
  const uint64_t need = held - (limit_ - incoming);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(need, size_));
  evicting_.clear();
  for (size_t i = 0; i < n; ++i) {
    evicting_.push_back(ring_[head_]);
    head_ = head_ + 1 == ring_.size() ? 0 : head_ + 1;
  }
  size_ -= n;
  removals_.clear();
  if (n == 0) return {};
  for (size_t t = 0; t < index::kTierCount; ++t) {
    const auto tier = static_cast<index::Tier>(t);
    if (!(tiers_ & index::tier_bit(tier))) continue;
    index::Event e;
    e.kind = index::EventKind::kRemoved;
    e.tier = tier;
    e.engine_hashes = evicting_;
    removals_.push_back(e);
  }
  return removals_;
}

void BlockBound::remember(std::span<const index::Event> events, uint64_t held) {
  peak_held_ = std::max(peak_held_, held);
  // Room for every held block at least: a batch larger than the limit is then trimmed to its
  // newest stores, not cleared for want of names.
  wanted_ = std::max(std::min(limit_, std::max(kMinRemembered, 2 * peak_held_)), held);
  for (const index::Event& e : events) {
    if (e.kind != index::EventKind::kStored) continue;
    tiers_ |= index::tier_bit(e.tier);
    for (EngineHash h : e.engine_hashes) push(h);
  }
}

void BlockBound::forget_all() {
  head_ = 0;
  size_ = 0;
}

void BlockBound::push(EngineHash h) {
  if (size_ == ring_.size()) {
    if (ring_.size() < wanted_) {
      grow(
          static_cast<size_t>(std::min<uint64_t>(wanted_, std::max<size_t>(64, 2 * ring_.size()))));
    } else {  // full: the oldest store is forgotten
      ring_[head_] = h;
      head_ = head_ + 1 == ring_.size() ? 0 : head_ + 1;
      return;
    }
  }
  const size_t at = head_ + size_;
  ring_[at < ring_.size() ? at : at - ring_.size()] = h;
  ++size_;
}

void BlockBound::grow(size_t capacity) {
  std::vector<EngineHash> bigger(capacity);
  for (size_t i = 0; i < size_; ++i) {
    const size_t at = head_ + i;
    bigger[i] = ring_[at < ring_.size() ? at : at - ring_.size()];
  }
  ring_.swap(bigger);
  head_ = 0;
}

}  // namespace kvgate::events
