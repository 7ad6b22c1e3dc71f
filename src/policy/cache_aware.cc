// cache_aware: affinity first (the deepest holder of the request's prefix wins), then gates.
//
//  1. Candidates: routable workers serving the model. None -> kNoWorker.
//  2. Overload: workers over the KV-usage or waiting thresholds are steered around. When every
//     candidate is over: 503 (kShed) if shedding is on, else the least-loaded one (kAllOverloaded).
//  3. Depth: the index's matched depth on any tier, per candidate: a data-parallel rank's own
//     holder, or a whole worker's deepest rank; a worker without KV events gets the approximate
//     mode's prediction instead.
//  4. Affinity: the deepest non-overloaded worker(s); among equals the least expected wait, ties
//     within tie_window_us drawn uniformly. No holder at all: least expected wait (kFreshPrefix).
//  5. Imbalance: if the winner's load exceeds the fleet mean by balance_abs_threshold and by the
//     factor balance_rel_threshold, the least-expected-wait worker takes it (kImbalanceSpill).
//  6. Wait: if the winner's expected wait exceeds the least expected wait by more than
//     wait_spill_ratio times the prefill its deeper match saves, the least-wait worker takes it
//     (kWaitSpill): a few shared blocks do not hold a request behind a long prefill.
//  7. Warm-up: a share of the misses and a smaller share of the hits go to a thin worker (its
//     index well under the fleet's mean) instead, until it fills (kWarmup).
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "policy/detail/candidates.h"
#include "policy/detail/predicted_cache.h"
#include "policy/detail/simple_policies.h"

namespace kvgate::policy::detail {
namespace {

class CacheAwarePolicy final : public Policy {
 public:
  CacheAwarePolicy(const CacheAwareConfig& config, PolicyDeps deps)
      : config_(config),
        index_(deps.index),
        rules_(config),
        clock_(deps.clock ? *deps.clock : Clock::real()),
        predicted_(config.prediction_ttl, config.prediction_capacity_blocks, clock_) {}

  std::string_view name() const override { return "cache_aware"; }

  Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                  Scratch& s) override {
    if (collect_candidates(req, fleet, s, &rules_) == 0) {
      return {.worker = -1, .branch = Branch::kNoWorker};
    }
    auto& cands = s.candidates;
    if (std::all_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.overloaded; })) {
      if (config_.shed_when_all_overloaded) return {.worker = -1, .branch = Branch::kShed};
      const int32_t i = pick_min(
          cands, [](const Candidate&) { return true; }, [](const Candidate& c) { return c.load; },
          0.0, s.rng);
      return {.worker = cands[i].index, .branch = Branch::kAllOverloaded, .rank = cands[i].rank};
    }

    // (Named, not bound: clang 14 does not let a lambda capture a structured binding.)
    const Totals totals = score(req, fleet, s);
    const uint32_t deepest_any = totals.deepest_any;
    const uint32_t deepest_ok = totals.deepest_ok;
    const auto by_wait = [&](const Candidate& c) { return expected_wait_us(c, req, config_); };
    const auto not_overloaded = [](const Candidate& c) { return !c.overloaded; };

    if (deepest_ok == 0) {
      const int32_t i = pick_min(cands, not_overloaded, by_wait, config_.tie_window_us, s.rng);
      return warm_up({.worker = cands[i].index,
                      .branch = deepest_any > 0 ? Branch::kOverloadSteer : Branch::kFreshPrefix,
                      .matched_blocks = 0,
                      .rank = cands[i].rank},
                     req, fleet, s);
    }
    int32_t i = pick_min(
        cands, [&](const Candidate& c) { return !c.overloaded && c.matched_blocks == deepest_ok; },
        by_wait, config_.tie_window_us, s.rng);
    Branch branch = deepest_any > deepest_ok ? Branch::kOverloadSteer : Branch::kAffinity;

    const double mean = static_cast<double>(totals.load_sum) / static_cast<double>(cands.size());
    const double load = cands[i].load;
    if (load > mean + config_.balance_abs_threshold &&
        load > mean * config_.balance_rel_threshold) {
      const int32_t j = pick_min(cands, not_overloaded, by_wait, config_.tie_window_us, s.rng);
      if (cands[j].load < load) {
        i = j;
        branch = Branch::kImbalanceSpill;
      }
    }
    // (Only a candidate shallower than the winner can gain, by at most the winner's wait: the
    // pass over the fleet runs only when the wait could pay for the next depth's loss.)
    if (branch != Branch::kImbalanceSpill && config_.wait_spill_ratio > 0) {
      const double winner_wait_us = by_wait(cands[i]);
      if (winner_wait_us >
          (config_.wait_spill_ratio + 1) * saved_prefill_us(deepest_ok, totals.second_ok, req)) {
        const int32_t j = pick_min(cands, not_overloaded, by_wait, config_.tie_window_us, s.rng);
        const double gain_us = winner_wait_us - by_wait(cands[j]);
        if (gain_us > config_.tie_window_us &&
            gain_us > config_.wait_spill_ratio *
                          saved_prefill_us(cands[i].matched_blocks, cands[j].matched_blocks, req)) {
          i = j;
          branch = Branch::kWaitSpill;
        }
      }
    }
    return warm_up({.worker = cands[i].index,
                    .branch = branch,
                    .matched_blocks = cands[i].matched_blocks,
                    .rank = cands[i].rank},
                   req, fleet, s);
  }

  void on_dispatch(const workers::Worker& worker, const RouteRequest& req) override {
    if (req.chain.empty() || !worker.info()->holders.empty()) return;
    predicted_.record(worker.id(), req.chain);
    if (!config_.journal_predictions) return;
    MutexLock l(&journal_mu_);
    if (journal_size_ + req.chain.size() > config_.prediction_journal_blocks) return;
    auto& blocks = journal_[worker.id()];
    for (SeqHash h : req.chain) journal_size_ += blocks.insert(h).second ? 1 : 0;
  }

  void on_worker_removed(WorkerId worker) override {
    predicted_.forget(worker);
    MutexLock l(&journal_mu_);
    if (auto it = journal_.find(worker); it != journal_.end()) {
      journal_size_ -= it->second.size();
      journal_.erase(it);
    }
  }

  void take_predictions(std::vector<PredictedBlocks>& out) override {
    absl::flat_hash_map<WorkerId, absl::flat_hash_set<SeqHash>> taken;
    {
      MutexLock l(&journal_mu_);
      taken.swap(journal_);
      journal_size_ = 0;
    }
    for (auto& [worker, blocks] : taken)
      out.push_back({.worker = worker, .blocks = {blocks.begin(), blocks.end()}});
  }

  void add_predictions(WorkerId worker, std::span<const SeqHash> blocks) override {
    predicted_.record(worker, blocks);
  }

 private:
  // The warm-up rule (CacheAwareConfig::warmup_*): now and then, a thin candidate instead of `d`.
  Decision warm_up(Decision d, const RouteRequest& req, const workers::FleetSnapshot& fleet,
                   Scratch& s) const {
    if (config_.warmup_thin_ratio <= 0) return d;
    auto& cands = s.candidates;
    const auto level = [](const Candidate& c) { return static_cast<double>(c.index_blocks); };
    // An integer sum: equal to a sum of doubles below 2^53 blocks, without a chain of FP adds.
    uint64_t sum = 0;
    size_t n = 0;
    for (const auto& c : cands) {
      if (!c.has_events) continue;  // no events: no level to compare
      sum += c.index_blocks;
      ++n;
    }
    if (n < 2) return d;
    const double mean = static_cast<double>(sum) / static_cast<double>(n);
    if (mean < static_cast<double>(config_.warmup_min_mean_blocks)) return d;
    const double share =
        d.matched_blocks == 0 ? config_.warmup_miss_share : config_.warmup_hit_share;
    if (std::uniform_real_distribution<double>(0, 1)(s.rng) >= share) return d;
    const auto thin = [&](const Candidate& c) {
      if (c.overloaded || !c.has_events) return false;
      workers::Worker& w = *fleet.workers[c.index];
      const uint64_t diversions = w.warmup_diversions();
      if (level(c) >= config_.warmup_thin_ratio * mean) {
        if (diversions > 0) w.reset_warmup_diversions();  // filled: a new episode later
        return false;
      }
      return diversions < config_.warmup_max_diversions;
    };
    const int32_t j = pick_min(
        cands, thin, [&](const Candidate& c) { return expected_wait_us(c, req, config_); },
        config_.tie_window_us, s.rng);
    if (j < 0 || (cands[j].index == d.worker && cands[j].rank == d.rank)) return d;
    fleet.workers[cands[j].index]->count_warmup_diversion();
    return {.worker = cands[j].index,
            .branch = Branch::kWarmup,
            .matched_blocks = cands[j].matched_blocks,
            .rank = cands[j].rank};
  }

  // The prefill time a match of `deeper` blocks saves over one of `shallower`, by the cost model.
  double saved_prefill_us(uint32_t deeper, uint32_t shallower, const RouteRequest& req) const {
    const double blocks = deeper > shallower ? static_cast<double>(deeper - shallower) : 0.0;
    return blocks * req.block_size / config_.prefill_tokens_per_second * 1e6;
  }

  struct Totals {
    uint32_t deepest_any = 0;  // the deepest match of any candidate
    uint32_t deepest_ok = 0;   // of a candidate not overloaded
    uint32_t second_ok = 0;    // the deepest match under deepest_ok of a candidate not overloaded
    int64_t load_sum = 0;  // loads are whole numbers: summed exactly, without a chain of FP adds
  };
  // Each candidate's matched depth (a rank's is its own holder's, a whole worker's the deepest of
  // its ranks'), in one pass with the totals the rules need. (Holders the snapshot does not map to
  // a worker, those of removed workers, are no candidate's.)
  Totals score(const RouteRequest& req, const workers::FleetSnapshot& fleet, Scratch& s) const {
    auto& depth = s.depth_by_holder;
    depth.clear();
    if (!req.chain.empty()) {
      depth.resize(fleet.worker_of_holder.size(), 0);
      if (index_ != nullptr) {
        index_->lookup(req.chain, s.matches);
        for (const auto& m : s.matches) {
          if (m.holder.valid() && m.holder.value() < depth.size()) {
            depth[m.holder.value()] = m.any_depth;
          }
        }
      }
    }
    const auto depth_of = [&](HolderId h) -> uint32_t {
      return h.valid() && h.value() < depth.size() ? depth[h.value()] : 0;
    };
    Totals t;
    for (auto& c : s.candidates) {
      if (req.chain.empty()) {
        c.matched_blocks = 0;
      } else if (!c.has_events) {
        c.matched_blocks = predicted_.depth(fleet.workers[c.index]->id(), req.chain);
      } else if (c.rank >= 0) {
        c.matched_blocks = depth_of(c.holder);
      } else if (const HolderId only = fleet.routes[c.index].only_holder; only.valid()) {
        c.matched_blocks = depth_of(only);
      } else {
        uint32_t deepest = 0;  // a whole worker: its deepest rank
        for (HolderId h : fleet.infos[c.index]->holders) deepest = std::max(deepest, depth_of(h));
        c.matched_blocks = deepest;
      }
      t.deepest_any = std::max(t.deepest_any, c.matched_blocks);
      if (!c.overloaded) {
        if (c.matched_blocks > t.deepest_ok) {
          t.second_ok = t.deepest_ok;
          t.deepest_ok = c.matched_blocks;
        } else if (c.matched_blocks < t.deepest_ok && c.matched_blocks > t.second_ok) {
          t.second_ok = c.matched_blocks;
        }
      }
      t.load_sum += static_cast<int64_t>(c.load);
    }
    return t;
  }

  const CacheAwareConfig config_;
  const index::Indexer* index_;
  const CostRules rules_;
  const Clock& clock_;
  PredictedCache predicted_;
  // Predictions since the last take_predictions(), deduplicated per worker.
  Mutex journal_mu_;
  absl::flat_hash_map<WorkerId, absl::flat_hash_set<SeqHash>> journal_
      KVGATE_GUARDED_BY(journal_mu_);
  size_t journal_size_ KVGATE_GUARDED_BY(journal_mu_) = 0;
};

}  // namespace

std::unique_ptr<Policy> make_cache_aware(const CacheAwareConfig& config, PolicyDeps deps) {
  return std::make_unique<CacheAwarePolicy>(config, deps);
}

}  // namespace kvgate::policy::detail
