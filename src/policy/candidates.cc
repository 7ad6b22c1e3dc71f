#include "policy/detail/candidates.h"

#include <algorithm>

namespace kvgate::policy::detail {

double effective_load(const workers::Worker& w) {
  const auto engine = w.engine_load();
  return std::max<double>(w.fleet_in_flight(),
                          static_cast<double>(engine.running) + engine.waiting);
}

double effective_load(const workers::Worker& w, const Candidate& c) {
  if (c.rank < 0) return effective_load(w);
  const auto rank = static_cast<DpRank>(c.rank);
  const auto engine = w.engine_load(rank);
  return std::max<double>(w.fleet_in_flight(rank),
                          static_cast<double>(engine.running) + engine.waiting);
}

workers::EngineLoad engine_load(const workers::Worker& w, const Candidate& c) {
  return c.rank < 0 ? w.engine_load() : w.engine_load(static_cast<DpRank>(c.rank));
}

namespace {

size_t collect(const RouteRequest& req, const workers::FleetSnapshot& fleet, Scratch& scratch,
               bool vetoed) {
  scratch.candidates.clear();
  for (size_t i = 0; i < fleet.workers.size(); ++i) {
    const workers::Worker& w = *fleet.workers[i];
    if (!w.routable() || w.vetoed() != vetoed) continue;
    if (std::find(req.exclude.begin(), req.exclude.end(), w.id()) != req.exclude.end()) continue;
    if (!req.model.empty()) {
      const auto& info = fleet.infos[i];
      if (!info->models.empty() &&
          std::find(info->models.begin(), info->models.end(), req.model) == info->models.end()) {
        continue;
      }
    }
    const auto& info = *fleet.infos[i];
    if (req.dp_aware && info.dp_size > 1) {
      // One candidate per rank: each has its own KV cache, queue and load. A rank whose event
      // stream lost events is left out while a sibling's is whole.
      bool any_whole = false;
      for (uint32_t r = 0; r < info.dp_size; ++r) any_whole |= !w.rank_degraded(r);
      for (uint32_t r = 0; r < info.dp_size; ++r) {
        if (any_whole && w.rank_degraded(r)) continue;
        Candidate c;
        c.index = static_cast<int32_t>(i);
        c.rank = static_cast<int32_t>(r);
        for (size_t k = 0; k < info.holders.size() && k < info.holder_ranks.size(); ++k) {
          if (info.holder_ranks[k] == r) c.holder = info.holders[k];
        }
        c.load = effective_load(w, c);
        scratch.candidates.push_back(c);
      }
      continue;
    }
    Candidate c;
    c.index = static_cast<int32_t>(i);
    c.load = effective_load(w);
    scratch.candidates.push_back(c);
  }
  return scratch.candidates.size();
}

}  // namespace

size_t collect_candidates(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                          Scratch& scratch) {
  if (size_t n = collect(req, fleet, scratch, /*vetoed=*/false); n > 0) return n;
  // Every candidate is vetoed (wedged or unreachable): a veto steers, never refuses.
  return collect(req, fleet, scratch, /*vetoed=*/true);
}

double expected_wait_us(const Candidate& c, const workers::Worker& w, const RouteRequest& req,
                        const CacheAwareConfig& config) {
  const uint64_t cached = static_cast<uint64_t>(c.matched_blocks) * req.block_size;
  const double uncached =
      req.prompt_tokens > cached ? static_cast<double>(req.prompt_tokens - cached) : 0.0;
  // The engine's own count when it reports one; else its queue at an assumed prompt length, or
  // the prompts the gateway replicas sent that have not had their first token, if more (kept
  // per worker, so for a whole worker only).
  const double queued =
      std::max({static_cast<double>(engine_load(w, c).queued_prefill_tokens),
                c.load * config.assumed_queued_prompt_tokens,
                c.rank < 0 ? static_cast<double>(w.fleet_queued_prompt_tokens()) : 0.0});
  return (queued + uncached) / config.prefill_tokens_per_second * 1e6;
}

}  // namespace kvgate::policy::detail
