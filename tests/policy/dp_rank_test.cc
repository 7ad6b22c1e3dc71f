// Data-parallel ranks as routing candidates: the rank holding the prefix is chosen and named,
// each rank's own load and overload count, and a rank whose event stream lost events yields to
// its siblings.
#include <gtest/gtest.h>

#include <set>

#include "policy/fleet_fixture.h"

namespace kvgate::policy {
namespace {

class DpRanks : public FleetTest {
 protected:
  // One worker with two ranks (holders 10 and 11) and one with a single rank (holder 20).
  void make_dp_fleet() {
    workers::WorkerInfo two;
    two.models = {"m"};
    two.dp_size = 2;
    two.holders = {HolderId(10), HolderId(11)};
    two.holder_ranks = {0, 1};
    auto a = registry.add("http://127.0.0.1:9100", two);
    ASSERT_TRUE(a.ok());
    workers::WorkerInfo one;
    one.models = {"m"};
    one.holders = {HolderId(20)};
    one.holder_ranks = {0};
    auto b = registry.add("http://127.0.0.1:9200", one);
    ASSERT_TRUE(b.ok());
    for (auto& w : {*a, *b}) {
      w->health().record(true);
      fleet.push_back(w);
    }
  }
};

TEST_F(DpRanks, TheRankHoldingThePrefixIsChosenAndNamed) {
  make_dp_fleet();
  index.set(100, HolderId(11), 4);
  index.set(100, HolderId(20), 2);
  auto p = make(PolicyKind::kCacheAware);
  const auto d = route(*p, {100, 1, 2, 3});
  EXPECT_EQ(d.branch, Branch::kAffinity);
  EXPECT_EQ(d.worker, 0);
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.matched_blocks, 4u);
  // The single-rank worker is not pinned.
  index.set(200, HolderId(20), 3);
  const auto e = route(*p, {200, 1, 2});
  EXPECT_EQ(e.worker, 1);
  EXPECT_EQ(e.rank, -1);
}

TEST_F(DpRanks, EachRankCarriesItsOwnLoad) {
  make_dp_fleet();
  index.set(100, HolderId(10), 3);
  index.set(100, HolderId(11), 3);
  fleet[0]->set_rank_load(0, {.running = 6, .waiting = 3});  // rank 0 busy, rank 1 idle
  auto p = make(PolicyKind::kCacheAware);
  for (int i = 0; i < 10; ++i) {
    const auto d = route(*p, {100, 1, 2});
    EXPECT_EQ(d.worker, 0);
    EXPECT_EQ(d.rank, 1);
  }
  // The rank's own overload gate: rank 1 over its KV usage yields to rank 0, equally deep.
  fleet[0]->set_rank_load(0, {});
  fleet[0]->set_rank_load(1, {.running = 4, .kv_usage = 0.9});
  EXPECT_EQ(route(*p, {100, 1, 2}).rank, 0);
  // In-flight counts per rank count too.
  fleet[0]->set_rank_load(1, {});
  for (int i = 0; i < 4; ++i) fleet[0]->begin_request(DpRank{0});
  EXPECT_EQ(fleet[0]->in_flight(), 4);
  EXPECT_EQ(fleet[0]->in_flight(DpRank{0}), 4);
  EXPECT_EQ(route(*p, {100, 1, 2}).rank, 1);
}

TEST_F(DpRanks, ADegradedRankYieldsToItsSiblings) {
  make_dp_fleet();
  index.set(100, HolderId(11), 4);
  fleet[0]->set_rank_degraded(1, true);
  auto p = make(PolicyKind::kCacheAware);
  const auto d = route(*p, {100, 1, 2, 3});
  EXPECT_FALSE(d.worker == 0 && d.rank == 1) << "the degraded rank is not a candidate";
  // Every rank degraded: they stay candidates (never refuse).
  fleet[0]->set_rank_degraded(0, true);
  std::set<int32_t> ranks;
  for (int i = 0; i < 40; ++i) {
    const auto e = route(*p, {100, 1, 2, 3});
    if (e.worker == 0) ranks.insert(e.rank);
  }
  EXPECT_TRUE(ranks.count(1));
}

TEST_F(DpRanks, NotDpAwareRoutesToWholeWorkers) {
  make_dp_fleet();
  index.set(100, HolderId(11), 4);
  auto p = make(PolicyKind::kCacheAware);
  const std::vector<SeqHash> chain = {100, 1, 2, 3};
  const RouteRequest req{
      .chain = chain, .prompt_tokens = 64, .block_size = 16, .model = "m", .dp_aware = false};
  const auto d = p->select(req, *registry.snapshot(), scratch);
  EXPECT_EQ(d.worker, 0);
  EXPECT_EQ(d.rank, -1);
  EXPECT_EQ(d.matched_blocks, 4u) << "a worker's depth is its deepest rank's";
}

TEST_F(DpRanks, SimplePoliciesNameTheRankTheyPick) {
  make_dp_fleet();
  auto p = make(PolicyKind::kRoundRobin);
  std::set<std::pair<int32_t, int32_t>> seen;
  for (int i = 0; i < 6; ++i) {
    const auto d = route(*p, {1});
    seen.insert({d.worker, d.rank});
  }
  EXPECT_EQ(seen, (std::set<std::pair<int32_t, int32_t>>{{0, 0}, {0, 1}, {1, -1}}));
}

}  // namespace
}  // namespace kvgate::policy
