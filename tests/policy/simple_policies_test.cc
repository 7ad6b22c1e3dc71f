#include <gtest/gtest.h>

#include <map>
#include <set>

#include "policy/fleet_fixture.h"

namespace kvgate::policy {
namespace {

using Simple = FleetTest;

TEST_F(Simple, RoundRobinVisitsEveryWorkerInTurn) {
  make_fleet(4);
  auto p = make(PolicyKind::kRoundRobin);
  std::vector<int32_t> order;
  for (int i = 0; i < 8; ++i) order.push_back(route(*p, {1}).worker);
  EXPECT_EQ(order, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST_F(Simple, LeastLoadAndPowerOfTwoPreferIdleWorkers) {
  make_fleet(2);
  for (int i = 0; i < 5; ++i) fleet[0]->begin_request();
  auto ll = make(PolicyKind::kLeastLoad);
  auto p2 = make(PolicyKind::kPowerOfTwo);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(route(*ll, {1}).worker, 1);
    EXPECT_EQ(route(*p2, {1}).worker, 1);  // with two workers both are always sampled
  }
  fleet[1]->set_engine_load({.running = 9}, clock.now());  // the engine reports more than we sent
  EXPECT_EQ(route(*ll, {1}).worker, 0);
}

TEST_F(Simple, RandomReachesEveryone) {
  make_fleet(8);
  auto p = make(PolicyKind::kRandom);
  std::set<int32_t> seen;
  for (int i = 0; i < 400; ++i) seen.insert(route(*p, {1}).worker);
  EXPECT_EQ(seen.size(), 8u);
}

TEST_F(Simple, ConsistentHashingIsStableAndMovesOnlyTheRemovedWorkersKeys) {
  make_fleet(6);
  auto p = make(PolicyKind::kConsistentHashing);
  std::map<std::string, std::string> before;
  for (int k = 0; k < 300; ++k) {
    const std::string key = "session-" + std::to_string(k);
    const auto d = route(*p, {1}, key);
    EXPECT_EQ(d.branch, Branch::kConsistentHash);
    before[key] = url_of(d);
    EXPECT_EQ(url_of(route(*p, {2}, key)), before[key]);  // same key, same worker
  }
  const std::string gone = fleet[2]->url();
  registry.remove(gone);
  int moved = 0;
  for (const auto& [key, url] : before) {
    const std::string now = url_of(route(*p, {1}, key));
    if (url == gone) {
      EXPECT_NE(now, gone);
    } else {
      moved += now != url;
    }
  }
  EXPECT_EQ(moved, 0);
  EXPECT_EQ(route(*p, {1}).branch, Branch::kRandom);  // no key: spread
}

TEST_F(Simple, EmptyFleetHasNoWorker) {
  for (auto k : {PolicyKind::kRandom, PolicyKind::kRoundRobin, PolicyKind::kPowerOfTwo,
                 PolicyKind::kLeastLoad, PolicyKind::kConsistentHashing, PolicyKind::kCacheAware}) {
    auto p = make(k);
    const auto d = route(*p, {1}, "k");
    EXPECT_EQ(d.worker, -1) << policy_kind_name(k);
    EXPECT_EQ(d.branch, Branch::kNoWorker);
  }
}

TEST(PolicyKinds, ParseAndName) {
  EXPECT_EQ(*parse_policy_kind("cache_aware"), PolicyKind::kCacheAware);
  EXPECT_EQ(policy_kind_name(*parse_policy_kind("power_of_two")), "power_of_two");
  EXPECT_FALSE(parse_policy_kind("cache-aware").ok());
  EXPECT_STREQ(branch_name(Branch::kImbalanceSpill), "imbalance_spill");
}

}  // namespace
}  // namespace kvgate::policy
