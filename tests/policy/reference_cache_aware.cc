#include "policy/reference_cache_aware.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "kvgate/workers/load.h"

namespace kvgate::policy::testing {
namespace {

// Among the options accepted by `keep`, the one minimizing `key`; keys within `window` of the
// best so far are ties, and each tie met replaces the pick with probability 1/ties (reservoir
// sampling, one draw per tie, in scan order). -1 when none is accepted.
template <class Option, class Keep, class Key>
int32_t pick_min(const std::vector<Option>& options, Keep keep, Key key, double window,
                 std::mt19937_64& rng) {
  int32_t best = -1;
  double best_key = 0;
  uint32_t ties = 0;
  for (size_t i = 0; i < options.size(); ++i) {
    if (!keep(options[i])) continue;
    const double k = key(options[i]);
    if (best < 0 || k < best_key - window) {
      best = static_cast<int32_t>(i);
      best_key = k;
      ties = 1;
    } else if (k <= best_key + window) {
      ++ties;
      if (std::uniform_int_distribution<uint32_t>(0, ties - 1)(rng) == 0) {
        best = static_cast<int32_t>(i);
        if (k < best_key) best_key = k;
      }
    }
  }
  return best;
}

bool has_kv_holders(const workers::FleetSnapshot& fleet, int32_t worker_index) {
  return !fleet.infos[worker_index]->holders.empty();
}

// What the engine reports for the option: its rank's figures, or the worker's.
workers::EngineLoad engine_load_of(const workers::Worker& w, int32_t rank) {
  return rank < 0 ? w.engine_load() : w.engine_load(static_cast<DpRank>(rank));
}

int32_t fleet_in_flight_of(const workers::Worker& w, int32_t rank) {
  return rank < 0 ? w.fleet_in_flight() : w.fleet_in_flight(static_cast<DpRank>(rank));
}

// The larger of what the gateway fleet has in flight there and what the engine runs and queues.
double effective_load(const workers::Worker& w, int32_t rank) {
  const workers::EngineLoad engine = engine_load_of(w, rank);
  return std::max<double>(fleet_in_flight_of(w, rank),
                          static_cast<double>(engine.running) + engine.waiting);
}

// The tokens of the option's KV pool left free at the usage its engine reports (a whole worker:
// its ranks' pools together); UINT64_MAX when the pool's size is unknown.
uint64_t free_kv_tokens(const workers::Worker& w, const workers::WorkerInfo& info, int32_t rank) {
  const uint64_t pool =
      info.kv_blocks * info.block_size * (rank >= 0 ? 1 : std::max<uint64_t>(info.dp_size, 1));
  if (pool == 0) return UINT64_MAX;
  const auto used_ppm = static_cast<uint64_t>(std::lround(engine_load_of(w, rank).kv_usage * 1e6));
  const uint64_t free_ppm = used_ppm < 1'000'000 ? 1'000'000 - used_ppm : 0;
  return static_cast<uint64_t>(static_cast<unsigned __int128>(pool) * free_ppm / 1'000'000);
}

}  // namespace

ReferenceCacheAware::ReferenceCacheAware(const CacheAwareConfig& config,
                                         const index::Indexer* index, const Clock& clock)
    : config_(config),
      index_(index),
      clock_(clock),
      predicted_(config.prediction_ttl, config.prediction_capacity_blocks, clock) {}

// Rule 1: the workers that may take the request, vetoed or not as asked.
std::vector<ReferenceCacheAware::Option> ReferenceCacheAware::collect(
    const RouteRequest& req, const workers::FleetSnapshot& fleet, bool vetoed) const {
  std::vector<Option> options;
  for (size_t i = 0; i < fleet.workers.size(); ++i) {
    const workers::Worker& w = *fleet.workers[i];
    // Through the trackers themselves, not the Worker's copies of their states that the fast
    // pass reads: a tracker wired to the wrong state would show as a difference.
    const bool routable = w.health().state() == workers::Health::kHealthy && w.breaker().allows();
    if (!routable || w.liveness().vetoed() != vetoed) continue;
    if (std::find(req.exclude.begin(), req.exclude.end(), w.id()) != req.exclude.end()) continue;
    const workers::WorkerInfo& info = *fleet.infos[i];
    // A worker that reported no models serves any.
    if (!req.model.empty() && !info.models.empty() &&
        std::find(info.models.begin(), info.models.end(), req.model) == info.models.end()) {
      continue;
    }
    if (req.dp_aware && info.dp_size > 1) {
      bool any_whole = false;
      for (uint32_t r = 0; r < info.dp_size; ++r) any_whole |= !w.rank_degraded(r);
      for (uint32_t r = 0; r < info.dp_size; ++r) {
        if (any_whole && w.rank_degraded(r)) continue;
        Option o;
        o.worker_index = static_cast<int32_t>(i);
        o.rank = static_cast<int32_t>(r);
        // The last holder listed for the rank, if several are.
        for (size_t k = 0; k < info.holders.size() && k < info.holder_ranks.size(); ++k) {
          if (info.holder_ranks[k] == r) o.holder = info.holders[k];
        }
        o.load = effective_load(w, o.rank);
        o.free_kv_tokens = free_kv_tokens(w, info, o.rank);
        options.push_back(o);
      }
      continue;
    }
    Option o;
    o.worker_index = static_cast<int32_t>(i);
    o.load = effective_load(w, -1);
    o.free_kv_tokens = free_kv_tokens(w, info, -1);
    options.push_back(o);
  }
  return options;
}

// Rule 3: each option's matched depth and the part of it on the device; its cost figures.
void ReferenceCacheAware::fill_depths(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                                      std::vector<Option>& options) const {
  for (Option& o : options) {
    o.offload_weight = offload_weight(*fleet.workers[o.worker_index]);
    // The worker's learned rate, or the configured one until it has learned one (as a float, as
    // the fast pass keeps it).
    const float learned =
        config_.measured_prefill_rate &&
                fleet.workers[o.worker_index]->prefill_meter().samples() > 0
            ? static_cast<float>(fleet.workers[o.worker_index]->prefill_meter().tokens_per_second())
            : 0.0f;
    o.prefill_rate = learned > 0 ? learned : static_cast<float>(config_.prefill_tokens_per_second);
  }
  if (req.chain.empty()) return;
  // (depth on any tier, depth on the device) per holder.
  std::vector<std::pair<uint32_t, uint32_t>> by_holder(fleet.worker_of_holder.size());
  if (index_ != nullptr) {
    std::vector<index::HolderMatch> matches;
    index_->lookup(req.chain, matches);
    for (const index::HolderMatch& m : matches) {
      if (m.holder.value() < by_holder.size()) {
        by_holder[m.holder.value()] = {m.any_depth, m.device_depth};
      }
    }
    // Credits count for the holders at the pending_depth_levels deepest depths credits reach
    // (holders of removed workers included: they take a level, and count for nobody). A
    // credit's blocks are computed on the device.
    std::map<HolderId, uint32_t> pending;
    for (const Credit& c : credits_) pending[c.holder] = pending_depth(c.holder, req.chain);
    std::set<uint32_t> levels;
    for (const auto& [holder, depth] : pending) {
      if (depth > 0) levels.insert(depth);
    }
    while (levels.size() > config_.pending_depth_levels) levels.erase(levels.begin());
    for (const auto& [holder, depth] : pending) {
      if (!levels.contains(depth) || holder.value() >= by_holder.size()) continue;
      auto& [any, device] = by_holder[holder.value()];
      any = std::max(any, depth);
      device = std::max(device, depth);
    }
  }
  // A whole worker's: its deepest holder's, the most on the device among equals. Holders the
  // snapshot maps to no worker (a removed worker's) count for nobody.
  std::vector<std::pair<uint32_t, uint32_t>> by_worker(fleet.workers.size());
  for (size_t h = 0; h < by_holder.size(); ++h) {
    const int32_t w = fleet.worker_of_holder[h];
    if (w >= 0) by_worker[w] = std::max(by_worker[w], by_holder[h]);
  }
  for (Option& o : options) {
    std::pair<uint32_t, uint32_t> depth;
    if (!has_kv_holders(fleet, o.worker_index)) {
      const uint32_t predicted = predicted_.depth(fleet.workers[o.worker_index]->id(), req.chain);
      depth = {predicted, predicted};
    } else if (o.rank >= 0) {
      if (o.holder.valid() && o.holder.value() < by_holder.size()) {
        depth = by_holder[o.holder.value()];
      }
    } else {
      depth = by_worker[o.worker_index];
    }
    o.matched_blocks = depth.first;
    o.device_blocks = depth.second;
  }
}

// The weight of the dearest tier off the device the worker's events store on; the host's if
// they named none. (Rounded to a float, as the fast pass keeps it.)
double ReferenceCacheAware::offload_weight(const workers::Worker& w) const {
  double weight = -1;
  for (index::Tier t : {index::Tier::kHost, index::Tier::kDisk, index::Tier::kExternal}) {
    if ((w.offload_tiers() & index::tier_bit(t)) == 0) continue;
    const double tw = config_.tier_weights[static_cast<size_t>(t)];
    weight = weight < 0 ? tw : std::min(weight, tw);
  }
  if (weight < 0) weight = config_.tier_weights[static_cast<size_t>(index::Tier::kHost)];
  return static_cast<float>(std::clamp(weight, 0.0, 1.0));
}

// The blocks the option's match saves computing.
double ReferenceCacheAware::weighted_blocks(const Option& o) {
  return static_cast<double>(o.device_blocks) +
         o.offload_weight * static_cast<double>(o.matched_blocks - o.device_blocks);
}

double ReferenceCacheAware::expected_wait_us(const Option& o, const workers::Worker& w,
                                             const RouteRequest& req) const {
  const double cached = weighted_blocks(o) * req.block_size;
  const double uncached = std::max(0.0, static_cast<double>(req.prompt_tokens) - cached);
  return (queued_tokens(o, w) + uncached) / o.prefill_rate * 1e6;
}

// The engine's queued prefill, its queue at an assumed prompt length, or (a whole worker only)
// the prompts the gateway fleet sent there that have not had their first token: the largest.
double ReferenceCacheAware::queued_tokens(const Option& o, const workers::Worker& w) const {
  return std::max({static_cast<double>(engine_load_of(w, o.rank).queued_prefill_tokens),
                   o.load * config_.assumed_queued_prompt_tokens,
                   o.rank < 0 ? static_cast<double>(w.fleet_queued_prompt_tokens()) : 0.0});
}

Decision ReferenceCacheAware::select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                                     std::mt19937_64& rng) {
  // Rule 1. A veto steers, never refuses: the vetoed workers are the fallback.
  std::vector<Option> options = collect(req, fleet, /*vetoed=*/false);
  if (options.empty()) options = collect(req, fleet, /*vetoed=*/true);
  if (options.empty()) return {.worker = -1, .branch = Branch::kNoWorker};

  // Rule 2.
  size_t not_overloaded_count = 0;
  for (Option& o : options) {
    const workers::Worker& w = *fleet.workers[o.worker_index];
    o.overloaded = workers::is_overloaded(engine_load_of(w, o.rank), config_.overload,
                                          fleet_in_flight_of(w, o.rank));
    if (!o.overloaded) ++not_overloaded_count;
  }
  if (not_overloaded_count == 0) {
    if (config_.shed_when_all_overloaded) return {.worker = -1, .branch = Branch::kShed};
    const int32_t i = pick_min(
        options, [](const Option&) { return true; }, [](const Option& o) { return o.load; }, 0.0,
        rng);
    return {.worker = options[i].worker_index,
            .branch = Branch::kAllOverloaded,
            .rank = options[i].rank};
  }

  // Rule 3, and each option's expected wait.
  fill_depths(req, fleet, options);
  uint32_t deepest_any = 0;
  uint32_t deepest_not_overloaded = 0;
  double load_sum = 0;
  for (Option& o : options) {
    o.expected_wait_us = expected_wait_us(o, *fleet.workers[o.worker_index], req);
    deepest_any = std::max(deepest_any, o.matched_blocks);
    if (!o.overloaded) deepest_not_overloaded = std::max(deepest_not_overloaded, o.matched_blocks);
    load_sum += o.load;
  }
  const auto by_wait = [](const Option& o) { return o.expected_wait_us; };
  const auto not_overloaded = [](const Option& o) { return !o.overloaded; };

  // Rule 4, nobody deep among those not overloaded: the least expected wait.
  if (deepest_not_overloaded == 0) {
    const int32_t i = pick_min(options, not_overloaded, by_wait, config_.tie_window_us, rng);
    return warm_up({.worker = options[i].worker_index,
                    .branch = deepest_any > 0 ? Branch::kOverloadSteer : Branch::kFreshPrefix,
                    .matched_blocks = 0,
                    .rank = options[i].rank},
                   fleet, req, options, rng);
  }
  // Rule 4: the deepest not overloaded.
  const auto deepest = [&](const Option& o) {
    return !o.overloaded && o.matched_blocks == deepest_not_overloaded;
  };
  int32_t i = pick_min(options, deepest, by_wait, config_.tie_window_us, rng);
  Branch branch = deepest_any > deepest_not_overloaded ? Branch::kOverloadSteer : Branch::kAffinity;

  // Rule 5.
  const double mean = load_sum / static_cast<double>(options.size());
  const double load = options[i].load;
  if (load > mean + config_.balance_abs_threshold && load > mean * config_.balance_rel_threshold) {
    const int32_t j = pick_min(options, not_overloaded, by_wait, config_.tie_window_us, rng);
    if (options[j].load < load) {
      i = j;
      branch = Branch::kImbalanceSpill;
    }
  }
  // Rule 6.
  // The share of the winner's match that outlives the queue ahead of the request: the engine
  // evicts its oldest free blocks first, the prefix is among the newest, so the queue reaches it
  // only past (free - prefix).
  double kept = 1.0;
  if (const double cached = static_cast<double>(options[i].matched_blocks) * req.block_size;
      options[i].free_kv_tokens != UINT64_MAX && cached > 0) {
    const double left = static_cast<double>(options[i].free_kv_tokens) -
                        queued_tokens(options[i], *fleet.workers[options[i].worker_index]);
    kept = std::min(1.0, std::max(0.0, left / cached));
  }
  // The prefill a match worth `deeper` blocks saves over one worth `shallower` at the winner's
  // prefill rate, of which only the kept share of the deeper one counts.
  const auto saved_us = [&](double deeper, double shallower) {
    return std::max(0.0, kept * deeper - shallower) * req.block_size / options[i].prefill_rate *
           1e6;
  };
  // Considered only when the winner's wait exceeds (ratio + 1) times what it saves over the next
  // depth below it among those not overloaded (no shallower option could gain more).
  uint32_t next_depth = 0;
  for (const Option& o : options) {
    if (!o.overloaded && o.matched_blocks < deepest_not_overloaded) {
      next_depth = std::max(next_depth, o.matched_blocks);
    }
  }
  if (branch != Branch::kImbalanceSpill && config_.wait_spill_ratio > 0 &&
      options[i].expected_wait_us >
          (config_.wait_spill_ratio + 1) * saved_us(weighted_blocks(options[i]), next_depth)) {
    const int32_t j = pick_min(options, not_overloaded, by_wait, config_.tie_window_us, rng);
    const double gain_us = options[i].expected_wait_us - options[j].expected_wait_us;
    if (gain_us > config_.tie_window_us &&
        gain_us > config_.wait_spill_ratio *
                      saved_us(weighted_blocks(options[i]), weighted_blocks(options[j]))) {
      i = j;
      branch = Branch::kWaitSpill;
    }
  }
  return warm_up({.worker = options[i].worker_index,
                  .branch = branch,
                  .matched_blocks = options[i].matched_blocks,
                  .rank = options[i].rank},
                 fleet, req, options, rng);
}

// Rule 7: now and then, a thin option instead of `d`.
Decision ReferenceCacheAware::warm_up(Decision d, const workers::FleetSnapshot& fleet,
                                      const RouteRequest& req, const std::vector<Option>& options,
                                      std::mt19937_64& rng) {
  if (config_.warmup_thin_ratio <= 0) return d;
  // An option's level: the blocks the index holds for its rank, or for the whole worker.
  const auto level = [&](const Option& o) {
    const workers::Worker& w = *fleet.workers[o.worker_index];
    return static_cast<double>(o.rank >= 0 ? w.index_blocks(static_cast<DpRank>(o.rank))
                                           : w.index_blocks());
  };
  // The model's level: summed again when the last sum is warmup_level_max_age old or of another
  // snapshot; otherwise reused.
  const auto found = levels_.find(req.model);
  const bool fresh = found != levels_.end() && found->second.fleet_version == fleet.version &&
                     clock_.now() - found->second.summed_at < config_.warmup_level_max_age;
  Level& level_ = levels_[std::string(req.model)];
  if (!fresh) {
    level_ = {.fleet_version = fleet.version, .summed_at = clock_.now()};
    // The mean over the options with KV holders (the others have no level to compare).
    double sum = 0;
    for (const Option& o : options) {
      if (!has_kv_holders(fleet, o.worker_index)) continue;
      sum += level(o);
      ++level_.with_level;
    }
    level_.mean = level_.with_level > 0 ? sum / static_cast<double>(level_.with_level) : 0.0;
    level_.thin.assign(fleet.workers.size(), false);
    if (level_.with_level >= 2 &&
        level_.mean >= static_cast<double>(config_.warmup_min_mean_blocks)) {
      // Thin: a worker with an option under the ratio of the mean. The others have filled:
      // their diversions restart from zero.
      for (const Option& o : options) {
        if (has_kv_holders(fleet, o.worker_index) &&
            level(o) < config_.warmup_thin_ratio * level_.mean) {
          level_.thin[o.worker_index] = true;
        }
      }
      for (const Option& o : options) {
        workers::Worker& w = *fleet.workers[o.worker_index];
        if (has_kv_holders(fleet, o.worker_index) && !level_.thin[o.worker_index] &&
            w.warmup_diversions() > 0) {
          w.reset_warmup_diversions();
        }
      }
    }
  }
  if (level_.with_level < 2) return d;
  if (level_.mean < static_cast<double>(config_.warmup_min_mean_blocks)) return d;
  const double share = d.matched_blocks == 0 ? config_.warmup_miss_share : config_.warmup_hit_share;
  if (std::uniform_real_distribution<double>(0, 1)(rng) >= share) return d;
  // An option it may divert to: a thin worker's, not overloaded, still under the ratio of the
  // mean, under its diversion cap.
  const auto thin = [&](const Option& o) {
    if (o.overloaded || !has_kv_holders(fleet, o.worker_index)) return false;
    if (!level_.thin[o.worker_index]) return false;
    if (level(o) >= config_.warmup_thin_ratio * level_.mean) return false;
    return fleet.workers[o.worker_index]->warmup_diversions() < config_.warmup_max_diversions;
  };
  const int32_t j = pick_min(
      options, thin, [](const Option& o) { return o.expected_wait_us; }, config_.tie_window_us,
      rng);
  if (j < 0 || (options[j].worker_index == d.worker && options[j].rank == d.rank)) return d;
  fleet.workers[options[j].worker_index]->count_warmup_diversion();
  return {.worker = options[j].worker_index,
          .branch = Branch::kWarmup,
          .matched_blocks = options[j].matched_blocks,
          .rank = options[j].rank};
}

uint64_t ReferenceCacheAware::on_dispatch(const workers::Worker& worker, const RouteRequest& req,
                                          int32_t rank) {
  if (req.chain.empty()) return 0;
  const auto info = worker.info();
  if (info->holders.empty()) {
    predicted_.record(worker.id(), req.chain);
    return 0;
  }
  if (config_.pending_max_age.count() <= 0 || index_ == nullptr ||
      config_.pending_capacity_blocks == 0) {
    return 0;
  }
  HolderId holder;
  for (size_t h = 0; h < info->holders.size(); ++h) {
    const bool pinned = rank >= 0 && h < info->holder_ranks.size() &&
                        info->holder_ranks[h] == static_cast<uint32_t>(rank);
    if (pinned || (rank < 0 && info->holders.size() == 1)) holder = info->holders[h];
  }
  if (!holder.valid()) return 0;
  const size_t blocks = std::min(req.chain.size(), config_.pending_capacity_blocks);
  const MonoTime now = clock_.now();
  // The oldest credits end first: the expired ones, then any while the new one would not fit.
  for (Credit& c : credits_) {
    if (!c.live) continue;
    if (c.expires <= now) {
      end_credit(c);
    } else if (live_blocks_ + blocks > config_.pending_capacity_blocks) {
      end_credit(c);
    } else {
      break;
    }
  }
  const uint64_t ticket = next_ticket_++;
  const uint32_t most = std::max<uint32_t>(1, config_.pending_max_requests);
  if (ticket > most) {
    if (Credit* old = credit(ticket - most); old != nullptr && old->live) end_credit(*old);
  }
  credits_.push_back({.ticket = ticket,
                      .holder = holder,
                      .expires = now + config_.pending_max_age,
                      .chain = {req.chain.begin(), req.chain.begin() + blocks}});
  live_blocks_ += blocks;
  return ticket;
}

ReferenceCacheAware::Credit* ReferenceCacheAware::credit(uint64_t ticket) {
  for (Credit& c : credits_) {
    if (c.ticket == ticket) return &c;
  }
  return nullptr;
}

void ReferenceCacheAware::on_prefilled(uint64_t ticket) {
  Credit* c = credit(ticket);
  if (c != nullptr && c->live)
    c->expires = std::min(c->expires, clock_.now() + config_.pending_grace);
}

void ReferenceCacheAware::on_request_end(workers::Outcome outcome, uint64_t ticket) {
  Credit* c = credit(ticket);
  if (c != nullptr && c->live && outcome != workers::Outcome::kSuccess) end_credit(*c);
}

uint32_t ReferenceCacheAware::pending_depth(HolderId holder, std::span<const SeqHash> chain) const {
  const MonoTime now = clock_.now();
  uint32_t depth = 0;
  for (const Credit& c : credits_) {
    if (!c.live || c.holder != holder || c.expires <= now) continue;
    uint32_t d = 0;
    while (d < c.chain.size() && d < chain.size() && c.chain[d] == chain[d]) ++d;
    depth = std::max(depth, d);
  }
  return depth;
}

}  // namespace kvgate::policy::testing
