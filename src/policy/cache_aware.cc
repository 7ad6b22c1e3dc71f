// cache_aware: affinity first (the deepest holder of the request's prefix wins), then gates.
//
//  1. Candidates: routable workers serving the model. None -> kNoWorker.
//  2. Overload: workers over the KV-usage or waiting thresholds are steered around. When every
//     candidate is over: 503 (kShed) if shedding is on, else the least-loaded one (kAllOverloaded).
//  3. Depth: the index's matched depth on any tier, per candidate: a data-parallel rank's own
//     holder, or a whole worker's deepest rank; a worker without KV events gets the approximate
//     mode's prediction instead. A holder's depth counts the blocks requests in flight there
//     were credited with and its events have not confirmed yet (policy/detail/pending_blocks.h).
//  4. Affinity: the deepest non-overloaded worker(s); among equals the least expected wait, ties
//     within tie_window_us drawn uniformly. No holder at all: least expected wait (kFreshPrefix).
//  5. Imbalance: if the winner's load exceeds the fleet mean by balance_abs_threshold and by the
//     factor balance_rel_threshold, the least-expected-wait worker takes it (kImbalanceSpill).
//  6. Wait: if the winner's expected wait exceeds the least expected wait by more than
//     wait_spill_ratio times the prefill its deeper match saves, the least-wait worker takes it
//     (kWaitSpill): a few shared blocks do not hold a request behind a long prefill. Only the
//     share of the match that outlives the queue ahead counts as saved: a queue that needs more
//     KV than the winner has free evicts the prefix before the request is admitted.
//  7. Warm-up: a share of the misses and a smaller share of the hits go to a thin worker (its
//     index well under the fleet's mean) instead, until it fills (kWarmup). The level is reused
//     for up to warmup_level_max_age (policy/detail/warmup.h).
//
// The shortcut: most requests share their deepest match with a few workers, and when those are
// fit, rules 2 and 5-7 cannot move the decision away from them. So a decision first visits only
// the workers holding the deepest match and decides among them; it gives way to the pass over the
// whole fleet (generator restored) whenever a rule could need the rest of the fleet: nobody holds
// a block, every deepest holder is overloaded or out, the winner's load could be over the fleet's
// mean by balance_abs_threshold, its wait could pay for a shallower match, the warm-up level is
// due, or a worker's depth is predicted. Either way the decision is the one the rules define
// (policy_equivalence_test checks both against the reference).
#include <algorithm>
#include <atomic>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "kvgate/core/versioned.h"
#include "policy/detail/candidates.h"
#include "policy/detail/pending_blocks.h"
#include "policy/detail/predicted_cache.h"
#include "policy/detail/simple_policies.h"
#include "policy/detail/warmup.h"

namespace kvgate::policy::detail {
namespace {

uint64_t next_instance_id() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

class CacheAwarePolicy final : public Policy {
 public:
  CacheAwarePolicy(const CacheAwareConfig& config, PolicyDeps deps)
      : initial_(config),
        tuning_(Tuning(config)),
        index_(deps.index),
        clock_(deps.clock ? *deps.clock : Clock::real()),
        warmup_(initial_, clock_, next_instance_id()),
        predicted_(config.prediction_ttl, config.prediction_capacity_blocks, clock_),
        pending_on_(config.pending_max_age.count() > 0 && deps.index != nullptr),
        pending_({.max_age = config.pending_max_age,
                  .grace = config.pending_grace,
                  .max_requests = config.pending_max_requests,
                  .capacity_blocks = config.pending_capacity_blocks,
                  .depth_levels = config.pending_depth_levels},
                 clock_) {}

  void reconfigure(const CacheAwareConfig& config) override { tuning_.publish(Tuning(config)); }

  std::string_view name() const override { return "cache_aware"; }

  // The deepest match of a holder the snapshot maps to a worker, and the deepest under it.
  struct Depths {
    uint32_t deepest = 0;
    uint32_t second = 0;
  };

  Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                  Scratch& s) override {
    const Depths depths = look_up(req, fleet, s);
    Decision d;
    if (const std::optional<Decision> quick = shortcut(req, fleet, depths, s)) {
      ++s.shortcut_decisions;
      d = *quick;
    } else {
      ++s.fleet_pass_decisions;
      d = fleet_pass(req, fleet, s);
    }
    if (s.pending_counted && d.worker >= 0) {
      d.pending_blocks =
          d.matched_blocks - std::min(d.matched_blocks, confirmed_depth(d, fleet, s));
    }
    return d;
  }

  // Rules 1-7 over every candidate.
  Decision fleet_pass(const RouteRequest& req, const workers::FleetSnapshot& fleet, Scratch& s) {
    if (collect_candidates(req, fleet, s, &rules()) == 0) {
      return {.worker = -1, .branch = Branch::kNoWorker};
    }
    auto& cands = s.candidates;
    if (std::all_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.overloaded; })) {
      if (config().shed_when_all_overloaded) return {.worker = -1, .branch = Branch::kShed};
      const int32_t i = pick_min(
          cands, [](const Candidate&) { return true; }, [](const Candidate& c) { return c.load; },
          0.0, s.rng);
      return {.worker = cands[i].index, .branch = Branch::kAllOverloaded, .rank = cands[i].rank};
    }

    // (Named, not bound: clang 14 does not let a lambda capture a structured binding.)
    const Totals totals = score(req, fleet, s);
    const uint32_t deepest_any = totals.deepest_any;
    const uint32_t deepest_ok = totals.deepest_ok;
    const auto by_wait = [&](const Candidate& c) { return expected_wait_us(c, req, config()); };
    const auto not_overloaded = [](const Candidate& c) { return !c.overloaded; };

    if (deepest_ok == 0) {
      const int32_t i = pick_min(cands, not_overloaded, by_wait, config().tie_window_us, s.rng);
      return warm_up({.worker = cands[i].index,
                      .branch = deepest_any > 0 ? Branch::kOverloadSteer : Branch::kFreshPrefix,
                      .matched_blocks = 0,
                      .rank = cands[i].rank},
                     req, fleet, s);
    }
    int32_t i = pick_min(
        cands, [&](const Candidate& c) { return !c.overloaded && c.matched_blocks == deepest_ok; },
        by_wait, config().tie_window_us, s.rng);
    Branch branch = deepest_any > deepest_ok ? Branch::kOverloadSteer : Branch::kAffinity;

    const double mean = static_cast<double>(totals.load_sum) / static_cast<double>(cands.size());
    const double load = cands[i].load;
    if (load > mean + config().balance_abs_threshold &&
        load > mean * config().balance_rel_threshold) {
      const int32_t j = pick_min(cands, not_overloaded, by_wait, config().tie_window_us, s.rng);
      if (cands[j].load < load) {
        i = j;
        branch = Branch::kImbalanceSpill;
      }
    }
    // (Only a candidate shallower than the winner can gain, by at most the winner's wait: the
    // pass over the fleet runs only when the wait could pay for the next depth's loss.)
    if (branch != Branch::kImbalanceSpill && config().wait_spill_ratio > 0) {
      const double winner_wait_us = by_wait(cands[i]);
      const double kept = surviving_share(cands[i], req);
      if (winner_wait_us > (config().wait_spill_ratio + 1) *
                               saved_prefill_us(cands[i], totals.second_ok, kept, req)) {
        const int32_t j = pick_min(cands, not_overloaded, by_wait, config().tie_window_us, s.rng);
        const double gain_us = winner_wait_us - by_wait(cands[j]);
        if (gain_us > config().tie_window_us &&
            gain_us > config().wait_spill_ratio *
                          saved_prefill_us(cands[i], weighted_blocks(cands[j]), kept, req)) {
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

  uint64_t on_dispatch(const workers::Worker& worker, const RouteRequest& req,
                       int32_t rank) override {
    if (req.chain.empty()) return 0;
    const auto info = worker.info();
    if (!info->holders.empty()) return credit_pending(worker, *info, req, rank);
    predicted_.record(worker.id(), req.chain);
    if (!initial_.journal_predictions) return 0;
    MutexLock l(&journal_mu_);
    if (journal_size_ + req.chain.size() > initial_.prediction_journal_blocks) return 0;
    auto& blocks = journal_[worker.id()];
    for (SeqHash h : req.chain) journal_size_ += blocks.insert(h).second ? 1 : 0;
    return 0;
  }

  void on_prefilled(uint64_t ticket) override { pending_.prefilled(ticket); }

  void on_request_end(const workers::Worker& /*worker*/, workers::Outcome outcome,
                      uint64_t ticket) override {
    if (outcome != workers::Outcome::kSuccess) pending_.withdraw(ticket);
  }

  PendingStats pending_stats() const override { return pending_.stats(); }

  void on_worker_removed(WorkerId worker) override {
    predicted_.forget(worker);
    pending_.forget(worker);
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
  // The holder a dispatch pinned to `rank` (or to a worker of one rank) computes the prompt on,
  // credited with the chain; 0 when it cannot be told (several ranks, none pinned).
  uint64_t credit_pending(const workers::Worker& worker, const workers::WorkerInfo& info,
                          const RouteRequest& req, int32_t rank) {
    if (!pending_on_) return 0;
    HolderId holder;
    if (rank >= 0) {
      holder = holder_of_rank(info, static_cast<uint32_t>(rank));
    } else if (info.holders.size() == 1) {
      holder = info.holders[0];
    }
    return holder.valid() ? pending_.add(worker.id(), holder, req.chain) : 0;
  }

  // The depth of the decision's worker (or rank) the index confirms, without pending credits.
  static uint32_t confirmed_depth(const Decision& d, const workers::FleetSnapshot& fleet,
                                  const Scratch& s) {
    const auto& info = *fleet.infos[d.worker];
    if (info.holders.empty()) return d.matched_blocks;  // a prediction of its own kind
    return depth_in(s.confirmed_matches, info, d.rank);
  }

  // Rule 7 after a pass over the fleet: the level summed again if due, then over every candidate.
  Decision warm_up(Decision d, const RouteRequest& req, const workers::FleetSnapshot& fleet,
                   Scratch& s) const {
    if (!warmup_.enabled()) return d;
    const WarmupRule::Level* fresh = warmup_.fresh_level(s, req, fleet);
    const WarmupRule::Level& level =
        fresh != nullptr ? *fresh : warmup_.sum_level(s, s.candidates, req, fleet);
    if (!warmup_.roll(level, d, s.rng)) return d;
    return divert_to_thin(d, s.candidates, level, req, fleet, s);
  }

  // Rule 7's pick once its roll diverts: the thin candidate of `cands` with the least expected
  // wait instead of `d`, or `d` if none is thin.
  Decision divert_to_thin(const Decision& d, std::span<const Candidate> cands,
                          const WarmupRule::Level& level, const RouteRequest& req,
                          const workers::FleetSnapshot& fleet, Scratch& s) const {
    const int32_t j = pick_min(
        cands, [&](const Candidate& c) { return warmup_.thin(c, level, fleet); },
        [&](const Candidate& c) { return expected_wait_us(c, req, config()); },
        config().tie_window_us, s.rng);
    return WarmupRule::divert(d, cands, j, fleet);
  }

  // The decision among the holders of the deepest match, or nothing when a rule could need the
  // rest of the fleet (see the file's header). Requires look_up() first.
  std::optional<Decision> shortcut(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                                   const Depths& depths, Scratch& s) const {
    if (req.explain || index_ == nullptr || req.chain.empty() || !req.exclude.empty() ||
        fleet.workers_without_events > 0) {
      return std::nullopt;
    }
    const WarmupRule::Level* level = nullptr;
    if (warmup_.enabled()) {
      level = warmup_.fresh_level(s, req, fleet);
      if (level == nullptr) return std::nullopt;  // due: summed by the pass over the fleet
    }
    // (No candidate's depth is between the deepest match and the next under it.)
    const uint32_t deepest = depths.deepest;
    const uint32_t second = depths.second;
    if (deepest == 0) return std::nullopt;
    // Room for the group and the thin workers' candidates after it, so that neither moves.
    auto& slots = s.candidate_slots;
    const size_t most = req.dp_aware ? fleet.max_candidates : fleet.workers.size();
    if (slots.size() < 2 * most) slots.resize(2 * most);
    auto& bits = s.worker_bits;
    bits.assign((fleet.workers.size() + 63) / 64, 0);
    for (const index::HolderMatch& m : s.matches) {
      const int32_t w = fleet.worker_index_of(m.holder);
      if (w >= 0 && m.any_depth == deepest) bits[w >> 6] |= uint64_t{1} << (w & 63);
    }
    // Their candidates (a data-parallel sibling may hold less than the deepest), in fleet order.
    const size_t k = collect_candidates_of(bits, req, fleet, rules(), slots, 0);
    size_t fit = 0;
    for (size_t x = 0; x < k; ++x) {
      set_depth(slots[x], req, fleet, s);
      fit += !slots[x].overloaded && slots[x].matched_blocks == deepest ? 1 : 0;
    }
    if (fit == 0) return std::nullopt;
    s.candidates = std::span(slots.data(), k);
    const auto by_wait = [&](const Candidate& c) { return expected_wait_us(c, req, config()); };
    if (fit > 1) s.rng_before_shortcut = s.rng;  // ties draw
    const Candidate& win = s.candidates[pick_min(
        s.candidates,
        [&](const Candidate& c) { return !c.overloaded && c.matched_blocks == deepest; }, by_wait,
        config().tie_window_us, s.rng)];
    // Rule 5 could fire only over the threshold (the mean load is never negative); rule 6 only if
    // the wait could pay for the next depth down.
    if (win.load > config().balance_abs_threshold ||
        (config().wait_spill_ratio > 0 &&
         by_wait(win) > (config().wait_spill_ratio + 1) *
                            saved_prefill_us(win, second, surviving_share(win, req), req))) {
      if (fit > 1) s.rng = s.rng_before_shortcut;
      return std::nullopt;
    }
    const Decision d{.worker = win.index,
                     .branch = Branch::kAffinity,
                     .matched_blocks = deepest,
                     .rank = win.rank};
    if (level == nullptr || !warmup_.roll(*level, d, s.rng)) return d;
    // Rule 7 over the thin workers' candidates only: the others are never thin.
    const size_t end = collect_candidates_of(level->thin, req, fleet, rules(), slots, k);
    for (size_t x = k; x < end; ++x) set_depth(slots[x], req, fleet, s);
    return divert_to_thin(d, std::span<const Candidate>(slots.data() + k, end - k), *level, req,
                          fleet, s);
  }

  // The prefill time c's match (weighted_blocks()) saves over one worth `shallower` blocks, at
  // c's prefill rate, when only the share `kept` of c's lasts until the request is admitted.
  static double saved_prefill_us(const Candidate& c, double shallower, double kept,
                                 const RouteRequest& req) {
    const double blocks = std::max(0.0, kept * weighted_blocks(c) - shallower);
    return blocks * req.block_size / static_cast<double>(c.prefill_rate) * 1e6;
  }

  // The share of c's match that outlives the queue ahead of the request there. An engine evicts
  // the least recently used free blocks first, and a prefix a conversation just used is among
  // the newest: the queued prompts take the pool's free tokens oldest first and reach the prefix
  // only past (free - prefix). A pool of unknown size keeps everything.
  double surviving_share(const Candidate& c, const RouteRequest& req) const {
    const double cached = static_cast<double>(c.matched_blocks) * req.block_size;
    if (c.free_kv_tokens == Candidate::kUnknownFree || cached == 0) return 1.0;
    const double left = static_cast<double>(c.free_kv_tokens) - queued_tokens(c, config());
    return std::clamp(left / cached, 0.0, 1.0);
  }

  struct Totals {
    uint32_t deepest_any = 0;  // the deepest match of any candidate
    uint32_t deepest_ok = 0;   // of a candidate not overloaded
    uint32_t second_ok = 0;    // the deepest match under deepest_ok of a candidate not overloaded
    int64_t load_sum = 0;  // loads are whole numbers: summed exactly, without a chain of FP adds
  };
  // The index's depth per holder of the request's chain, in s.depth_by_holder. (Holders the
  // snapshot does not map to a worker, those of removed workers, are no candidate's.)
  Depths look_up(const RouteRequest& req, const workers::FleetSnapshot& fleet, Scratch& s) const {
    auto& depth = s.depth_by_holder;
    auto& device = s.device_depth_by_holder;  // (written where depth is, read only there)
    depth.clear();
    s.matches.clear();
    Depths d;
    if (req.chain.empty()) return d;
    depth.resize(fleet.worker_of_holder.size(), 0);
    if (device.size() < depth.size()) device.resize(depth.size());
    s.pending_counted = false;
    if (index_ == nullptr) return d;
    index_->lookup(req.chain, s.matches);
    if (pending_on_ && !pending_.empty()) count_pending(req, s);
    for (const auto& m : s.matches) {
      if (!m.holder.valid() || m.holder.value() >= depth.size()) continue;
      depth[m.holder.value()] = m.any_depth;
      device[m.holder.value()] = m.device_depth;
      if (fleet.worker_of_holder[m.holder.value()] < 0) continue;
      if (m.any_depth > d.deepest) {
        d.second = d.deepest;
        d.deepest = m.any_depth;
      } else if (m.any_depth < d.deepest && m.any_depth > d.second) {
        d.second = m.any_depth;
      }
    }
    return d;
  }

  // Adds the pending credits to the index's matches (a holder's depth the deeper of both; a
  // credit's blocks are computed on the device); the confirmed ones are kept in
  // s.confirmed_matches.
  void count_pending(const RouteRequest& req, Scratch& s) const {
    s.pending_matches.clear();
    pending_.lookup(req.chain, s.pending_matches);
    if (s.pending_matches.empty()) return;
    s.pending_counted = true;
    s.confirmed_matches.assign(s.matches.begin(), s.matches.end());
    // Each credit finds its holder's match by id (hundreds of credits of a shared prompt against
    // hundreds of matches: a search per credit was quadratic).
    auto& slot = s.match_of_holder;
    const auto mark = [&](HolderId h, size_t i) {
      if (h.value() >= slot.size()) slot.resize(h.value() + 1, 0);
      slot[h.value()] = static_cast<uint32_t>(i + 1);
    };
    for (size_t i = 0; i < s.matches.size(); ++i) mark(s.matches[i].holder, i);
    for (const index::HolderMatch& p : s.pending_matches) {
      const uint32_t at = p.holder.value() < slot.size() ? slot[p.holder.value()] : 0;
      if (at == 0) {
        mark(p.holder, s.matches.size());
        s.matches.push_back(
            {.holder = p.holder, .device_depth = p.any_depth, .any_depth = p.any_depth});
      } else {
        index::HolderMatch& m = s.matches[at - 1];
        m.any_depth = std::max(m.any_depth, p.any_depth);
        m.device_depth = std::max(m.device_depth, p.any_depth);
      }
    }
    for (const index::HolderMatch& m : s.matches) slot[m.holder.value()] = 0;
  }

  // A candidate's matched depth and the device's part of it: a rank's are its own holder's, a
  // whole worker's its deepest rank's (the most on the device among equals), a worker without KV
  // events gets the prediction (as if on the device).
  [[gnu::always_inline]] void set_depth(Candidate& c, const RouteRequest& req,
                                        const workers::FleetSnapshot& fleet,
                                        const Scratch& s) const {
    const auto& depth = s.depth_by_holder;
    const auto& device = s.device_depth_by_holder;
    // (Kept in locals and stored once: the candidate's fields may alias the tables.)
    uint32_t any = 0, dev = 0;
    const auto take = [&](HolderId h) {
      if (!h.valid() || h.value() >= depth.size()) return;
      const uint32_t a = depth[h.value()];
      if (a == 0) return;  // (device[] holds this decision's figure only where depth[] does)
      const uint32_t d = device[h.value()];
      if (a > any || (a == any && d > dev)) {
        any = a;
        dev = d;
      }
    };
    if (req.chain.empty()) {
      // nothing matched
    } else if (!c.has_events) {
      any = dev = predicted_.depth(fleet.workers[c.index]->id(), req.chain);
    } else if (c.rank >= 0) {
      take(c.holder);
    } else if (const HolderId only = fleet.routes[c.index].only_holder; only.valid()) {
      take(only);
    } else {
      for (HolderId h : fleet.infos[c.index]->holders) take(h);
    }
    c.matched_blocks = any;
    c.device_blocks = dev;
  }

  // Each candidate's matched depth, in one pass with the totals the rules need.
  Totals score(const RouteRequest& req, const workers::FleetSnapshot& fleet, Scratch& s) const {
    Totals t;
    for (auto& c : s.candidates) {
      set_depth(c, req, fleet, s);
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

  // The figures a reload may change, with the overload rule resolved from them; a decision reads
  // them through config() and rules(), which may see a reload's version midway (each figure is
  // whole).
  struct Tuning {
    explicit Tuning(const CacheAwareConfig& c) : config(c), rules(c) {}
    CacheAwareConfig config;
    CostRules rules;
  };
  const CacheAwareConfig& config() const { return tuning_.get().config; }
  const CostRules& rules() const { return tuning_.get().rules; }

  const CacheAwareConfig initial_;  // the warm-up rule's and the predictions' figures
  Versioned<Tuning> tuning_;
  const index::Indexer* index_;
  const Clock& clock_;
  const WarmupRule warmup_;
  PredictedCache predicted_;
  const bool pending_on_;
  PendingBlocks pending_;
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
