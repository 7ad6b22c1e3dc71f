#include "policy/detail/candidates.h"

#include <algorithm>

namespace kvgate::policy::detail {
namespace {

// A worker is 64-byte aligned with everything decisions read in its first cache line
// (workers/worker.h): fetch it a few workers ahead of the pass.
constexpr size_t kPrefetchAhead = 8;
void prefetch_worker(const workers::Worker* w) { __builtin_prefetch(w); }

// The free part of a pool of `pool` tokens at a usage of `ppm` parts per million (kUnknownFree for
// a pool of unknown size).
uint64_t free_tokens(uint64_t pool, uint32_t ppm) {
  if (pool == 0) return Candidate::kUnknownFree;
  const uint32_t free_ppm = ppm < 1'000'000 ? 1'000'000 - ppm : 0;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(pool) * free_ppm / 1'000'000);
}

// One candidate's figures, each read once. The load is max(fleet in flight, running + waiting)
// taken on integers (the same value as on doubles: both are exact).
// Every field is written: the slot holds an earlier decision's candidate. (Field by field: a
// Candidate built aside and copied in costs a store-forwarding stall per candidate.)
template <bool kWithCost>
[[gnu::always_inline]] inline void fill(Candidate& c, int32_t index, int32_t rank, HolderId holder,
                                        bool has_events, uint64_t kv_tokens,
                                        const workers::Worker::RoutingFigures& f,
                                        const CostRules* cost) {
  c.index = index;
  c.rank = rank;
  c.has_events = has_events;
  c.holder = holder;
  c.matched_blocks = 0;
  c.device_blocks = 0;
  const int64_t load =
      std::max<int64_t>(f.fleet_in_flight, int64_t{f.running} + int64_t{f.waiting});
  c.load = static_cast<double>(load);
  if constexpr (kWithCost) {
    c.overloaded =
        cost->overload.overloaded(f.kv_usage_ppm, f.waiting, f.fleet_in_flight, f.prefilling);
    c.queued_tokens = f.queued_ahead();
    c.index_blocks = f.index_blocks;
    c.free_kv_tokens = free_tokens(kv_tokens, f.kv_usage_ppm);
    c.offload_weight = cost->offload_weight[f.offload_tiers & (CostRules::kTierSets - 1)];
    c.prefill_rate = f.priced_prefill_rate(cost->measured_prefill_rate, cost->prior_prefill_rate);
  } else {
    c.offload_weight = 1;
    c.prefill_rate = 0;
    c.overloaded = false;
    c.queued_tokens = 0;
    c.index_blocks = 0;
    c.free_kv_tokens = Candidate::kUnknownFree;
  }
}

// Writes the candidates worker `i` gives the request from out[k] on (none if it may not take it;
// one per rank with req.dp_aware and several ranks, else one); returns the next free slot.
template <bool kWithCost>
[[gnu::always_inline]] inline size_t add_worker(size_t i, const RouteRequest& req,
                                                const workers::FleetSnapshot& fleet,
                                                const std::vector<uint64_t>* servers,
                                                const std::vector<uint64_t>* of_role, bool vetoed,
                                                const CostRules* cost, Candidate* out, size_t k) {
  if (servers != nullptr && !workers::FleetSnapshot::serves(*servers, i)) return k;
  if (of_role != nullptr && !workers::FleetSnapshot::serves(*of_role, i)) return k;
  const workers::Worker& w = *fleet.workers[i];
  if (w.vetoed() != vetoed || !w.routable()) return k;
  if (!req.exclude.empty() &&
      std::find(req.exclude.begin(), req.exclude.end(), w.id()) != req.exclude.end()) {
    return k;
  }
  const workers::FleetSnapshot::Route& route = fleet.routes[i];
  if (req.dp_aware && route.dp_size > 1) {
    // One candidate per rank: each has its own KV cache, queue and load. A rank whose event
    // stream lost events is left out while a sibling's is whole.
    const auto& info = *fleet.infos[i];
    bool any_whole = false;
    for (uint32_t r = 0; r < route.dp_size; ++r) any_whole |= !w.rank_degraded(r);
    for (uint32_t r = 0; r < route.dp_size; ++r) {
      if (any_whole && w.rank_degraded(r)) continue;
      fill<kWithCost>(out[k++], static_cast<int32_t>(i), static_cast<int32_t>(r),
                      holder_of_rank(info, r), route.has_events, route.kv_tokens,
                      w.routing_figures(r), cost);
    }
    return k;
  }
  // (A whole worker: its ranks' pools together, its usage their mean.)
  fill<kWithCost>(out[k++], static_cast<int32_t>(i), -1, HolderId(), route.has_events,
                  route.kv_tokens * std::max<uint32_t>(route.dp_size, 1), w.routing_figures(),
                  cost);
  return k;
}

template <bool kWithCost>
size_t collect(const RouteRequest& req, const workers::FleetSnapshot& fleet, Scratch& scratch,
               bool vetoed, const CostRules* cost) {
  // Room for every candidate the fleet could give, written in place.
  auto& out = scratch.candidate_slots;
  const size_t n = fleet.workers.size();
  const size_t most = req.dp_aware ? fleet.max_candidates : n;
  if (out.size() < most) out.resize(most);
  size_t k = 0;
  const std::vector<uint64_t>* servers = fleet.servers_of(req.model);
  const std::vector<uint64_t>* of_role = fleet.of_role(req.role);
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) prefetch_worker(fleet.workers[i + kPrefetchAhead].get());
    k = add_worker<kWithCost>(i, req, fleet, servers, of_role, vetoed, cost, out.data(), k);
  }
  scratch.candidates = std::span(out.data(), k);
  return k;
}

}  // namespace

CostRules::CostRules(const CacheAwareConfig& config)
    : overload(config.overload),
      prior_prefill_rate(static_cast<float>(config.prefill_tokens_per_second)),
      measured_prefill_rate(config.measured_prefill_rate) {
  const auto& w = config.tier_weights;
  for (size_t tiers = 0; tiers < kTierSets; ++tiers) {
    // The dearest tier off the device the worker offloads to; the host if it named none.
    double weight = 2;
    for (size_t t = 1; t < index::kTierCount; ++t) {
      if ((tiers >> t) & 1) weight = std::min(weight, w[t]);
    }
    if (weight > 1) weight = w[static_cast<size_t>(index::Tier::kHost)];
    offload_weight[tiers] = static_cast<float>(std::clamp(weight, 0.0, 1.0));
  }
}

HolderId holder_of_rank(const workers::WorkerInfo& info, uint32_t rank) {
  HolderId holder;
  for (size_t h = 0; h < info.holders.size() && h < info.holder_ranks.size(); ++h) {
    if (info.holder_ranks[h] == rank) holder = info.holders[h];
  }
  return holder;
}

uint32_t depth_in(std::span<const index::HolderMatch> matches, const workers::WorkerInfo& info,
                  int32_t rank) {
  const HolderId only = rank >= 0 ? holder_of_rank(info, static_cast<uint32_t>(rank)) : HolderId();
  uint32_t depth = 0;
  for (const index::HolderMatch& m : matches) {
    const bool mine = rank >= 0 ? m.holder == only
                                : std::find(info.holders.begin(), info.holders.end(), m.holder) !=
                                      info.holders.end();
    if (mine) depth = std::max(depth, m.any_depth);
  }
  return depth;
}

size_t collect_candidates(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                          Scratch& scratch, const CostRules* cost) {
  const auto pass = [&](bool vetoed) {
    return cost != nullptr ? collect<true>(req, fleet, scratch, vetoed, cost)
                           : collect<false>(req, fleet, scratch, vetoed, cost);
  };
  if (size_t n = pass(/*vetoed=*/false); n > 0) return n;
  // Every candidate is vetoed (wedged or unreachable): a veto steers, never refuses.
  return pass(/*vetoed=*/true);
}

size_t collect_candidates_of(std::span<const uint64_t> worker_bits, const RouteRequest& req,
                             const workers::FleetSnapshot& fleet, const CostRules& cost,
                             std::vector<Candidate>& out, size_t k) {
  const size_t most = req.dp_aware ? fleet.max_candidates : fleet.workers.size();
  if (out.size() < k + most) out.resize(k + most);
  const std::vector<uint64_t>* servers = fleet.servers_of(req.model);
  const std::vector<uint64_t>* of_role = fleet.of_role(req.role);
  for (size_t word = 0; word < worker_bits.size(); ++word) {
    for (uint64_t bits = worker_bits[word]; bits != 0; bits &= bits - 1) {
      const size_t i = word * 64 + static_cast<size_t>(__builtin_ctzll(bits));
      k = add_worker<true>(i, req, fleet, servers, of_role, /*vetoed=*/false, &cost, out.data(), k);
    }
  }
  return k;
}

}  // namespace kvgate::policy::detail
