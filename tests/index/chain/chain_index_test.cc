#include "index/chain/chain_index.h"

#include <gtest/gtest.h>

#include "harness/exactness.h"
#include "index/chain/sharded_index.h"

namespace kvgate::index::chain {
namespace {

harness::IndexerFactory chain_factory() {
  return [] { return std::unique_ptr<Indexer>(new ChainIndex()); };
}

TEST(ChainIndex, BasicStoreLookupRemove) {
  ChainIndex idx;
  BlockHasher h;
  const std::vector<EngineHash> eng = {11, 12, 13};
  const std::vector<LocalHash> loc = {101, 102, 103};
  Event st{
      .kind = EventKind::kStored, .tier = Tier::kDevice, .engine_hashes = eng, .local_hashes = loc};
  auto r = idx.apply(HolderId(0), std::span(&st, 1));
  EXPECT_EQ(r.stored_blocks, 3u);
  std::vector<SeqHash> chain = {101, h.chain(101, 102), h.chain(h.chain(101, 102), 103)};
  std::vector<HolderMatch> out;
  idx.lookup(chain, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].any_depth, 3u);
  EXPECT_EQ(out[0].device_depth, 3u);
  const std::vector<EngineHash> rm = {12};
  Event re{.kind = EventKind::kRemoved, .tier = Tier::kDevice, .engine_hashes = rm};
  idx.apply(HolderId(0), std::span(&re, 1));
  idx.lookup(chain, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].any_depth, 1u);
  EXPECT_EQ(idx.stats().memberships, 2u);
  EXPECT_EQ(idx.stats().resident_blocks, 2u);
}

// Holders announced with a small KV pool (the harness's holders outgrow it, so both a table sized
// up front and growth past it are exercised; clears keep the size): still exact, and the
// announced tables are counted in stats().bytes before any event.
TEST(ChainIndex, ExactWithAnnouncedCapacities) {
  ChainIndex idx;
  const uint64_t before = idx.stats().bytes;
  idx.expect_capacity(HolderId(0), 10'000);
  EXPECT_GE(idx.stats().bytes, before + 10'000 * 16);
  harness::HarnessOptions o;
  o.seed = 3;
  auto report = harness::run_exactness(
      [] {
        auto announced = std::make_unique<ChainIndex>();
        for (uint32_t h = 0; h < 64; ++h) announced->expect_capacity(HolderId(h), 48);
        return std::unique_ptr<Indexer>(std::move(announced));
      },
      harness::options_from_env(o));
  ASSERT_TRUE(report.ok()) << report.status();
  std::cout << report->summary() << "\n";
}

TEST(ChainIndex, ExactAgainstReferenceSequential) {
  for (uint64_t seed : harness::seeds_from_env({1, 2})) {
    harness::HarnessOptions o;
    o.seed = seed;
    auto report = harness::run_exactness(chain_factory(), harness::options_from_env(o));
    ASSERT_TRUE(report.ok()) << report.status();
    std::cout << report->summary() << "\n";
  }
}

// 20 of 20: four lanes and two racing readers, holders removed and re-added while events flow,
// equal to the reference at the end of every phase of every run.
TEST(ChainIndex, ConcurrentTwentyOfTwenty) {
  for (uint64_t seed = 100; seed < 120; ++seed) {
    harness::HarnessOptions o;
    o.seed = seed;
    o.lanes = 4;
    o.readers = 2;
    o.events = 100'000;
    auto report = harness::run_exactness(chain_factory(), harness::options_from_env(o));
    ASSERT_TRUE(report.ok()) << "run " << seed - 99 << " of 20: " << report.status();
    ASSERT_GT(report->holder_removals, 0u);
  }
}

TEST(ChainIndex, ExactAgainstReferenceConcurrent) {
  harness::HarnessOptions o;
  o.seed = 7;
  o.lanes = 4;
  o.readers = 2;
  o.events = 200'000;
  auto report = harness::run_exactness(chain_factory(), harness::options_from_env(o));
  ASSERT_TRUE(report.ok()) << report.status();
  std::cout << report->summary() << "\n";
}

}  // namespace
}  // namespace kvgate::index::chain

namespace kvgate::index::chain {
namespace {

TEST(ShardedIndex, ExactAgainstReferenceWithTwoShards) {
  for (uint64_t seed : harness::seeds_from_env({3, 4})) {
    harness::HarnessOptions o;
    o.seed = seed;
    o.events = 150'000;
    auto report = harness::run_exactness(
        [] { return std::unique_ptr<Indexer>(ShardedIndex::chain_shards(2, {})); },
        harness::options_from_env(o));
    ASSERT_TRUE(report.ok()) << report.status();
  }
}

TEST(ShardedIndex, ConcurrentLanesAndReadersWithTwoShards) {
  harness::HarnessOptions o;
  o.seed = 11;
  o.lanes = 4;
  o.readers = 2;
  o.events = 150'000;
  auto report = harness::run_exactness(
      [] { return std::unique_ptr<Indexer>(ShardedIndex::chain_shards(2, {})); },
      harness::options_from_env(o));
  ASSERT_TRUE(report.ok()) << report.status();
}

}  // namespace
}  // namespace kvgate::index::chain
