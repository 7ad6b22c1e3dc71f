#include "kvgate/relay/block_set.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "harness/corpus_generator.h"
#include "kvgate/index/indexer.h"
#include "relay/test_subscriber.h"

namespace kvgate::relay {

using index::EngineHash;
namespace {

using index::Event;
using index::EventKind;
using index::Membership;
using index::Tier;

using testing::reference;

std::vector<Membership> held(const index::Indexer& idx, HolderId h) {
  std::vector<Membership> out;
  EXPECT_TRUE(idx.holder_memberships(h, out).ok());
  return out;
}

// `holder` of `into` emptied and rebuilt from `set`'s snapshot.
size_t rebuild(index::Indexer& into, HolderId holder, const BlockSet& set, size_t per_event) {
  into.remove_holder(holder);
  size_t events = 0;
  set.snapshot(
      [&](const Event& e) {
        const index::ApplyResult r = into.apply(holder, std::span(&e, 1));
        EXPECT_EQ(r.orphan_events + r.unknown_removals + r.malformed_events + r.moved_blocks, 0u)
            << "a snapshot's events all apply cleanly";
        ++events;
      },
      per_event);
  return events;
}

TEST(BlockSet, KeepsThePlaceOfAnEvictedBlockWhileABlockAfterItIsHeld) {
  BlockSet set;
  const std::vector<EngineHash> eng = {11, 12, 13};
  const std::vector<LocalHash> loc = {101, 102, 103};
  const Event stored{
      .kind = EventKind::kStored, .tier = Tier::kDevice, .engine_hashes = eng, .local_hashes = loc};
  set.apply(std::span(&stored, 1));
  EXPECT_EQ(set.held(), 3u);
  EXPECT_EQ(set.ghosts(), 0u);
  const std::vector<EngineHash> first = {11};
  const Event evicted{.kind = EventKind::kRemoved, .tier = Tier::kDevice, .engine_hashes = first};
  set.apply(std::span(&evicted, 1));
  EXPECT_EQ(set.held(), 2u);
  EXPECT_EQ(set.ghosts(), 1u) << "block 11's place leads to 12 and 13";

  auto direct = reference();
  direct->apply(HolderId(0), std::span(&stored, 1));
  direct->apply(HolderId(0), std::span(&evicted, 1));
  auto rebuilt = reference();
  std::vector<Event> kinds;
  set.snapshot([&](const Event& e) {
    kinds.push_back(e);
    rebuilt->apply(HolderId(0), std::span(&e, 1));
  });
  ASSERT_EQ(kinds.size(), 2u) << "one stored chain, one removal of the ghost";
  EXPECT_EQ(kinds[0].kind, EventKind::kStored);
  EXPECT_EQ(kinds[1].kind, EventKind::kRemoved);
  EXPECT_EQ(held(*rebuilt, HolderId(0)), held(*direct, HolderId(0)));

  const std::vector<EngineHash> rest = {12, 13};
  const Event gone{.kind = EventKind::kRemoved, .tier = Tier::kDevice, .engine_hashes = rest};
  set.apply(std::span(&gone, 1));
  EXPECT_EQ(set.held(), 0u);
  EXPECT_EQ(set.ghosts(), 0u) << "nothing leads anywhere any more";
  EXPECT_EQ(set.copies(), 0u);
}

// The exactness corpus (chains, evictions of middle blocks, heals, duplicate and host copies,
// clears, orphans, moved engine hashes, twins, malformed events) into a reference indexer and
// into a BlockSet per holder. Every batch does to the BlockSet what it does to the reference;
// every few batches the batch's holder is rebuilt from its snapshot in a second reference, which
// then goes on with the live batches: it must hold what the first holds, at once and at the end.
TEST(BlockSet, SnapshotsRebuildWhatTheReferenceHoldsOnTheExactnessCorpus) {
  for (uint64_t seed : {1, 2, 3}) {
    index::harness::CorpusGenerator gen({.seed = seed, .holders = 6, .holder_capacity = 256});
    auto direct = reference();
    auto relayed = reference();
    std::map<HolderId, BlockSet> sets;
    index::harness::Step step;
    uint64_t batches = 0, rebuilds = 0, ghosts_seen = 0;
    while (gen.events() < 40'000) {
      gen.next(step);
      if (step.kind == index::harness::Step::Kind::kRemoveHolder) {
        direct->remove_holder(step.holder);
        relayed->remove_holder(step.holder);
        sets.erase(step.holder);
        continue;
      }
      const index::ApplyResult want = direct->apply(step.holder, step.events);
      const index::ApplyResult got = sets[step.holder].apply(step.events);
      ASSERT_EQ(got, want) << "seed " << seed << " batch " << batches << ": " << step.describe();
      relayed->apply(step.holder, step.events);
      if (++batches % 37 == 0) {
        const BlockSet& set = sets[step.holder];
        ghosts_seen += set.ghosts();
        rebuild(*relayed, step.holder, set, 1 + batches % 64);
        ++rebuilds;
        ASSERT_EQ(held(*relayed, step.holder), held(*direct, step.holder))
            << "seed " << seed << " rebuild after batch " << batches;
      }
    }
    std::vector<Membership> a, b;
    ASSERT_TRUE(direct->memberships(a).ok());
    ASSERT_TRUE(relayed->memberships(b).ok());
    EXPECT_EQ(a, b) << "seed " << seed;
    EXPECT_GT(rebuilds, 100u);
    EXPECT_GT(ghosts_seen, 0u) << "the corpus evicts middle blocks";
  }
}

}  // namespace
}  // namespace kvgate::relay
