#include "kvgate/policy/explain.h"

#include <algorithm>

#include "policy/detail/candidates.h"

namespace kvgate::policy {
namespace {

// Of c's matched blocks, those only the blocks-in-flight credits of the decision's lookup give.
uint32_t pending_part(const Candidate& c, const workers::FleetSnapshot& fleet, const Scratch& s) {
  if (!s.pending_counted || !c.has_events) return 0;
  const uint32_t confirmed =
      detail::depth_in(s.confirmed_matches, *fleet.infos[static_cast<size_t>(c.index)], c.rank);
  return c.matched_blocks - std::min(c.matched_blocks, confirmed);
}

}  // namespace

Explanation explain(const RouteRequest& req, const Decision& d, const workers::FleetSnapshot& fleet,
                    const Scratch& scratch, const CacheAwareConfig* cost, size_t top) {
  Explanation e{.decision = d, .chain_blocks = static_cast<uint32_t>(req.chain.size())};
  std::vector<bool> candidate(fleet.workers.size(), false);
  std::vector<CandidateReport> all;
  all.reserve(scratch.candidates.size());
  for (const Candidate& c : scratch.candidates) {
    candidate[static_cast<size_t>(c.index)] = true;
    e.overloaded += c.overloaded ? 1 : 0;
    all.push_back({.index = c.index,
                   .rank = c.rank,
                   .matched_blocks = c.matched_blocks,
                   .load = c.load,
                   .queued_tokens = c.queued_tokens,
                   .expected_wait_us = cost ? detail::expected_wait_us(c, req, *cost) : -1.0,
                   .overloaded = c.overloaded,
                   .predicted = !c.has_events,
                   .pending_blocks = pending_part(c, fleet, scratch),
                   .offloaded_blocks = cost ? c.matched_blocks - c.device_blocks : 0,
                   .chosen = c.index == d.worker && c.rank == d.rank});
  }
  e.candidates = all.size();

  const std::vector<uint64_t>* servers = fleet.servers_of(req.model);
  const std::vector<uint64_t>* of_role = fleet.of_role(req.role);
  for (size_t i = 0; i < fleet.workers.size(); ++i) {
    if (candidate[i]) continue;
    if (servers != nullptr && !workers::FleetSnapshot::serves(*servers, i)) continue;
    if (of_role != nullptr && !workers::FleetSnapshot::serves(*of_role, i)) continue;
    const workers::Worker& w = *fleet.workers[i];
    if (std::find(req.exclude.begin(), req.exclude.end(), w.id()) != req.exclude.end()) {
      ++e.excluded;
    } else if (!w.routable()) {
      ++e.unroutable;
    } else if (w.vetoed()) {
      ++e.vetoed;
    }
  }

  // The chosen one first, then deepest, then the least expected wait (or load).
  const auto better = [](const CandidateReport& a, const CandidateReport& b) {
    if (a.chosen != b.chosen) return a.chosen;
    if (a.matched_blocks != b.matched_blocks) return a.matched_blocks > b.matched_blocks;
    if (a.expected_wait_us != b.expected_wait_us) return a.expected_wait_us < b.expected_wait_us;
    return a.load < b.load;
  };
  const size_t n = std::min(top, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), better);
  all.resize(n);
  e.top = std::move(all);
  return e;
}

}  // namespace kvgate::policy
