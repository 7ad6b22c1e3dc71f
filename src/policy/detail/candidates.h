// Shared steps of every policy: which workers may take a request, how loaded they are, and a
// uniform draw among ties.
//
// Every decision visits the whole fleet once (collect_candidates), reading each worker's live
// figures a single time into the dense candidate slots; everything after works on those.
#pragma once

#include <algorithm>
#include <random>
#include <span>

#include "kvgate/policy/policy.h"
#include "kvgate/workers/load.h"

namespace kvgate::policy::detail {

// What cache_aware needs of a candidate beyond its load: the overload rule, resolved once, and
// the weight of a block off the device for each set of tiers a worker offloads to.
struct CostRules {
  explicit CostRules(const CacheAwareConfig& config);
  workers::OverloadRule overload;
  float prior_prefill_rate;  // CacheAwareConfig::prefill_tokens_per_second
  bool measured_prefill_rate;
  static constexpr size_t kTierSets = size_t{1} << index::kTierCount;
  std::array<float, kTierSets> offload_weight{};  // by Worker::offload_tiers()
};

// Points scratch.candidates at the routable workers that serve req.model, leaving out those the
// liveness tracker vetoed unless every one is vetoed; with req.dp_aware, a worker with several
// data-parallel ranks is one candidate per rank. Each has its load (the larger of what the gateway
// fleet has in flight there and what the engine last reported, which also counts other clients'
// requests) and matched_blocks 0; with `cost` (cache_aware), also its overload verdict, queued
// tokens and index blocks. Returns the number of candidates.
size_t collect_candidates(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                          Scratch& scratch, const CostRules* cost = nullptr);

// The candidates of the workers set in `worker_bits` (a bitset over fleet.workers), as
// collect_candidates would give them with `cost` in its pass without vetoed workers, in the same
// order, written to out[k] on (grown as needed). Returns the next free slot. For a decision that
// visits a few workers, not the fleet.
size_t collect_candidates_of(std::span<const uint64_t> worker_bits, const RouteRequest& req,
                             const workers::FleetSnapshot& fleet, const CostRules& cost,
                             std::vector<Candidate>& out, size_t k);

// The KV holder of a worker's data-parallel rank (invalid: the rank publishes no events).
HolderId holder_of_rank(const workers::WorkerInfo& info, uint32_t rank);

// The depth `matches` give a worker's rank (`rank` >= 0), or the whole worker (its deepest
// holder's).
uint32_t depth_in(std::span<const index::HolderMatch> matches, const workers::WorkerInfo& info,
                  int32_t rank);

// The blocks c's match saves computing: its device blocks whole, the rest at its offload weight.
inline double weighted_blocks(const Candidate& c) {
  // (Most matches are on the device alone: no float arithmetic for them.)
  if (c.device_blocks == c.matched_blocks) return static_cast<double>(c.matched_blocks);
  return static_cast<double>(c.device_blocks) +
         static_cast<double>(c.offload_weight) *
             static_cast<double>(c.matched_blocks - c.device_blocks);
}

// The prompt tokens queued ahead of a request on `c`: the reported ones, or the engine's queue at
// an assumed prompt length if more.
inline double queued_tokens(const Candidate& c, const CacheAwareConfig& config) {
  return std::max(static_cast<double>(c.queued_tokens),
                  c.load * config.assumed_queued_prompt_tokens);
}

// Expected wait before this request's first token on `c` (its matched_blocks known), at its
// prefill rate, from the cost model in `config`. Computed where a pick compares it, not for
// every candidate: a pass over the fleet would spend most of its time dividing.
inline double expected_wait_us(const Candidate& c, const RouteRequest& req,
                               const CacheAwareConfig& config) {
  const double queued = queued_tokens(c, config);
  const double cached = weighted_blocks(c) * req.block_size;
  const double uncached = std::max(0.0, static_cast<double>(req.prompt_tokens) - cached);
  return (queued + uncached) / static_cast<double>(c.prefill_rate) * 1e6;
}

// Among candidates accepted by `keep`, the one minimizing `key`, ties (within `window`) drawn
// uniformly (reservoir sampling: one pass, no allocation). Returns an index into `cands` or -1.
template <class Keep, class Key>
int32_t pick_min(std::span<const Candidate> cands, Keep keep, Key key, double window,
                 std::mt19937_64& rng) {
  int32_t best = -1;
  double best_key = 0;
  uint32_t ties = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!keep(cands[i])) continue;
    const double k = key(cands[i]);
    if (best < 0 || k < best_key - window) {
      best = static_cast<int32_t>(i);
      best_key = k;
      ties = 1;
    } else if (k <= best_key + window) {
      // A tie: keep the new one with probability 1/ties (uniform over all tied candidates).
      ++ties;
      if (std::uniform_int_distribution<uint32_t>(0, ties - 1)(rng) == 0) {
        best = static_cast<int32_t>(i);
        if (k < best_key) best_key = k;
      }
    }
  }
  return best;
}

}  // namespace kvgate::policy::detail
