#include "kvgate/corpus/kv_pool.h"

#include <algorithm>

namespace kvgate::corpus {

KvPool::KvPool(uint32_t capacity) : capacity_(capacity) {
  slots_.resize(capacity);
  free_.reserve(capacity);
  for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
  where_.reserve(capacity);
}

void KvPool::unlink(uint32_t s) {
  Slot& x = slots_[s];
  (x.prev == kNil ? head_ : slots_[x.prev].next) = x.next;
  (x.next == kNil ? tail_ : slots_[x.next].prev) = x.prev;
}

void KvPool::push_front(uint32_t s) {
  Slot& x = slots_[s];
  x.prev = kNil;
  x.next = head_;
  (head_ == kNil ? tail_ : slots_[head_].prev) = s;
  head_ = s;
}

KvPool::Outcome KvPool::serve(std::span<const PoolBlock> chain,
                              std::vector<index::EngineHash>& evicted) {
  Outcome o;
  matched_.clear();
  for (const PoolBlock& b : chain) {
    auto it = where_.find(b.seq);
    if (it == where_.end()) break;
    matched_.push_back(it->second);
  }
  o.matched = static_cast<uint32_t>(matched_.size());
  // Pin the matched prefix at the recent end so eviction cannot take it.
  for (size_t i = matched_.size(); i > 0; --i) {
    unlink(matched_[i - 1]);
    push_front(matched_[i - 1]);
  }
  const uint32_t want = static_cast<uint32_t>(chain.size()) - o.matched;
  o.stored = std::min(want, capacity_ - o.matched);
  while (size_ + o.stored > capacity_) {
    const uint32_t victim = tail_;
    unlink(victim);
    evicted.push_back(slots_[victim].block.engine);
    where_.erase(slots_[victim].block.seq);
    free_.push_back(victim);
    --size_;
  }
  // New blocks tail first, then the matched prefix again, so the chain reads head-most-recent.
  for (uint32_t i = o.matched + o.stored; i > o.matched; --i) {
    const uint32_t s = free_.back();
    free_.pop_back();
    slots_[s].block = chain[i - 1];
    where_.emplace(chain[i - 1].seq, s);
    push_front(s);
    ++size_;
  }
  for (size_t i = matched_.size(); i > 0; --i) {
    unlink(matched_[i - 1]);
    push_front(matched_[i - 1]);
  }
  return o;
}

std::vector<SeqHash> KvPool::recency_order() const {
  std::vector<SeqHash> out;
  for (uint32_t s = head_; s != kNil; s = slots_[s].next) out.push_back(slots_[s].block.seq);
  return out;
}

}  // namespace kvgate::corpus
