// Shared steps of every policy: which workers may take a request, how loaded they are, and a
// uniform draw among ties.
#pragma once

#include <random>

#include "kvgate/policy/policy.h"

namespace kvgate::policy::detail {

// Effective load of a worker: the larger of what this gateway has in flight there and what the
// engine last reported (which also counts other clients' requests).
double effective_load(const workers::Worker& w);
// The same for one candidate (a rank's own figures when it is one).
double effective_load(const workers::Worker& w, const Candidate& c);
// The engine's reported load for a candidate (its rank's, or the worker's).
workers::EngineLoad engine_load(const workers::Worker& w, const Candidate& c);

// Fills scratch.candidates with the routable workers that serve req.model (load filled in,
// matched_blocks 0), leaving out those the liveness tracker vetoed unless every one is vetoed. With
// req.dp_aware, a worker with several data-parallel ranks is one candidate per rank.
// Returns the number of candidates.
size_t collect_candidates(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                          Scratch& scratch);

// Expected wait before this request's first token on `c`, from the cost model in `config`.
double expected_wait_us(const Candidate& c, const workers::Worker& w, const RouteRequest& req,
                        const CacheAwareConfig& config);

// Among candidates accepted by `keep`, the one minimizing `key`, ties (within `window`) drawn
// uniformly (reservoir sampling: one pass, no allocation). Returns an index into `cands` or -1.
template <class Keep, class Key>
int32_t pick_min(const std::vector<Candidate>& cands, Keep keep, Key key, double window,
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
