// cache_aware's warm-up rule (CacheAwareConfig::warmup_*): now and then a thin candidate, one
// whose index holds well under the fleet's mean, takes a request instead of the winner, so that a
// worker that came back empty fills instead of idling while its peers hold every hot prefix.
//
// The level (the mean over the candidates with KV events, and which workers have a candidate
// under warmup_thin_ratio of it) is summed over the fleet at most every warmup_level_max_age per
// thread and model (Scratch::warmup_levels) and reused in between, so that a decision that visits
// only the deepest holders can apply the rule. Summing it also ends the episodes of workers no
// longer thin (their diversion counts restart from zero).
//
// Threading: const; per-thread state lives in the Scratch. Workers' diversion counters are
// relaxed atomics shared by every thread.
#pragma once

#include <random>
#include <span>

#include "kvgate/core/clock.h"
#include "kvgate/policy/policy.h"

namespace kvgate::policy::detail {

class WarmupRule {
 public:
  using Level = Scratch::WarmupLevel;
  // Levels a scratch keeps (one per model asked for; beyond, the one summed longest ago goes).
  static constexpr size_t kLevelsKept = 16;

  // `policy`: the instance's id, unique in the process (a scratch serves any policy).
  WarmupRule(const CacheAwareConfig& config, const Clock& clock, uint64_t policy)
      : config_(config), clock_(clock), policy_(policy) {}

  bool enabled() const { return config_.warmup_thin_ratio > 0; }
  // The scratch's level for req.model if it may serve this request now (summed by this policy
  // over this snapshot, under warmup_level_max_age ago); else null.
  const Level* fresh_level(const Scratch& s, const RouteRequest& req,
                           const workers::FleetSnapshot& fleet) const;
  // Sums req.model's level over `cands` (the request's candidates) into the scratch.
  const Level& sum_level(Scratch& s, std::span<const Candidate> cands, const RouteRequest& req,
                         const workers::FleetSnapshot& fleet) const;
  // Whether this decision diverts: the level is usable and the roll (one uniform draw) falls
  // within the share for a hit or a miss. No draw when the level is unusable.
  bool roll(const Level& level, const Decision& d, std::mt19937_64& rng) const;
  // A candidate the rule may divert to: a thin worker's, not overloaded, still under the ratio,
  // under its diversion cap.
  bool thin(const Candidate& c, const Level& level, const workers::FleetSnapshot& fleet) const;
  // `d`, or the thin candidate cands[j] (j >= 0) instead, counted as a diversion there.
  static Decision divert(const Decision& d, std::span<const Candidate> cands, int32_t j,
                         const workers::FleetSnapshot& fleet);

 private:
  // Two candidates with a level at least, and their mean over warmup_min_mean_blocks (else the
  // whole fleet is warming: nobody is thin).
  bool usable(const Level& level) const;

  const CacheAwareConfig& config_;
  const Clock& clock_;
  const uint64_t policy_;
};

}  // namespace kvgate::policy::detail
