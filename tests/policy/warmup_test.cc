// The warm-up rule: a thin worker (an engine back with an empty cache) gets a quarter of the
// misses and an eighth of the hits until it fills, never more than its cap, and nothing while the
// whole fleet is warming.
#include <gtest/gtest.h>

#include <map>

#include "policy/fleet_fixture.h"

namespace kvgate::policy {
namespace {

class Warmup : public FleetTest {
 protected:
  void SetUp() override {
    make_fleet(4);
    for (int i = 0; i < 3; ++i) fleet[i]->set_index_blocks(0, 1000);
    fleet[3]->set_index_blocks(0, 10);  // thin: 10 against a mean of 752.5
  }
  // Decisions over `n` requests: per branch, and how many went to the thin worker.
  std::map<Branch, int> run(Policy& p, int n, bool hits, int* to_thin) {
    std::map<Branch, int> branches;
    *to_thin = 0;
    for (int i = 0; i < n; ++i) {
      const SeqHash first = hits ? 100 : 1'000'000 + static_cast<SeqHash>(i);
      const auto d = route(p, {first, 1, 2, 3});
      ++branches[d.branch];
      *to_thin += d.worker == 3;
    }
    return branches;
  }
};

TEST_F(Warmup, AQuarterOfTheMissesGoToTheThinWorker) {
  auto p = make(PolicyKind::kCacheAware);
  int to_thin = 0;
  auto b = run(*p, 4000, /*hits=*/false, &to_thin);
  // A quarter of the misses is drawn for the thin worker; a miss the fleet's even spread had sent
  // there anyway (one in four) keeps its own branch.
  EXPECT_NEAR(b[Branch::kWarmup] / 4000.0, 0.25 * 0.75, 0.03);
  EXPECT_NEAR(to_thin / 4000.0, 0.25 + 0.75 * 0.25, 0.04);
}

TEST_F(Warmup, AnEighthOfTheHitsGoToTheThinWorker) {
  index.set(100, HolderId(0), 4);
  auto p = make(PolicyKind::kCacheAware);
  int to_thin = 0;
  auto b = run(*p, 4000, /*hits=*/true, &to_thin);
  EXPECT_NEAR(b[Branch::kWarmup] / 4000.0, 0.125, 0.025);
  EXPECT_EQ(b[Branch::kWarmup], to_thin);
  EXPECT_EQ(b[Branch::kAffinity] + b[Branch::kWarmup], 4000);
}

TEST_F(Warmup, EndsWhenTheWorkerIsNoLongerThin) {
  fleet[3]->set_index_blocks(0, 600);  // over half the mean (900): filled
  auto p = make(PolicyKind::kCacheAware);
  int to_thin = 0;
  auto b = run(*p, 1000, /*hits=*/false, &to_thin);
  EXPECT_EQ(b[Branch::kWarmup], 0);
}

TEST_F(Warmup, EndsAfterTheCapEvenIfTheWorkerNeverFills) {
  CacheAwareConfig cfg;
  cfg.warmup_max_diversions = 10;
  auto p = make(PolicyKind::kCacheAware, cfg);
  int to_thin = 0;
  auto b = run(*p, 2000, /*hits=*/false, &to_thin);
  EXPECT_EQ(b[Branch::kWarmup], 10);
  EXPECT_EQ(fleet[3]->warmup_diversions(), 10u);
}

TEST_F(Warmup, NothingWhileTheWholeFleetIsWarming) {
  for (int i = 0; i < 3; ++i) fleet[i]->set_index_blocks(0, 40);  // mean 32.5 < 64
  auto p = make(PolicyKind::kCacheAware);
  int to_thin = 0;
  auto b = run(*p, 1000, /*hits=*/false, &to_thin);
  EXPECT_EQ(b[Branch::kWarmup], 0);
}

TEST_F(Warmup, AWorkerFoundThinAtTheNextSumOfTheLevel) {
  fleet[3]->set_index_blocks(0, 1000);  // nobody thin
  CacheAwareConfig cfg;
  cfg.warmup_miss_share = 1.0;
  auto p = make(PolicyKind::kCacheAware, cfg);
  int to_thin = 0;
  EXPECT_EQ(run(*p, 100, /*hits=*/false, &to_thin)[Branch::kWarmup], 0);
  // Its engine restarts empty: the level summed before still counts it as full...
  fleet[3]->set_index_blocks(0, 0);
  EXPECT_EQ(run(*p, 100, /*hits=*/false, &to_thin)[Branch::kWarmup], 0);
  // ...until it is warmup_level_max_age old.
  clock.advance(cfg.warmup_level_max_age);
  run(*p, 100, /*hits=*/false, &to_thin);
  EXPECT_EQ(to_thin, 100);
}

TEST_F(Warmup, AWorkerThatFilledStopsAtOnceAndStartsAnewLater) {
  CacheAwareConfig cfg;
  cfg.warmup_miss_share = 1.0;
  cfg.warmup_max_diversions = 50;
  auto p = make(PolicyKind::kCacheAware, cfg);
  int to_thin = 0;
  run(*p, 20, /*hits=*/false, &to_thin);
  EXPECT_EQ(to_thin, 20);  // diverted, or its even share of the misses
  // Each miss is a diversion unless the idle fleet's tie draw (1 in 4) picked the worker anyway:
  // about 15 of 20, and 10 or fewer in 4% of runs, so only "some" is certain.
  const uint64_t diverted = fleet[3]->warmup_diversions();
  EXPECT_GT(diverted, 0u);
  // Filled: no more diversions, though the level summed before still has it thin.
  fleet[3]->set_index_blocks(0, 1000);
  run(*p, 20, /*hits=*/false, &to_thin);
  EXPECT_EQ(fleet[3]->warmup_diversions(), diverted);
  // The next sum ends its episode: a later one starts from zero.
  clock.advance(cfg.warmup_level_max_age);
  run(*p, 1, /*hits=*/false, &to_thin);
  EXPECT_EQ(fleet[3]->warmup_diversions(), 0u);
}

TEST_F(Warmup, OffWithARatioOfZero) {
  CacheAwareConfig cfg;
  cfg.warmup_thin_ratio = 0;
  auto p = make(PolicyKind::kCacheAware, cfg);
  int to_thin = 0;
  auto b = run(*p, 1000, /*hits=*/false, &to_thin);
  EXPECT_EQ(b[Branch::kWarmup], 0);
}

}  // namespace
}  // namespace kvgate::policy
