// The reference implementation of cache_aware: the decision as the rules define it, one plain pass
// per rule, kept to check the fast implementation (src/policy/cache_aware.cc) against.
//
// It reads the fleet only through the workers' public API and the snapshot's descriptions
// (`infos`, `worker_of_holder`), keeps its own candidate type, and walks the rules in the order
// CacheAwareConfig documents them:
//
//  1. Candidates: routable workers serving the model, in fleet order (a data-parallel worker as
//     one candidate per rank, rank order, degraded ranks left out while a sibling is whole);
//     the vetoed ones only when every candidate is vetoed. None: kNoWorker.
//  2. Overload: every candidate over a threshold: kShed, or the least loaded (kAllOverloaded).
//  3. Depth: the index's any-tier depth per holder, a whole worker's deepest rank, or the
//     approximate mode's prediction for a worker without KV holders. A holder's depth is the
//     deeper of the index's and its live blocks-in-flight credits' (each the common prefix of
//     its chain and the request's; a credit kept as a list entry, ended the way
//     policy/detail/pending_blocks.h says).
//  4. Affinity: the deepest non-overloaded candidates, least expected wait among them
//     (kAffinity / kOverloadSteer); nobody deep: least expected wait (kFreshPrefix).
//  5. Imbalance: a winner far above the fleet's mean load yields to the least expected wait.
//  6. Wait: a winner whose expected wait exceeds the least by more than wait_spill_ratio times the
//     prefill its deeper match saves yields to the least expected wait (kWaitSpill).
//  7. Warm-up: a share of the decisions goes to a thin candidate instead (kWarmup), by the
//     level (mean and thin workers) last summed, summed again once warmup_level_max_age old.
//
// Equivalence is exact, random draws included: the same candidates in the same order, the same
// floating-point expressions, and the same draws from the caller's generator in the same order
// (a uniform integer per tie met while scanning for a minimum, one uniform real per warm-up
// roll). Given the same generator state it returns the same Decision as the fast implementation.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "kvgate/core/clock.h"
#include "kvgate/index/indexer.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/registry.h"
#include "policy/detail/predicted_cache.h"

namespace kvgate::policy::testing {

class ReferenceCacheAware {
 public:
  // `index` may be null (every depth is then predicted or zero), as with PolicyDeps.
  ReferenceCacheAware(const CacheAwareConfig& config, const index::Indexer* index,
                      const Clock& clock);

  Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                  std::mt19937_64& rng);
  // The request went to `worker` (pinned to `rank`, or -1): a worker without KV holders is
  // predicted to cache its chain; one with holders has the chain credited to the holder the
  // dispatch computes it on. Returns the credit's ticket (0: none).
  uint64_t on_dispatch(const workers::Worker& worker, const RouteRequest& req, int32_t rank);
  // Policy::on_prefilled and on_request_end (a failure withdraws the credit).
  void on_prefilled(uint64_t ticket);
  void on_request_end(workers::Outcome outcome, uint64_t ticket);

 private:
  struct Credit {
    uint64_t ticket = 0;
    HolderId holder;
    MonoTime expires{};
    std::vector<SeqHash> chain;
    bool live = true;
  };
  Credit* credit(uint64_t ticket);
  void end_credit(Credit& c) {
    c.live = false;
    live_blocks_ -= c.chain.size();
  }
  // The longest prefix of `chain` a live credit of `holder` covers.
  uint32_t pending_depth(HolderId holder, std::span<const SeqHash> chain) const;

  // One routing candidate: a whole worker, or one data-parallel rank of it.
  struct Option {
    int32_t worker_index = 0;  // into FleetSnapshot::workers
    int32_t rank = -1;         // -1: the whole worker
    HolderId holder;           // the rank's KV holder (invalid: the whole worker, or none)
    double load = 0;
    bool overloaded = false;
    uint32_t matched_blocks = 0;
    uint32_t device_blocks = 0;  // of matched_blocks, the leading ones on the device
    double offload_weight = 1;   // what each of the others saves
    double prefill_rate = 0;     // prompt tokens per second
    double expected_wait_us = 0;
    uint64_t free_kv_tokens = UINT64_MAX;  // UINT64_MAX: the pool's size is unknown
  };

  std::vector<Option> collect(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                              bool vetoed) const;
  void fill_depths(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                   std::vector<Option>& options) const;
  double offload_weight(const workers::Worker& w) const;
  static double weighted_blocks(const Option& o);
  double expected_wait_us(const Option& o, const workers::Worker& w, const RouteRequest& req) const;
  double queued_tokens(const Option& o, const workers::Worker& w) const;
  Decision warm_up(Decision d, const workers::FleetSnapshot& fleet, const RouteRequest& req,
                   const std::vector<Option>& options, std::mt19937_64& rng);

  const CacheAwareConfig config_;
  const index::Indexer* index_;
  const Clock& clock_;
  detail::PredictedCache predicted_;
  std::vector<Credit> credits_;  // in ticket order
  uint64_t next_ticket_ = 1;
  size_t live_blocks_ = 0;
  // The warm-up level as last summed, per model.
  struct Level {
    uint64_t fleet_version = 0;
    MonoTime summed_at{};
    size_t with_level = 0;
    double mean = 0;
    std::vector<bool> thin;  // per worker index
  };
  std::map<std::string, Level, std::less<>> levels_;
};

}  // namespace kvgate::policy::testing
