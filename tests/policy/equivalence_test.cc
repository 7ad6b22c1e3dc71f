// cache_aware against its reference implementation (reference_cache_aware.h) on random fleets:
// every decision the same, random draws included.
//
// Each seed builds the same random fleet twice (registry, live figures, trackers and index, all
// from the seed), one for the policy and one for the reference, since decisions write to the
// workers they read (the warm-up rule's counters) and each side must see only its own writes.
// Both then take the same few hundred random requests, their generators seeded alike; between
// requests both fleets go through the same dispatches, request ends, load changes and clock
// steps. The seeds cover every branch: the run fails if one was never taken.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/clock.h"
#include "kvgate/index/indexer.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/registry.h"
#include "policy/reference_cache_aware.h"
#include "support/sanitizer.h"

namespace kvgate::policy {
namespace {

constexpr uint32_t kBlockSize = 16;
// Fewer under a sanitizer, where each decision costs some 10x: enough for every coverage floor
// below (the shortcut's is the tightest: about 780 of its 500 there).
constexpr int kSeeds = testing_support::kUnderSanitizer ? 160 : 240;
constexpr int kRequestsPerSeed = 250;
const std::array<std::string, 3> kModels = {"llama", "qwen", "mistral"};
constexpr std::string_view kModelNobodyServes = "phi";
constexpr std::array<double, 5> kEdgeUsages = {0.25, 0.3, 0.5, 0.7, 0.8};

bool chance(std::mt19937_64& rng, double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}
// Uniform in [lo, hi].
uint64_t between(std::mt19937_64& rng, uint64_t lo, uint64_t hi) {
  return lo + rng() % (hi - lo + 1);
}

struct Chain {
  std::vector<LocalHash> local;
  std::vector<SeqHash> seq;
};

// `base` (its first `keep` blocks) continued by `blocks` random ones, hashed as the router does.
Chain extend(const Chain& base, size_t keep, size_t blocks, std::mt19937_64& rng) {
  Chain c;
  c.local.assign(base.local.begin(), base.local.begin() + keep);
  c.seq.assign(base.seq.begin(), base.seq.begin() + keep);
  const BlockHasher hasher;
  for (size_t i = 0; i < blocks; ++i) {
    const LocalHash l = rng();
    c.seq.push_back(c.seq.empty() ? l : hasher.chain(c.seq.back(), l));
    c.local.push_back(l);
  }
  return c;
}

// An engine names a block by its own hash: the sequence hash salted by the holder.
index::EngineHash engine_hash(HolderId holder, SeqHash seq) {
  return seq ^ (uint64_t{holder.value()} * 0x9e3779b97f4a7c15ULL);
}

// The first `blocks` blocks of `chain` stored on `holder` (one event from position 0).
void store(index::Indexer& idx, HolderId holder, const Chain& chain, size_t blocks,
           index::Tier tier) {
  std::vector<index::EngineHash> engine(blocks);
  for (size_t i = 0; i < blocks; ++i) engine[i] = engine_hash(holder, chain.seq[i]);
  const index::Event e{.kind = index::EventKind::kStored,
                       .tier = tier,
                       .engine_hashes = engine,
                       .local_hashes = std::span(chain.local.data(), blocks)};
  idx.apply(holder, std::span(&e, 1));
}

void remove_block(index::Indexer& idx, HolderId holder, SeqHash seq, index::Tier tier) {
  const index::EngineHash engine = engine_hash(holder, seq);
  const index::Event e{
      .kind = index::EventKind::kRemoved, .tier = tier, .engine_hashes = std::span(&engine, 1)};
  idx.apply(holder, std::span(&e, 1));
}

workers::EngineLoad random_engine_load(std::mt19937_64& rng) {
  workers::EngineLoad l;
  l.running = chance(rng, 0.3) ? 0 : static_cast<uint32_t>(between(rng, 0, 24));
  l.waiting = chance(rng, 0.5) ? 0 : static_cast<uint32_t>(between(rng, 0, 10));
  // Usages right at the thresholds random_config() picks, now and then: the comparison's edge.
  l.kv_usage = chance(rng, 0.3)    ? 0.0
               : chance(rng, 0.15) ? kEdgeUsages[rng() % kEdgeUsages.size()]
                                   : std::uniform_real_distribution<double>(0, 1)(rng);
  l.queued_prefill_tokens = chance(rng, 0.6) ? 0 : between(rng, 0, 20000);
  return l;
}

// Block counts for the warm-up rule: a thin worker holds a few, the others a few hundred.
// Tiers other than the device a worker's events store on (index::tier_bit each).
uint8_t random_offload_tiers(std::mt19937_64& rng) {
  return static_cast<uint8_t>(between(rng, 0, 15) & ~1);
}

// A streamed request's first token after some prompt tokens: the worker learns a rate.
void teach_prefill_rate(workers::Worker& w, std::mt19937_64& rng) {
  w.note_prefill(between(rng, 1, 200'000), std::chrono::microseconds(between(rng, 1, 20'000'000)));
}

uint64_t random_index_blocks(std::mt19937_64& rng) {
  return chance(rng, 0.25) ? between(rng, 0, 12) : between(rng, 20, 3000);
}

std::optional<DpRank> random_rank(std::mt19937_64& rng, uint32_t dp_size) {
  if (chance(rng, 0.4)) return std::nullopt;
  return static_cast<DpRank>(rng() % dp_size);
}

// A fleet, its trackers and its index, all drawn from one seed: two built from the same seed are
// alike in everything a decision reads.
struct RandomFleet {
  explicit RandomFleet(uint64_t seed);

  ManualClock clock;
  workers::WorkerRegistry registry{{}, clock};
  std::unique_ptr<index::Indexer> index;
  std::shared_ptr<const workers::FleetSnapshot> fleet;  // the snapshot every decision reads
  std::vector<WorkerId> removed;                        // workers added, then removed
  std::vector<Chain> chains;                            // what the index was fed
};

RandomFleet::RandomFleet(uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Fleet sizes: mostly small (where every worker can be overloaded or vetoed at once), some up
  // to a few hundred.
  const uint32_t size_class = static_cast<uint32_t>(rng() % 10);
  const uint32_t n = size_class < 4   ? static_cast<uint32_t>(between(rng, 1, 6))
                     : size_class < 7 ? static_cast<uint32_t>(between(rng, 7, 40))
                     : size_class < 9 ? static_cast<uint32_t>(between(rng, 41, 120))
                                      : static_cast<uint32_t>(between(rng, 121, 300));
  // Holder ids with gaps; some ids only ever appear in the index (a removed worker's, or past
  // every worker's).
  uint32_t next_holder = static_cast<uint32_t>(rng() % 3);
  std::vector<HolderId> all_holders;
  // Half the fleets have KV events on every worker: cache_aware's shortcut applies only there.
  const double without_events = chance(rng, 0.5) ? 0.0 : 0.25;
  for (uint32_t i = 0; i < n; ++i) {
    workers::WorkerInfo info;
    if (!chance(rng, 0.3)) {
      const uint64_t mask = between(rng, 1, 7);
      for (size_t m = 0; m < kModels.size(); ++m) {
        if (mask & (uint64_t{1} << m)) info.models.push_back(kModels[m]);
      }
    }
    info.dp_size = chance(rng, 0.5) ? 1 : static_cast<uint32_t>(between(rng, 2, 4));
    info.block_size = kBlockSize;
    // KV pools small enough that queues outgrow what they have free (0: not said).
    info.kv_blocks = chance(rng, 0.3) ? 0 : between(rng, 4, 1500);
    info.discovered = true;
    if (!chance(rng, without_events)) {  // else no KV events: the approximate mode
      for (uint32_t r = 0; r < info.dp_size; ++r) {
        if (info.dp_size > 1 && chance(rng, 0.1)) continue;  // a rank without a subscription
        next_holder += chance(rng, 0.2) ? 2 : 1;
        info.holders.push_back(HolderId(next_holder));
        info.holder_ranks.push_back(r);
        all_holders.push_back(HolderId(next_holder));
      }
    }
    auto added = registry.add("http://10.0.0.1:" + std::to_string(10000 + i), info);
    EXPECT_TRUE(added.ok());
  }
  for (uint32_t k = 0; k < 3; ++k) all_holders.push_back(HolderId(next_holder + 1 + k));
  if (n > 1 && chance(rng, 0.2)) {
    const uint32_t count = static_cast<uint32_t>(between(rng, 1, std::min<uint32_t>(3, n - 1)));
    for (uint32_t k = 0; k < count; ++k) {
      const auto snap = registry.snapshot();
      const auto& victim = snap->workers[rng() % snap->workers.size()];
      removed.push_back(victim->id());
      registry.remove(victim->url());
    }
  }
  fleet = registry.snapshot();
  const auto& ws = fleet->workers;

  // Live figures.
  for (size_t i = 0; i < ws.size(); ++i) {
    workers::Worker& w = *ws[i];
    const uint32_t dp_size = fleet->infos[i]->dp_size;
    const double health = std::uniform_real_distribution<double>(0, 1)(rng);
    if (health < 0.06) {
      w.health().record(true);
      for (int k = 0; k < 3; ++k) w.health().record(false);  // probed unhealthy
    } else if (health < 0.08) {
      w.health().force(workers::Health::kUnhealthy);
    } else if (health < 0.10) {
      // Never probed: not routable yet.
    } else if (health < 0.3) {
      w.health().force(workers::Health::kHealthy);  // health checks off
    } else {
      w.health().record(true);
    }
    if (chance(rng, 0.8)) w.set_engine_load(random_engine_load(rng), clock.now());
    for (uint32_t r = 0; r < dp_size; ++r) {
      if (chance(rng, 0.8)) w.set_rank_load(r, random_engine_load(rng));
      if (chance(rng, 0.12)) w.set_rank_degraded(r, true);
      w.set_index_blocks(r, random_index_blocks(rng));
    }
    if (chance(rng, 0.5)) w.set_offload_tiers(random_offload_tiers(rng));
    if (chance(rng, 0.5)) teach_prefill_rate(w, rng);
    if (chance(rng, 0.1)) w.set_pushed_load(0, random_engine_load(rng), clock.now());
    for (uint64_t k = between(rng, 0, 4); k > 0; --k) {
      w.begin_request(random_rank(rng, dp_size),
                      chance(rng, 0.5) ? 0 : static_cast<uint32_t>(between(rng, 1, 8000)));
    }
    if (chance(rng, 0.3)) {
      std::vector<std::pair<DpRank, int32_t>> ranks;
      for (uint32_t r = 0; r < dp_size; ++r) {
        if (chance(rng, 0.5)) ranks.emplace_back(r, static_cast<int32_t>(between(rng, 0, 6)));
      }
      w.set_peer_load(static_cast<int32_t>(between(rng, 0, 10)), ranks, between(rng, 0, 30000));
    }
    for (uint64_t k = chance(rng, 0.2) ? between(rng, 1, 6) : 0; k > 0; --k) {
      w.count_warmup_diversion();
    }
  }

  // Breakers and liveness, on the clock: some breakers opened long enough ago to let a trial
  // through (one took it: half-open), some just opened; then workers that stopped answering
  // connections or froze with streams open, vetoed once the evaluator sees it. Now and then the
  // whole fleet is vetoed.
  const auto fail = [](workers::Worker& w, int times) {
    for (int k = 0; k < times; ++k) w.breaker().record(workers::Outcome::kServerError);
  };
  for (const auto& w : ws) {
    if (chance(rng, 0.06)) fail(*w, 5);
  }
  clock.advance(std::chrono::seconds(6));
  for (const auto& w : ws) {
    if (w->breaker().state() == workers::BreakerState::kOpen && chance(rng, 0.4)) {
      w->breaker().try_begin_trial();
    }
    if (chance(rng, 0.06)) fail(*w, 5);
    if (chance(rng, 0.05)) fail(*w, 3);  // not enough to open
  }
  const bool veto_everyone = chance(rng, 0.12);
  for (const auto& w : ws) {
    if (veto_everyone || chance(rng, 0.08)) {
      w->liveness().note_connect_failed();
    } else if (chance(rng, 0.06)) {
      w->liveness().note_stream_started();
    }
  }
  clock.advance(std::chrono::milliseconds(3500));
  for (const auto& w : ws) w->liveness().evaluate();

  // The index: chains sharing prefixes (system prompts, conversations that continue one), each
  // stored whole or in part on a few holders, on the device or the host tier; now and then a
  // block removed from the middle of a holder's copy.
  index = index::make_synchronized(std::move(*index::make_indexer(index::IndexKind::kChain)));
  const size_t chain_count = between(rng, 4, 12 + 2 * all_holders.size());
  for (size_t c = 0; c < chain_count; ++c) {
    if (!chains.empty() && chance(rng, 0.5)) {
      const Chain& base = chains[rng() % chains.size()];
      chains.push_back(extend(base, between(rng, 1, base.seq.size()), between(rng, 1, 24), rng));
    } else {
      chains.push_back(extend({}, 0, between(rng, 1, 40), rng));
    }
    const Chain& chain = chains.back();
    for (uint64_t k = between(rng, 1, 4); k > 0; --k) {
      const HolderId holder = all_holders[rng() % all_holders.size()];
      const auto tier = chance(rng, 0.2) ? index::Tier::kHost : index::Tier::kDevice;
      const size_t blocks = chance(rng, 0.6) ? chain.seq.size() : between(rng, 1, chain.seq.size());
      store(*index, holder, chain, blocks, tier);
      if (blocks > 2 && chance(rng, 0.05)) {
        remove_block(*index, holder, chain.seq[between(rng, 1, blocks - 2)], tier);
      }
    }
  }
}

CacheAwareConfig random_config(std::mt19937_64& rng) {
  CacheAwareConfig c;
  if (chance(rng, 0.4)) {  // low thresholds: steering, and every candidate overloaded at once
    c.overload.token_usage = chance(rng, 0.5)
                                 ? kEdgeUsages[rng() % kEdgeUsages.size()]
                                 : std::uniform_real_distribution<double>(0.2, 0.7)(rng);
    c.overload.waiting_requests = static_cast<uint32_t>(between(rng, 1, 5));
  }
  if (chance(rng, 0.03)) c.overload.token_usage = chance(rng, 0.5) ? 0.0 : 1.0;
  if (chance(rng, 0.03)) c.overload.waiting_requests = 0;
  if (chance(rng, 0.1)) c.overload.token_usage.reset();
  if (chance(rng, 0.1)) c.overload.waiting_requests.reset();
  if (chance(rng, 0.3)) c.overload.in_flight_requests = static_cast<uint32_t>(between(rng, 0, 4));
  c.shed_when_all_overloaded = chance(rng, 0.3);
  if (chance(rng, 0.4)) {  // small balance thresholds: imbalance spills
    c.balance_abs_threshold = static_cast<double>(between(rng, 0, 4));
    c.balance_rel_threshold = std::uniform_real_distribution<double>(1.0, 1.5)(rng);
  }
  if (chance(rng, 0.5)) {  // warm-up tuned to fire often
    c.warmup_min_mean_blocks = between(rng, 0, 16);
    c.warmup_miss_share = chance(rng, 0.5) ? 1.0 : 0.5;
    c.warmup_hit_share = chance(rng, 0.5) ? 1.0 : 0.5;
    if (chance(rng, 0.5)) c.warmup_max_diversions = between(rng, 1, 8);
  }
  if (chance(rng, 0.1)) {
    c.warmup_thin_ratio = 0;
  } else if (chance(rng, 0.3)) {
    c.warmup_thin_ratio = std::uniform_real_distribution<double>(0.1, 0.9)(rng);
  }
  const double age = std::uniform_real_distribution<double>(0, 1)(rng);
  c.warmup_level_max_age = age < 0.35  ? Duration::zero()
                           : age < 0.7 ? std::chrono::milliseconds(between(rng, 1, 3000))
                                       : std::chrono::hours(1);
  const double window = std::uniform_real_distribution<double>(0, 1)(rng);
  c.tie_window_us = window < 0.3 ? 0.0 : window < 0.5 ? 1.0 : window < 0.75 ? 1e6 : 200.0;
  if (chance(rng, 0.3)) {
    c.prefill_tokens_per_second = static_cast<double>(between(rng, 1000, 50000));
    c.assumed_queued_prompt_tokens = static_cast<double>(between(rng, 0, 4096));
  }
  if (chance(rng, 0.3)) c.wait_spill_ratio = chance(rng, 0.5) ? 0.0 : 2000.0;  // rare or off
  if (chance(rng, 0.25)) c.prediction_ttl = std::chrono::seconds(between(rng, 1, 5));
  if (chance(rng, 0.2)) c.prediction_capacity_blocks = between(rng, 16, 256);
  if (chance(rng, 0.2)) c.pending_max_age = Duration::zero();
  if (chance(rng, 0.3)) c.pending_max_age = std::chrono::milliseconds(between(rng, 1, 4000));
  if (chance(rng, 0.3)) c.pending_grace = std::chrono::milliseconds(between(rng, 0, 2000));
  if (chance(rng, 0.2)) c.pending_max_requests = static_cast<uint32_t>(between(rng, 1, 8));
  if (chance(rng, 0.2)) c.pending_capacity_blocks = between(rng, 0, 64);
  if (chance(rng, 0.3)) c.pending_depth_levels = static_cast<uint32_t>(between(rng, 1, 2));
  if (chance(rng, 0.2)) c.tier_weights = {1, 1, 1, 1};  // tier-blind
  c.measured_prefill_rate = chance(rng, 0.5);
  if (chance(rng, 0.4)) {
    for (size_t t = 1; t < index::kTierCount; ++t) {
      c.tier_weights[t] = std::uniform_real_distribution<double>(0, 1)(rng);
    }
  }
  return c;
}

std::string describe(const CacheAwareConfig& c) {
  std::ostringstream s;
  s << "overload{token_usage="
    << (c.overload.token_usage ? std::to_string(*c.overload.token_usage) : "off") << " waiting="
    << (c.overload.waiting_requests ? std::to_string(*c.overload.waiting_requests) : "off")
    << " in_flight="
    << (c.overload.in_flight_requests ? std::to_string(*c.overload.in_flight_requests) : "off")
    << "} shed=" << c.shed_when_all_overloaded << " balance=" << c.balance_abs_threshold << "/"
    << c.balance_rel_threshold << " warmup{ratio=" << c.warmup_thin_ratio
    << " min_mean=" << c.warmup_min_mean_blocks << " miss=" << c.warmup_miss_share
    << " hit=" << c.warmup_hit_share << " max=" << c.warmup_max_diversions
    << " max_age_ms=" << std::chrono::duration<double, std::milli>(c.warmup_level_max_age).count()
    << "} tie_window_us=" << c.tie_window_us << " prefill_tps=" << c.prefill_tokens_per_second
    << " assumed_queued=" << c.assumed_queued_prompt_tokens
    << " ttl_s=" << std::chrono::duration<double>(c.prediction_ttl).count()
    << " capacity=" << c.prediction_capacity_blocks << " tier_weights=" << c.tier_weights[0] << "/"
    << c.tier_weights[1] << "/" << c.tier_weights[2] << "/" << c.tier_weights[3];
  return s.str();
}

std::string describe(const RouteRequest& r) {
  std::ostringstream s;
  s << "chain=" << r.chain.size() << " blocks, prompt_tokens=" << r.prompt_tokens
    << " block_size=" << r.block_size << " model='" << r.model << "' dp_aware=" << r.dp_aware
    << " exclude=[";
  for (WorkerId id : r.exclude) s << " " << id.value();
  s << " ]";
  return s.str();
}

std::string describe(const Decision& d) {
  std::ostringstream s;
  s << branch_name(d.branch) << " worker=" << d.worker << " rank=" << d.rank
    << " matched_blocks=" << d.matched_blocks;
  return s.str();
}

bool same(const Decision& a, const Decision& b) {
  return a.worker == b.worker && a.branch == b.branch && a.matched_blocks == b.matched_blocks &&
         a.rank == b.rank;
}

// A request the fleets took and have not ended.
struct Outstanding {
  int32_t worker = 0;
  std::optional<DpRank> rank;
  uint32_t prompt_tokens = 0;
  uint64_t ticket = 0;  // the policies' blocks-in-flight credit
};

// Something the control path or the engines change between two requests, drawn from `seed` so
// that both fleets get the same change.
void change_fleet(RandomFleet& f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto& ws = f.fleet->workers;
  const size_t i = rng() % ws.size();
  workers::Worker& w = *ws[i];
  const uint32_t dp_size = f.fleet->infos[i]->dp_size;
  const DpRank rank = static_cast<DpRank>(rng() % dp_size);
  switch (rng() % 6) {
    case 0:
      w.set_engine_load(random_engine_load(rng), f.clock.now());
      break;
    case 1:
      w.set_rank_load(rank, random_engine_load(rng));
      break;
    case 2:
      w.set_index_blocks(rank, random_index_blocks(rng));
      if (chance(rng, 0.3)) w.set_offload_tiers(random_offload_tiers(rng));
      if (chance(rng, 0.3)) teach_prefill_rate(w, rng);
      break;
    case 3:
      w.set_rank_degraded(rank, !w.rank_degraded(rank));
      break;
    case 4:
      w.set_peer_load(static_cast<int32_t>(between(rng, 0, 8)),
                      {{rank, static_cast<int32_t>(between(rng, 0, 4))}}, between(rng, 0, 20000));
      break;
    case 5:  // a vetoed worker shows life again, or a live one is found silent
      if (w.vetoed()) {
        w.liveness().note_progress();
      } else {
        w.liveness().note_connect_failed();
      }
      w.liveness().evaluate();
      break;
  }
}

struct SeedResult {
  int decisions = 0;
  bool mismatch = false;
};

// What the compared decisions went through, so that a change to the generators that stops
// reaching a case fails instead of passing vacuously.
struct Coverage {
  std::array<int, static_cast<size_t>(Branch::kCount)> branches{};
  int pinned_rank = 0;      // a data-parallel rank chosen
  int predicted_depth = 0;  // a worker without KV holders chosen for its predicted prefix
  int pending_depth = 0;    // a worker chosen with blocks in flight counted in its depth
  int vetoed_pick = 0;      // a vetoed worker chosen: every candidate was vetoed
  int shortcut = 0;         // decided among the deepest holders only
  int shortcut_warmup = 0;  // of which diverted to a thin worker
  int fleet_pass = 0;       // decided by a pass over the whole fleet
};

// `scratch` is shared by every seed, as an executor thread's is by every decision: fleets of
// other sizes leave their candidates in its slots.
SeedResult run_seed(uint64_t seed, Scratch& scratch, Coverage& coverage, bool report) {
  SeedResult result;
  RandomFleet fast_fleet(seed);
  RandomFleet ref_fleet(seed);
  std::mt19937_64 config_rng(seed * 0x2545f4914f6cdd1dULL + 1);
  const CacheAwareConfig config = random_config(config_rng);

  auto made = make_policy(PolicyKind::kCacheAware, config,
                          {.index = fast_fleet.index.get(), .clock = &fast_fleet.clock});
  EXPECT_TRUE(made.ok());
  Policy& fast = **made;
  testing::ReferenceCacheAware reference(config, ref_fleet.index.get(), ref_fleet.clock);
  scratch.rng.seed(seed ^ 0xd1ce5eedULL);
  std::mt19937_64 ref_rng(seed ^ 0xd1ce5eedULL);

  // Every request's chain, kept for later requests that continue the conversation.
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + 7);
  std::deque<std::vector<SeqHash>> sent;
  std::vector<WorkerId> ids;
  for (const auto& w : fast_fleet.fleet->workers) ids.push_back(w->id());
  for (WorkerId id : fast_fleet.removed) ids.push_back(id);
  std::vector<Outstanding> outstanding;

  for (int n = 0; n < kRequestsPerSeed; ++n) {
    std::vector<SeqHash> chain;
    const double kind = std::uniform_real_distribution<double>(0, 1)(rng);
    if (kind < 0.12) {
      // Empty: a prompt shorter than a block.
    } else if (kind < 0.3) {
      chain = extend({}, 0, between(rng, 1, 30), rng).seq;
    } else if (kind < 0.5 && !sent.empty()) {
      // A conversation continues: a request sent before, and more.
      const auto& before = sent[rng() % sent.size()];
      Chain base;
      base.seq = before;
      base.local.assign(before.size(), 0);
      chain =
          extend(base, before.empty() ? 0 : between(rng, 1, before.size()), between(rng, 0, 8), rng)
              .seq;
    } else {
      const Chain& stored = fast_fleet.chains[rng() % fast_fleet.chains.size()];
      chain = extend(stored, between(rng, 1, stored.seq.size()), between(rng, 0, 8), rng).seq;
    }
    sent.push_back(std::move(chain));
    const std::vector<SeqHash>& blocks = sent.back();

    RouteRequest req;
    req.chain = blocks;
    req.block_size = blocks.empty() && chance(rng, 0.5) ? 0 : kBlockSize;
    req.prompt_tokens = static_cast<uint32_t>(blocks.size() * kBlockSize + rng() % kBlockSize);
    if (chance(rng, 0.1)) req.prompt_tokens += static_cast<uint32_t>(between(rng, 0, 4000));
    if (chance(rng, 0.03)) req.prompt_tokens = static_cast<uint32_t>(rng() % 64);
    const double model = std::uniform_real_distribution<double>(0, 1)(rng);
    req.model = model < 0.35  ? std::string_view()
                : model < 0.9 ? std::string_view(kModels[rng() % kModels.size()])
                              : kModelNobodyServes;
    req.dp_aware = chance(rng, 0.7);
    std::vector<WorkerId> exclude;
    if (chance(rng, 0.02)) {
      exclude = ids;
    } else if (chance(rng, 0.25)) {
      for (uint64_t k = between(rng, 1, 3); k > 0; --k) exclude.push_back(ids[rng() % ids.size()]);
    }
    req.exclude = exclude;

    const uint64_t shortcuts_before = scratch.shortcut_decisions;
    const Decision got = fast.select(req, *fast_fleet.fleet, scratch);
    const bool by_shortcut = scratch.shortcut_decisions > shortcuts_before;
    const Decision want = reference.select(req, *ref_fleet.fleet, ref_rng);
    ++result.decisions;
    if (!same(got, want)) {
      result.mismatch = true;
      if (report) {
        ADD_FAILURE() << "seed " << seed << ", request " << n << ": " << describe(req)
                      << "\n  fleet: " << fast_fleet.fleet->workers.size() << " workers"
                      << "\n  config: " << describe(config) << "\n  cache_aware: " << describe(got)
                      << "\n  reference:   " << describe(want);
      }
      return result;  // the fleets' states part from here on
    }
    ++coverage.branches[static_cast<size_t>(got.branch)];
    coverage.shortcut += by_shortcut ? 1 : 0;
    coverage.shortcut_warmup += by_shortcut && got.branch == Branch::kWarmup ? 1 : 0;
    coverage.fleet_pass += by_shortcut ? 0 : 1;
    if (got.worker >= 0) {
      const workers::Worker& chosen = *fast_fleet.fleet->workers[got.worker];
      coverage.pinned_rank += got.rank >= 0 ? 1 : 0;
      coverage.predicted_depth +=
          got.matched_blocks > 0 && fast_fleet.fleet->infos[got.worker]->holders.empty() ? 1 : 0;
      coverage.vetoed_pick += chosen.vetoed() ? 1 : 0;
    }

    // The request is sent: both fleets take it alike.
    if (got.worker >= 0) {
      const uint64_t ticket =
          fast.on_dispatch(*fast_fleet.fleet->workers[got.worker], req, got.rank);
      const uint64_t ref_ticket =
          reference.on_dispatch(*ref_fleet.fleet->workers[want.worker], req, want.rank);
      if (ticket != ref_ticket) {
        result.mismatch = true;
        if (report)
          ADD_FAILURE() << "seed " << seed << ", request " << n << ": credit ticket " << ticket
                        << " vs the reference's " << ref_ticket;
        return result;
      }
      coverage.pending_depth += got.pending_blocks > 0 ? 1 : 0;
      if (chance(rng, 0.5)) {
        const Outstanding o{.worker = got.worker,
                            .rank = got.rank >= 0 ? std::optional<DpRank>(got.rank) : std::nullopt,
                            .prompt_tokens = req.prompt_tokens,
                            .ticket = ticket};
        for (RandomFleet* f : {&fast_fleet, &ref_fleet}) {
          f->fleet->workers[o.worker]->begin_request(o.rank, o.prompt_tokens);
        }
        outstanding.push_back(o);
      }
    }
    if (!outstanding.empty() && chance(rng, 0.45)) {
      const size_t k = rng() % outstanding.size();
      const Outstanding o = outstanding[k];
      for (RandomFleet* f : {&fast_fleet, &ref_fleet}) {
        f->fleet->workers[o.worker]->prefilled(o.prompt_tokens);
        f->fleet->workers[o.worker]->end_request(o.rank);
      }
      // Its first token came (the credit ends after the grace), or it failed (withdrawn).
      const workers::Outcome outcome =
          chance(rng, 0.3) ? workers::Outcome::kServerError : workers::Outcome::kSuccess;
      if (outcome == workers::Outcome::kSuccess) {
        fast.on_prefilled(o.ticket);
        reference.on_prefilled(o.ticket);
      }
      fast.on_request_end(*fast_fleet.fleet->workers[o.worker], outcome, o.ticket);
      reference.on_request_end(outcome, o.ticket);
      outstanding.erase(outstanding.begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (chance(rng, 0.08)) {
      const uint64_t change = rng();
      change_fleet(fast_fleet, change);
      change_fleet(ref_fleet, change);
    }
    if (chance(rng, 0.08)) {  // predictions expire, open breakers let a trial through
      const auto step = std::chrono::milliseconds(between(rng, 1, 2500));
      fast_fleet.clock.advance(step);
      ref_fleet.clock.advance(step);
    }
  }
  return result;
}

TEST(CacheAwareEquivalence, SameDecisionsAsTheReferenceOnRandomFleets) {
  Coverage coverage;
  Scratch scratch;
  int decisions = 0;
  int mismatched_seeds = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const SeedResult r = run_seed(seed, scratch, coverage, /*report=*/mismatched_seeds < 5);
    decisions += r.decisions;
    mismatched_seeds += r.mismatch ? 1 : 0;
  }
  EXPECT_EQ(mismatched_seeds, 0) << "of " << kSeeds << " seeds";
  std::ostringstream seen;
  for (Branch b : {Branch::kAffinity, Branch::kFreshPrefix, Branch::kOverloadSteer,
                   Branch::kImbalanceSpill, Branch::kWaitSpill, Branch::kWarmup,
                   Branch::kAllOverloaded, Branch::kShed, Branch::kNoWorker}) {
    const int n = coverage.branches[static_cast<size_t>(b)];
    seen << " " << branch_name(b) << "=" << n;
    EXPECT_GT(n, 0) << "branch never taken: " << branch_name(b);
  }
  EXPECT_GT(coverage.pinned_rank, 0);
  EXPECT_GT(coverage.predicted_depth, 0);
  EXPECT_GT(coverage.pending_depth, 0);
  EXPECT_GT(coverage.vetoed_pick, 0);
  // (These fleets are mostly hostile to the shortcut: tiny thresholds, exclusions, workers
  // without events, short chains. It still decides over a thousand requests.)
  EXPECT_GT(coverage.shortcut, 500);
  EXPECT_GT(coverage.shortcut_warmup, 50);
  EXPECT_GT(coverage.fleet_pass, decisions / 2);
  std::printf(
      "%d decisions compared over %d seeds; branches:%s; a rank pinned %d, a predicted prefix "
      "%d, blocks in flight %d, a vetoed worker %d; by the shortcut %d (warm-up %d), by a fleet "
      "pass %d\n",
      decisions, kSeeds, seen.str().c_str(), coverage.pinned_rank, coverage.predicted_depth,
      coverage.pending_depth, coverage.vetoed_pick, coverage.shortcut, coverage.shortcut_warmup,
      coverage.fleet_pass);
}

}  // namespace
}  // namespace kvgate::policy
