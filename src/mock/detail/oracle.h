// FleetOracle: what the whole fleet's caches hold, for scoring routing.
//
// Every rank's KV changes are applied here as they happen (on the rank's worker thread, the moment
// the engine makes them, with no event transport between), into one exact index over all ranks of
// all workers. At a request's arrival, best_prefix_tokens() answers: the longest prefix of its
// prompt that any rank of the fleet holds, capped as an engine caps its own hits (at least one
// token is computed). Each request record carries it as `oracle_tokens`; hit/oracle is then
// cached_tokens over oracle_tokens, fleet-wide.
//
// Threading: apply() and clear() for a holder from that holder's worker thread;
// best_prefix_tokens() from any thread (the chain index's lookups run concurrently with writes).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/events/wire.h"
#include "kvgate/index/indexer.h"

namespace kvgate::mock::detail {

class FleetOracle {
 public:
  FleetOracle(uint32_t block_size, uint64_t router_hash_seed);

  void apply(uint32_t holder, const std::vector<events::WireEvent>& events);
  // The holder's cache vanished without an event (an engine restarted empty).
  void clear(uint32_t holder);
  uint32_t best_prefix_tokens(std::span<const TokenId> prompt) const;

 private:
  const uint32_t block_size_;
  const BlockHasher hasher_;
  std::unique_ptr<index::Indexer> index_;
};

}  // namespace kvgate::mock::detail
