#include "kvgate/policy/explain.h"

#include <gtest/gtest.h>

#include "policy/fleet_fixture.h"

namespace kvgate::policy {
namespace {

using Explain = FleetTest;

RouteRequest request(const std::vector<SeqHash>& chain, std::span<const WorkerId> exclude = {}) {
  return {.chain = chain,
          .prompt_tokens = static_cast<uint32_t>(chain.size() * 16),
          .block_size = 16,
          .model = "m",
          .exclude = exclude,
          .explain = true};
}

TEST_F(Explain, TheChosenComesFirstThenTheDeepestWithTheirWaits) {
  make_fleet(4);
  index.set(100, HolderId(1), 2);
  index.set(100, HolderId(3), 5);
  const CacheAwareConfig cfg;
  auto p = make(PolicyKind::kCacheAware, cfg);
  const std::vector<SeqHash> chain = {100, 101, 102, 103, 104, 105};
  const RouteRequest req = request(chain);
  const auto fleet_now = registry.snapshot();
  const Decision d = p->select(req, *fleet_now, scratch);
  const Explanation e = explain(req, d, *fleet_now, scratch, &cfg, 3);

  EXPECT_EQ(e.decision.worker, 3);
  EXPECT_EQ(e.decision.branch, Branch::kAffinity);
  EXPECT_EQ(e.chain_blocks, 6u);
  EXPECT_EQ(e.candidates, 4u);
  EXPECT_EQ(e.overloaded, 0u);
  ASSERT_EQ(e.top.size(), 3u);  // cut at `top`
  EXPECT_TRUE(e.top[0].chosen);
  EXPECT_EQ(e.top[0].index, 3);
  EXPECT_EQ(e.top[0].matched_blocks, 5u);
  EXPECT_EQ(e.top[1].index, 1);
  EXPECT_EQ(e.top[1].matched_blocks, 2u);
  EXPECT_FALSE(e.top[1].chosen);
  EXPECT_EQ(e.top[2].matched_blocks, 0u);
  // An idle worker's wait is its uncached prompt at the configured prefill rate: 96 tokens of
  // which the chosen holds 80.
  EXPECT_DOUBLE_EQ(e.top[0].expected_wait_us, 16 / cfg.prefill_tokens_per_second * 1e6);
  EXPECT_DOUBLE_EQ(e.top[2].expected_wait_us, 96 / cfg.prefill_tokens_per_second * 1e6);
}

TEST_F(Explain, GatesThatLeftWorkersOutAreCountedByWhy) {
  make_fleet(5);
  for (int k = 0; k < 3; ++k) fleet[0]->health().record(false);  // probed unhealthy
  fleet[1]->liveness().note_connect_failed();
  clock.advance(std::chrono::milliseconds(3500));
  fleet[1]->liveness().evaluate();
  ASSERT_TRUE(fleet[1]->vetoed());
  fleet[2]->set_engine_load({.running = 10, .kv_usage = 0.95}, clock.now());  // overloaded
  const CacheAwareConfig cfg;
  auto p = make(PolicyKind::kCacheAware, cfg);
  const std::vector<SeqHash> chain = {1, 2};
  const std::vector<WorkerId> tried = {fleet[3]->id()};
  const RouteRequest req = request(chain, tried);
  const auto fleet_now = registry.snapshot();
  const Decision d = p->select(req, *fleet_now, scratch);
  const Explanation e = explain(req, d, *fleet_now, scratch, &cfg, 8);

  EXPECT_EQ(d.worker, 4);
  EXPECT_EQ(e.candidates, 2u);  // workers 2 (overloaded) and 4
  EXPECT_EQ(e.overloaded, 1u);
  EXPECT_EQ(e.unroutable, 1u);
  EXPECT_EQ(e.vetoed, 1u);
  EXPECT_EQ(e.excluded, 1u);
  ASSERT_EQ(e.top.size(), 2u);
  EXPECT_EQ(e.top[0].index, 4);
  EXPECT_TRUE(e.top[1].overloaded);
}

TEST_F(Explain, APolicyWithoutACostModelReportsNoWaits) {
  make_fleet(3);
  auto p = make(PolicyKind::kRoundRobin);
  const std::vector<SeqHash> chain = {7};
  const RouteRequest req = request(chain);
  const auto fleet_now = registry.snapshot();
  const Decision d = p->select(req, *fleet_now, scratch);
  const Explanation e = explain(req, d, *fleet_now, scratch, nullptr, 8);
  ASSERT_EQ(e.top.size(), 3u);
  EXPECT_EQ(e.top[0].index, d.worker);
  for (const auto& c : e.top) EXPECT_EQ(c.expected_wait_us, -1);
}

TEST_F(Explain, NoWorkerHasNoCandidates) {
  make_fleet(2);
  for (const auto& w : fleet)
    for (int k = 0; k < 3; ++k) w->health().record(false);
  const CacheAwareConfig cfg;
  auto p = make(PolicyKind::kCacheAware, cfg);
  const std::vector<SeqHash> chain = {7};
  const RouteRequest req = request(chain);
  const auto fleet_now = registry.snapshot();
  const Decision d = p->select(req, *fleet_now, scratch);
  const Explanation e = explain(req, d, *fleet_now, scratch, &cfg, 8);
  EXPECT_EQ(e.decision.branch, Branch::kNoWorker);
  EXPECT_EQ(e.candidates, 0u);
  EXPECT_EQ(e.unroutable, 2u);
  EXPECT_TRUE(e.top.empty());
}

}  // namespace
}  // namespace kvgate::policy
