// BlockBound: keeps one holder's index within the blocks its engine can hold.
//
// An engine's KV pool holds a known number of blocks (per rank, from its /server_info), and an
// honest stream never has the index hold more: every eviction is published before the store that
// reuses the block. A stream that stores and never removes (a publisher bug, a misconfigured
// engine, or anyone who reaches the event port) would grow the holder without end: 12.8 million
// blocks for a pool of 26,000 were seen, half a gigabyte the gateway never gave back. So each
// holder has a limit, the pool times a margin (a batch in flight), or a default when the pool is
// unknown, and the index never holds more for it. A holder whose engine also stores blocks off the
// device (a host or disk tier, whose size engines do not report) gets the default if that is more.
//
// Past the limit the oldest stored blocks go first. Why this and not the other choices:
//   * Clearing the holder and marking it degraded (a resync) throws away its newest blocks, the
//     ones the engine most likely still holds, and a stream without removals would fill and empty
//     the holder again and again: routing on it would swing between everything and nothing.
//   * Evicting the unconfirmed blocks first (those the engine-hash check could not reproduce)
//     leans on a check that is often off or not settled yet, and a flood with valid hashes has
//     none: it would still need an order among the rest.
//   * An engine evicts its least recently used blocks, and a block stored long ago is the best
//     guess at one it no longer holds: the index keeps the newest blocks, which a request that
//     continues a recent conversation meets. A block stored long ago and still used (a shared
//     system prompt) may go; the engine's next store of it brings it back.
// When the remembered stores cannot name enough blocks (every held block is older than all of
// them), the holder is cleared: the index then holds a subset of the engine's cache, which is
// never wrong, only less useful.
//
// What it remembers: the engine hashes of the holder's stores in order, at most twice the most
// blocks the holder held and not more than the limit unless one batch stored more (8 bytes each),
// so a holder that churns a small cache keeps a small memory. Evicting removes a block on every
// tier the holder ever stored on.
//
// Threading: one thread at a time (the holder's lane).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kvgate/index/indexer.h"

namespace kvgate::events {

// The limit for a holder whose engine says its pool holds `pool_blocks` (0: unknown).
uint64_t holder_block_limit(uint64_t pool_blocks, double margin, uint64_t default_blocks);

class BlockBound {
 public:
  explicit BlockBound(uint64_t limit);

  uint64_t limit() const { return limit_; }
  // Raises the limit to `limit` if that is more (never lowers it).
  void raise_limit(uint64_t limit) { limit_ = std::max(limit_, limit); }

  // Before a batch storing `incoming` block copies applies to a holder that holds `held`:
  // removals of the oldest remembered stores, as many as would leave room for the batch within
  // the limit (some may name blocks already removed, which the index counts and ignores; call
  // again while over). Empty when there is room, or when nothing is left to name (the caller
  // then clears the holder). The events stay valid until the next call.
  std::span<const index::Event> make_room(uint64_t held, uint64_t incoming);

  // After a batch applied: its stores, oldest first out. `held` is the holder's count after it.
  void remember(std::span<const index::Event> events, uint64_t held);

  // The holder was cleared: nothing it stored before is held.
  void forget_all();

  size_t remembered() const { return size_; }

 private:
  void push(EngineHash h);
  void grow(size_t capacity);

  uint64_t limit_;
  uint64_t peak_held_ = 0;
  uint64_t wanted_ = 0;           // the ring's capacity to grow to
  std::vector<EngineHash> ring_;  // size_ stores from head_, wrapping
  size_t head_ = 0;
  size_t size_ = 0;
  uint8_t tiers_ = 0;  // tier_bit() of every tier the holder stored on
  std::vector<EngineHash> evicting_;
  std::vector<index::Event> removals_;
};

}  // namespace kvgate::events
