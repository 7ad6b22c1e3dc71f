#include <gtest/gtest.h>

#include <map>
#include <set>

#include "kvgate/policy/explain.h"
#include "policy/fleet_fixture.h"

namespace kvgate::policy {
namespace {

using CacheAware = FleetTest;

TEST_F(CacheAware, FreshPrefixesSpreadOverAnIdleFleet) {
  make_fleet(128);
  auto p = make(PolicyKind::kCacheAware);
  std::map<int32_t, int> hits;
  for (SeqHash i = 1; i <= 1000; ++i) {
    const auto d = route(*p, {i * 7919, i});
    ASSERT_EQ(d.branch, Branch::kFreshPrefix);
    ++hits[d.worker];
  }
  // Ties within the window are drawn uniformly: with 1,000 misses over 128 identical workers,
  // nearly every worker is reached and none gets more than three times the mean (7.8).
  EXPECT_GE(hits.size(), 120u);
  for (const auto& [w, n] : hits) EXPECT_LE(n, 24) << "worker " << w;
}

TEST_F(CacheAware, DeepestHolderWins) {
  make_fleet(4);
  index.set(100, HolderId(1), 2);
  index.set(100, HolderId(3), 5);
  auto p = make(PolicyKind::kCacheAware);
  const auto d = route(*p, {100, 101, 102, 103, 104, 105});
  EXPECT_EQ(d.branch, Branch::kAffinity);
  EXPECT_EQ(d.worker, 3);
  EXPECT_EQ(d.matched_blocks, 5u);
  EXPECT_EQ(index.lookups, 1);
}

TEST_F(CacheAware, EqualDepthGoesToTheLeastExpectedWait) {
  make_fleet(3);
  index.set(100, HolderId(0), 3);
  index.set(100, HolderId(2), 3);
  fleet[0]->set_engine_load({.running = 4, .waiting = 2}, clock.now());
  auto p = make(PolicyKind::kCacheAware);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(route(*p, {100, 1, 2}).worker, 2);
}

// A match off the device must be loaded before it saves anything: between equal depths the one
// on the device waits less; tier-blind, they tie. Affinity goes to the deepest on any tier, and
// the wait rule weighs what each match saves.
TEST_F(CacheAware, AMatchOffTheDeviceSavesLessThanTheSameOnTheDevice) {
  make_fleet(2);
  index.set(100, HolderId(0), 6, /*device_depth=*/0);
  index.set(100, HolderId(1), 6);
  fleet[0]->set_offload_tiers(index::tier_bit(index::Tier::kDisk));
  auto weighted = make(PolicyKind::kCacheAware);
  for (int i = 0; i < 20; ++i) {
    const Decision d = route(*weighted, {100, 1, 2, 3, 4, 5, 6});
    EXPECT_EQ(d.worker, 1);
    EXPECT_EQ(d.branch, Branch::kAffinity);
    EXPECT_EQ(d.matched_blocks, 6u);
  }
  CacheAwareConfig blind;
  blind.tier_weights = {1, 1, 1, 1};
  auto tier_blind = make(PolicyKind::kCacheAware, blind);
  std::set<int32_t> chosen;
  for (int i = 0; i < 40; ++i) chosen.insert(route(*tier_blind, {100, 1, 2, 3, 4, 5, 6}).worker);
  EXPECT_EQ(chosen, (std::set<int32_t>{0, 1}));

  // One block deeper on the disk (worth 3.5 blocks) is the affinity's pick, and it saves less
  // than the 6 on the other's device: the wait rule moves the request there.
  index.set(100, HolderId(0), 7, /*device_depth=*/0);
  const Decision spilled = route(*weighted, {100, 1, 2, 3, 4, 5, 6});
  EXPECT_EQ(spilled.worker, 1);
  EXPECT_EQ(spilled.branch, Branch::kWaitSpill);
  // Against 2 blocks on the device, it saves more: it keeps the request.
  index.set(100, HolderId(1), 2);
  const Decision deeper = route(*weighted, {100, 1, 2, 3, 4, 5, 6});
  EXPECT_EQ(deeper.worker, 0);
  EXPECT_EQ(deeper.branch, Branch::kAffinity);
  EXPECT_EQ(deeper.matched_blocks, 7u);
}

// A worker's blocks past its device depth weigh as its dearest offload tier: with wait spill on,
// a deep match on a slow tier gives way to a shallower one on the device sooner.
TEST_F(CacheAware, TheWeightIsTheDearestTierTheWorkerOffloadsTo) {
  make_fleet(2);
  index.set(100, HolderId(0), 6, /*device_depth=*/0);
  index.set(100, HolderId(1), 6);
  CacheAwareConfig c;
  c.tier_weights = {1, 0.9, 0.1, 0.5};
  c.assumed_queued_prompt_tokens = 0;
  auto p = make(PolicyKind::kCacheAware, c);
  Scratch s;
  const std::vector<SeqHash> chain{100, 1, 2, 3, 4, 5, 6};
  const RouteRequest req{.chain = chain, .prompt_tokens = 112, .block_size = 16, .explain = true};
  const auto wait_of = [&](uint8_t tiers) {
    fleet[0]->set_offload_tiers(tiers);
    const Decision d = p->select(req, *registry.snapshot(), s);
    const Explanation e = explain(req, d, *registry.snapshot(), s, &c, 2);
    for (const CandidateReport& r : e.top) {
      if (r.index == 0) {
        EXPECT_EQ(r.offloaded_blocks, 6u);
        return r.expected_wait_us;
      }
    }
    ADD_FAILURE() << "worker 0 is not among the candidates";
    return 0.0;
  };
  // 112 tokens, 96 of them matched: 16 to compute, plus 96 * (1 - weight) to load.
  const double us_per_token = 1e6 / c.prefill_tokens_per_second;
  EXPECT_NEAR(wait_of(0), (16 + 96 * (1 - 0.9)) * us_per_token, 1e-3) << "none named: the host's";
  EXPECT_NEAR(wait_of(index::tier_bit(index::Tier::kHost)), (16 + 96 * (1 - 0.9)) * us_per_token,
              1e-3);
  EXPECT_NEAR(wait_of(index::tier_bit(index::Tier::kHost) | index::tier_bit(index::Tier::kDisk)),
              (16 + 96 * (1 - 0.1)) * us_per_token, 1e-3);
  EXPECT_NEAR(wait_of(index::tier_bit(index::Tier::kExternal)),
              (16 + 96 * (1 - 0.5)) * us_per_token, 1e-3);
}

// With measured rates on, a worker that taught the gateway it prefills at half the speed waits
// twice as long for the same work: between equal depths, and for a prefix nobody holds, the
// faster one wins.
TEST_F(CacheAware, ALearnedSlowerWorkerWaitsLonger) {
  make_fleet(2);
  index.set(100, HolderId(0), 3);
  index.set(100, HolderId(1), 3);
  for (int i = 0; i < 20; ++i) {
    fleet[0]->note_prefill(8'000, std::chrono::milliseconds(800));  // 10,000 tokens/s
    fleet[1]->note_prefill(8'000, std::chrono::milliseconds(400));  // 20,000 tokens/s
  }
  EXPECT_LT(fleet[0]->prefill_rate(), 0.6 * fleet[1]->prefill_rate());
  auto p = make(PolicyKind::kCacheAware, {.measured_prefill_rate = true});
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(route(*p, {100, 1, 2, 3, 4}).worker, 1);
    const Decision fresh = route(*p, {500 + static_cast<SeqHash>(i), 1, 2});
    EXPECT_EQ(fresh.branch, Branch::kFreshPrefix);
    EXPECT_EQ(fresh.worker, 1);
  }
}

TEST_F(CacheAware, OverloadedHolderIsSteeredAround) {
  make_fleet(3);
  index.set(100, HolderId(0), 4);
  index.set(100, HolderId(1), 2);
  fleet[0]->set_engine_load({.running = 10, .kv_usage = 0.85}, clock.now());
  auto p = make(PolicyKind::kCacheAware);
  const auto d = route(*p, {100, 1, 2, 3});
  EXPECT_EQ(d.branch, Branch::kOverloadSteer);
  EXPECT_EQ(d.worker, 1);  // the deepest of the others
  fleet[1]->set_engine_load({.waiting = 8}, clock.now());
  const auto d2 = route(*p, {100, 1, 2, 3});
  EXPECT_EQ(d2.branch, Branch::kOverloadSteer);
  EXPECT_EQ(d2.worker, 2);
}

TEST_F(CacheAware, AllOverloadedTakesTheLeastLoadedOrShedsWhenAsked) {
  make_fleet(3);
  fleet[0]->set_engine_load({.running = 30, .waiting = 9}, clock.now());
  fleet[1]->set_engine_load({.running = 10, .waiting = 9}, clock.now());
  fleet[2]->set_engine_load({.running = 20, .kv_usage = 0.95}, clock.now());
  auto p = make(PolicyKind::kCacheAware);
  const auto d = route(*p, {1, 2});
  EXPECT_EQ(d.branch, Branch::kAllOverloaded);
  EXPECT_EQ(d.worker, 1);
  auto shed = make(PolicyKind::kCacheAware, {.shed_when_all_overloaded = true});
  const auto s = route(*shed, {1, 2});
  EXPECT_EQ(s.branch, Branch::kShed);
  EXPECT_EQ(s.worker, -1);
}

TEST_F(CacheAware, DisabledOverloadThresholdsNeverSteer) {
  make_fleet(2);
  index.set(100, HolderId(0), 2);
  fleet[0]->set_engine_load({.waiting = 50, .kv_usage = 0.99}, clock.now());
  // (The wait rule off: 50 waiting requests outweigh one shared block.)
  auto p = make(PolicyKind::kCacheAware,
                {.wait_spill_ratio = 0,
                 .overload = {.token_usage = std::nullopt, .waiting_requests = std::nullopt}});
  EXPECT_EQ(route(*p, {100, 1}).worker, 0);
}

TEST_F(CacheAware, ImbalanceSpillsOffAHotHolder) {
  make_fleet(4);
  index.set(100, HolderId(2), 3);
  for (int i = 0; i < 60; ++i) fleet[2]->begin_request();  // mean 15: 60 > 15 + 32 and > 15 * 1.5
  // (The wait rule off: 30 requests in flight outweigh three shared blocks.)
  auto p = make(PolicyKind::kCacheAware, {.wait_spill_ratio = 0});
  const auto d = route(*p, {100, 1, 2});
  EXPECT_EQ(d.branch, Branch::kImbalanceSpill);
  EXPECT_NE(d.worker, 2);
  for (int i = 0; i < 30; ++i) fleet[2]->end_request();  // 30 vs mean 7.5: under the absolute gap
  EXPECT_EQ(route(*p, {100, 1, 2}).branch, Branch::kAffinity);
}

TEST_F(CacheAware, AFewSharedBlocksDoNotHoldARequestBehindALongPrefill) {
  make_fleet(3);
  // Every worker holds the shared first block; worker 0 also the next two, and it has 100,000
  // prompt tokens queued (10 s by the default cost model).
  index.set(100, HolderId(0), 3);
  index.set(100, HolderId(1), 1);
  index.set(100, HolderId(2), 1);
  fleet[0]->set_engine_load({.running = 1, .waiting = 1, .queued_prefill_tokens = 100'000},
                            clock.now());
  auto p = make(PolicyKind::kCacheAware);
  // Two blocks more save 3.2 ms of prefill; waiting there costs 10 s more: elsewhere.
  const auto d = route(*p, {100, 1, 2, 3});
  EXPECT_EQ(d.branch, Branch::kWaitSpill);
  EXPECT_NE(d.worker, 0);
  EXPECT_EQ(d.matched_blocks, 1u);
  // A conversation of 400 blocks there saves 640 ms: 20 times that is more than the wait.
  std::vector<SeqHash> conversation = {100};
  for (SeqHash h = 1; h < 400; ++h) conversation.push_back(h);
  index.set(100, HolderId(0), 400);
  const auto stay = route(*p, conversation);
  EXPECT_EQ(stay.branch, Branch::kAffinity);
  EXPECT_EQ(stay.worker, 0);
  // Off: the deepest holder, however long its queue.
  index.set(100, HolderId(0), 3);
  auto off = make(PolicyKind::kCacheAware, {.wait_spill_ratio = 0});
  EXPECT_EQ(route(*off, {100, 1, 2, 3}).branch, Branch::kAffinity);
  EXPECT_EQ(route(*off, {100, 1, 2, 3}).worker, 0);
}

TEST_F(CacheAware, APrefixTheQueueAheadWillEvictSavesNothing) {
  make_fleet(2);
  // Worker 0 holds a 100-block conversation (1,600 tokens: 160 ms of prefill, 3.2 s at the ratio
  // of 20) behind 20,000 queued tokens (2 s); worker 1 holds nothing and is idle.
  std::vector<SeqHash> conversation = {100};
  for (SeqHash h = 1; h < 104; ++h) conversation.push_back(h);
  index.set(100, HolderId(0), 100);
  const auto pool = [&](uint64_t blocks) {
    ASSERT_TRUE(registry.update_info(fleet[0]->id(), [&](workers::WorkerInfo& i) {
      i.kv_blocks = blocks;
      i.block_size = 16;
    }));
  };
  fleet[0]->set_engine_load(
      {.running = 1, .waiting = 1, .kv_usage = 0.5, .queued_prefill_tokens = 20'000}, clock.now());
  auto p = make(PolicyKind::kCacheAware);
  // Its pool unknown: the prefix is taken to last; it stays.
  EXPECT_EQ(route(*p, conversation).worker, 0);
  // 1,000 blocks at half use: 8,000 tokens free, and the queue needs 20,000. The engine evicts
  // its oldest free blocks first and reaches the prefix: none of it is left to save.
  pool(1000);
  const Decision spilled = route(*p, conversation);
  EXPECT_EQ(spilled.branch, Branch::kWaitSpill);
  EXPECT_EQ(spilled.worker, 1);
  // 2,600 blocks: 20,800 free, 800 left past the queue: half the prefix lasts (80 ms saved, 1.6 s
  // at the ratio, against 1.8 s of extra wait): still spills. 3,000 blocks: 24,000 free, the
  // whole prefix lasts: stays.
  pool(2600);
  EXPECT_EQ(route(*p, conversation).branch, Branch::kWaitSpill);
  pool(3000);
  const Decision stays = route(*p, conversation);
  EXPECT_EQ(stays.branch, Branch::kAffinity);
  EXPECT_EQ(stays.worker, 0);
}

// The shortcut decides among the deepest holders only, and gives way to the pass over the fleet
// whenever a rule could need the rest of it; policy_equivalence_test checks it is exact.
TEST_F(CacheAware, AFitDeepestHolderIsChosenWithoutAPassOverTheFleet) {
  make_fleet(8);
  index.set(100, HolderId(5), 3);
  index.set(100, HolderId(1), 1);
  auto p = make(PolicyKind::kCacheAware);
  // The first decision sums the warm-up level over the fleet; the next ones reuse it.
  EXPECT_EQ(route(*p, {100, 1, 2}).worker, 5);
  EXPECT_EQ(scratch.fleet_pass_decisions, 1u);
  for (int i = 0; i < 10; ++i) {
    const Decision d = route(*p, {100, 1, 2});
    EXPECT_EQ(d.worker, 5);
    EXPECT_EQ(d.branch, Branch::kAffinity);
    EXPECT_EQ(d.matched_blocks, 3u);
  }
  EXPECT_EQ(scratch.shortcut_decisions, 10u);
  EXPECT_EQ(scratch.fleet_pass_decisions, 1u);
}

TEST_F(CacheAware, TheShortcutGivesWayWhenARuleNeedsTheFleet) {
  make_fleet(4);
  index.set(100, HolderId(2), 3);
  auto p = make(PolicyKind::kCacheAware, {.wait_spill_ratio = 0});
  route(*p, {100, 1, 2});  // sums the warm-up level
  const uint64_t passes = scratch.fleet_pass_decisions;
  // The winner far above the fleet's mean load: the imbalance rule needs the mean.
  for (int i = 0; i < 60; ++i) fleet[2]->begin_request();
  EXPECT_EQ(route(*p, {100, 1, 2}).branch, Branch::kImbalanceSpill);
  EXPECT_EQ(scratch.fleet_pass_decisions, passes + 1);
  for (int i = 0; i < 60; ++i) fleet[2]->end_request();
  // Nobody holds a block: the least expected wait over the fleet.
  EXPECT_EQ(route(*p, {7, 8}).branch, Branch::kFreshPrefix);
  EXPECT_EQ(scratch.fleet_pass_decisions, passes + 2);
  // The only deep holder overloaded: steered over the fleet.
  fleet[2]->set_engine_load({.running = 1, .waiting = 50, .kv_usage = 0.99}, clock.now());
  EXPECT_EQ(route(*p, {100, 1, 2}).branch, Branch::kOverloadSteer);
  EXPECT_EQ(scratch.fleet_pass_decisions, passes + 3);
  fleet[2]->set_engine_load({}, clock.now());
  // Asked to explain: every candidate is left for the explanation.
  RouteRequest req{.chain = std::vector<SeqHash>{100, 1, 2},
                   .prompt_tokens = 48,
                   .block_size = 16,
                   .model = "m",
                   .explain = true};
  const std::vector<SeqHash> chain = {100, 1, 2};
  req.chain = chain;
  EXPECT_EQ(p->select(req, *registry.snapshot(), scratch).worker, 2);
  EXPECT_EQ(scratch.candidates.size(), 4u);
  EXPECT_EQ(scratch.fleet_pass_decisions, passes + 4);
  // And back to the shortcut.
  EXPECT_EQ(route(*p, {100, 1, 2}).worker, 2);
  EXPECT_EQ(scratch.fleet_pass_decisions, passes + 4);
}

TEST_F(CacheAware, UnroutableAndOtherModelWorkersAreNotCandidates) {
  make_fleet(3);
  index.set(100, HolderId(0), 3);
  index.set(100, HolderId(1), 2);
  for (int i = 0; i < 3; ++i) fleet[0]->health().record(false);
  for (int i = 0; i < 5; ++i) fleet[1]->breaker().record(workers::Outcome::kServerError);
  auto p = make(PolicyKind::kCacheAware);
  const auto d = route(*p, {100, 1, 2});
  EXPECT_EQ(d.worker, 2);
  EXPECT_EQ(d.branch, Branch::kFreshPrefix);
  ASSERT_TRUE(
      registry.update_info(fleet[2]->id(), [](workers::WorkerInfo& i) { i.models = {"other"}; }));
  EXPECT_EQ(route(*p, {100, 1, 2}).branch, Branch::kNoWorker);
}

// A burst sharing a new prefix, every request routed before the first one's events: each goes
// where the prefix is being computed, until the credit is withdrawn or expires.
TEST_F(CacheAware, ABurstSharingANewPrefixFollowsItsBlocksInFlight) {
  make_fleet(8);
  // (Queued requests counted at their own prompt tokens, not an assumed length.)
  auto p = make(PolicyKind::kCacheAware,
                {.assumed_queued_prompt_tokens = 0, .pending_grace = std::chrono::seconds(1)});
  std::vector<SeqHash> chain(32);
  for (size_t i = 0; i < chain.size(); ++i) chain[i] = 500 + i;
  const RouteRequest req{.chain = chain, .prompt_tokens = 512, .block_size = 16, .model = "m"};
  const Decision first = route(*p, chain);
  ASSERT_EQ(first.branch, Branch::kFreshPrefix);
  EXPECT_EQ(first.pending_blocks, 0u);
  workers::Worker& holder = *registry.snapshot()->workers[first.worker];
  std::vector<uint64_t> tickets = {p->on_dispatch(holder, req, first.rank)};
  holder.begin_request(std::nullopt, 512);
  for (int i = 0; i < 20; ++i) {
    const Decision d = route(*p, chain);
    EXPECT_EQ(d.worker, first.worker);
    EXPECT_EQ(d.branch, Branch::kAffinity);
    EXPECT_EQ(d.matched_blocks, 32u);
    EXPECT_EQ(d.pending_blocks, 32u);
    tickets.push_back(p->on_dispatch(holder, req, d.rank));
    holder.begin_request(std::nullopt, 16);
  }
  std::vector<SeqHash> sibling(chain.begin(), chain.begin() + 16);
  sibling.push_back(9999);
  EXPECT_EQ(route(*p, sibling).matched_blocks, 16u);
  // The index confirming part of it: only the rest is pending.
  index.set(500, HolderId(static_cast<uint32_t>(first.worker)), 20);
  const Decision confirmed = route(*p, chain);
  EXPECT_EQ(confirmed.matched_blocks, 32u);
  EXPECT_EQ(confirmed.pending_blocks, 12u);
  index.clear();
  EXPECT_EQ(p->pending_stats().live_requests, 21u);
  EXPECT_EQ(p->pending_stats().credited, 21u);

  // Every request failed: the prefix is nobody's, and the burst's next request goes by wait.
  for (uint64_t t : tickets) p->on_request_end(holder, workers::Outcome::kServerError, t);
  EXPECT_EQ(p->pending_stats().withdrawn, 21u);
  const Decision after = route(*p, chain);
  EXPECT_EQ(after.branch, Branch::kFreshPrefix);
  EXPECT_NE(after.worker, first.worker);  // its queue is the longest
  // A credit whose request had its first token lasts the grace, then the events must say.
  const uint64_t t = p->on_dispatch(holder, req, first.rank);
  p->on_prefilled(t);
  p->on_request_end(holder, workers::Outcome::kSuccess, t);
  EXPECT_EQ(route(*p, chain).worker, first.worker);
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(route(*p, chain).branch, Branch::kFreshPrefix);
}

TEST_F(CacheAware, WithoutBlocksInFlightABurstIsSpreadByItsQueue) {
  make_fleet(8);
  auto p = make(PolicyKind::kCacheAware, {.pending_max_age = Duration::zero()});
  const std::vector<SeqHash> chain = {1, 2, 3, 4};
  const RouteRequest req{.chain = chain, .prompt_tokens = 64, .block_size = 16, .model = "m"};
  std::set<int32_t> used;
  for (int i = 0; i < 8; ++i) {
    const Decision d = route(*p, chain);
    EXPECT_EQ(d.branch, Branch::kFreshPrefix);
    EXPECT_EQ(p->on_dispatch(*registry.snapshot()->workers[d.worker], req, d.rank), 0u);
    registry.snapshot()->workers[d.worker]->begin_request(std::nullopt, 64);
    used.insert(d.worker);
  }
  EXPECT_EQ(used.size(), 8u);
  EXPECT_EQ(p->pending_stats().credited, 0u);
}

TEST_F(CacheAware, ApproximateModeFollowsItsOwnDecisionsUntilTheTtl) {
  make_fleet(8, /*with_events=*/false);
  auto p = make(PolicyKind::kCacheAware, {.prediction_ttl = std::chrono::seconds(30)});
  const std::vector<SeqHash> chain = {11, 12, 13, 14};
  const auto first = route(*p, chain);
  ASSERT_EQ(first.branch, Branch::kFreshPrefix);
  RouteRequest req{.chain = chain, .prompt_tokens = 64, .block_size = 16, .model = "m"};
  p->on_dispatch(*registry.snapshot()->workers[first.worker], req, first.rank);
  for (int i = 0; i < 10; ++i) {
    const auto d = route(*p, chain);
    EXPECT_EQ(d.worker, first.worker);
    EXPECT_EQ(d.branch, Branch::kAffinity);
    EXPECT_EQ(d.matched_blocks, 4u);
  }
  EXPECT_EQ(route(*p, {11, 12, 99}).matched_blocks, 2u);
  clock.advance(std::chrono::seconds(31));
  EXPECT_EQ(route(*p, chain).branch, Branch::kFreshPrefix);
}

}  // namespace
}  // namespace kvgate::policy
