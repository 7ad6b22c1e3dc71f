#include "policy/detail/candidates.h"

#include <algorithm>

namespace kvgate::policy::detail {

double effective_load(const workers::Worker& w) {
  const auto engine = w.engine_load();
  return std::max<double>(w.in_flight(), static_cast<double>(engine.running) + engine.waiting);
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
  const double queued = std::max(static_cast<double>(w.engine_load().queued_prefill_tokens),
                                 c.load * config.assumed_queued_prompt_tokens);
  return (queued + uncached) / config.prefill_tokens_per_second * 1e6;
}

}  // namespace kvgate::policy::detail
