#include "mock/detail/block_pool.h"

#include <algorithm>
#include <cassert>

namespace kvgate::mock::detail {

BlockPool::BlockPool(uint32_t num_blocks) : blocks_(num_blocks) {
  for (uint32_t b = 0; b < num_blocks; ++b) push_back(b);
}

int32_t BlockPool::lookup(events::EngineHash hash) const {
  auto it = cache_.find(hash);
  return it == cache_.end() ? kNone : static_cast<int32_t>(it->second.front());
}

void BlockPool::touch(uint32_t block) {
  if (blocks_[block].in_free) unlink(block);
  ++blocks_[block].refs;
}

uint32_t BlockPool::allocate(std::optional<events::EngineHash>* evicted) {
  assert(head_ != kNone);
  uint32_t b = static_cast<uint32_t>(head_);
  unlink(b);
  evicted->reset();
  if (blocks_[b].cached) {
    *evicted = blocks_[b].meta.hash;
    uncache(b);
  }
  blocks_[b].refs = 1;
  return b;
}

void BlockPool::release(uint32_t block) {
  Block& b = blocks_[block];
  assert(b.refs > 0);
  if (--b.refs == 0) push_back(block);
}

void BlockPool::cache(uint32_t block, const BlockMeta& meta) {
  Block& b = blocks_[block];
  assert(!b.cached);
  b.cached = true;
  b.meta = meta;
  cache_[meta.hash].push_back(block);
  ++num_cached_;
}

uint32_t BlockPool::uncache_all() {
  uint32_t n = num_cached_;
  for (Block& b : blocks_) {
    assert(b.refs == 0);
    b.cached = false;
  }
  cache_.clear();
  num_cached_ = 0;
  return n;
}

void BlockPool::uncache(uint32_t b) {
  auto it = cache_.find(blocks_[b].meta.hash);
  assert(it != cache_.end());
  auto& copies = it->second;
  copies.erase(std::find(copies.begin(), copies.end(), b));
  if (copies.empty()) cache_.erase(it);
  blocks_[b].cached = false;
  --num_cached_;
}

void BlockPool::unlink(uint32_t b) {
  Block& blk = blocks_[b];
  assert(blk.in_free);
  if (blk.prev != kNone) {
    blocks_[blk.prev].next = blk.next;
  } else {
    head_ = blk.next;
  }
  if (blk.next != kNone) {
    blocks_[blk.next].prev = blk.prev;
  } else {
    tail_ = blk.prev;
  }
  blk.prev = blk.next = kNone;
  blk.in_free = false;
  --num_free_;
}

void BlockPool::push_back(uint32_t b) {
  Block& blk = blocks_[b];
  assert(!blk.in_free);
  blk.prev = tail_;
  blk.next = kNone;
  if (tail_ != kNone) {
    blocks_[tail_].next = static_cast<int32_t>(b);
  } else {
    head_ = static_cast<int32_t>(b);
  }
  tail_ = static_cast<int32_t>(b);
  blk.in_free = true;
  ++num_free_;
}

}  // namespace kvgate::mock::detail
