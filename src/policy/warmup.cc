#include "policy/detail/warmup.h"

#include <algorithm>
#include <random>

namespace kvgate::policy::detail {
namespace {

bool test_bit(std::span<const uint64_t> bits, size_t i) {
  return (i >> 6) < bits.size() && ((bits[i >> 6] >> (i & 63)) & 1);
}

}  // namespace

const WarmupRule::Level* WarmupRule::fresh_level(const Scratch& s, const RouteRequest& req,
                                                 const workers::FleetSnapshot& fleet) const {
  for (const Level& l : s.warmup_levels) {
    if (l.policy != policy_ || l.model != req.model) continue;
    if (l.fleet_version != fleet.version) return nullptr;
    return clock_.now() - l.summed_at < config_.warmup_level_max_age ? &l : nullptr;
  }
  return nullptr;
}

const WarmupRule::Level& WarmupRule::sum_level(Scratch& s, std::span<const Candidate> cands,
                                               const RouteRequest& req,
                                               const workers::FleetSnapshot& fleet) const {
  // This model's slot, else one another policy left, else a new one, else the one summed
  // longest ago.
  Level* slot = nullptr;
  for (Level& l : s.warmup_levels) {
    if (l.policy == policy_ && l.model == req.model) slot = &l;
  }
  for (Level& l : s.warmup_levels) {
    if (slot == nullptr && l.policy != policy_) slot = &l;
  }
  if (slot == nullptr && s.warmup_levels.size() < kLevelsKept)
    slot = &s.warmup_levels.emplace_back();
  if (slot == nullptr) {
    slot = &*std::min_element(
        s.warmup_levels.begin(), s.warmup_levels.end(),
        [](const Level& a, const Level& b) { return a.summed_at < b.summed_at; });
  }
  Level& l = *slot;
  l.policy = policy_;
  l.fleet_version = fleet.version;
  l.model.assign(req.model);
  l.summed_at = clock_.now();
  // An integer sum: equal to a sum of doubles below 2^53 blocks, without a chain of FP adds.
  uint64_t sum = 0;
  size_t n = 0;
  for (const Candidate& c : cands) {
    if (!c.has_events) continue;  // no events: no level to compare
    sum += c.index_blocks;
    ++n;
  }
  l.with_level = n;
  l.mean = n > 0 ? static_cast<double>(sum) / static_cast<double>(n) : 0.0;
  l.thin.assign((fleet.workers.size() + 63) / 64, 0);
  if (!usable(l)) return l;
  const double under = config_.warmup_thin_ratio * l.mean;
  for (const Candidate& c : cands) {
    if (c.has_events && static_cast<double>(c.index_blocks) < under) {
      l.thin[static_cast<size_t>(c.index) >> 6] |= uint64_t{1} << (c.index & 63);
    }
  }
  // Workers no longer thin have filled: a later episode starts from zero.
  for (const Candidate& c : cands) {
    if (!c.has_events || test_bit(l.thin, static_cast<size_t>(c.index))) continue;
    workers::Worker& w = *fleet.workers[c.index];
    if (w.warmup_diversions() > 0) w.reset_warmup_diversions();
  }
  return l;
}

bool WarmupRule::usable(const Level& l) const {
  return l.with_level >= 2 && l.mean >= static_cast<double>(config_.warmup_min_mean_blocks);
}

bool WarmupRule::roll(const Level& l, const Decision& d, std::mt19937_64& rng) const {
  if (!usable(l)) return false;
  const double share = d.matched_blocks == 0 ? config_.warmup_miss_share : config_.warmup_hit_share;
  return std::uniform_real_distribution<double>(0, 1)(rng) < share;
}

bool WarmupRule::thin(const Candidate& c, const Level& l,
                      const workers::FleetSnapshot& fleet) const {
  if (c.overloaded || !c.has_events) return false;
  if (!test_bit(l.thin, static_cast<size_t>(c.index))) return false;
  if (static_cast<double>(c.index_blocks) >= config_.warmup_thin_ratio * l.mean) return false;
  return fleet.workers[c.index]->warmup_diversions() < config_.warmup_max_diversions;
}

Decision WarmupRule::divert(const Decision& d, std::span<const Candidate> cands, int32_t j,
                            const workers::FleetSnapshot& fleet) {
  if (j < 0 || (cands[j].index == d.worker && cands[j].rank == d.rank)) return d;
  fleet.workers[cands[j].index]->count_warmup_diversion();
  return {.worker = cands[j].index,
          .branch = Branch::kWarmup,
          .matched_blocks = cands[j].matched_blocks,
          .rank = cands[j].rank};
}

}  // namespace kvgate::policy::detail
