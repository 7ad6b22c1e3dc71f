// The index semantics of docs/index.md, one rule at a time, for every indexer kind.
#include <deque>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const HolderId kA(0);
const HolderId kB(1);
const HolderId kC(7);

// Events point into buffers the caller keeps alive; this keeps them for the test's duration.
class Events {
 public:
  Event stored(std::vector<EngineHash> engine, std::vector<LocalHash> local,
               std::optional<EngineHash> parent = std::nullopt, Tier tier = Tier::kDevice) {
    Event e;
    e.kind = EventKind::kStored;
    e.tier = tier;
    e.has_parent = parent.has_value();
    e.parent = parent.value_or(0);
    e.engine_hashes = engine_.emplace_back(std::move(engine));
    e.local_hashes = local_.emplace_back(std::move(local));
    return e;
  }
  Event removed(std::vector<EngineHash> engine, Tier tier = Tier::kDevice) {
    Event e;
    e.kind = EventKind::kRemoved;
    e.tier = tier;
    e.engine_hashes = engine_.emplace_back(std::move(engine));
    return e;
  }
  static Event cleared() { return Event{}; }

 private:
  std::deque<std::vector<EngineHash>> engine_;
  std::deque<std::vector<LocalHash>> local_;
};

// The router's sequence hashes of a chain of local hashes.
std::vector<SeqHash> seqs(const std::vector<LocalHash>& local, uint64_t seed = kDefaultHashSeed) {
  BlockHasher h(seed);
  std::vector<SeqHash> out;
  for (size_t i = 0; i < local.size(); ++i)
    out.push_back(i == 0 ? local[0] : h.chain(out.back(), local[i]));
  return out;
}

HolderMatch match(HolderId h, uint32_t device, uint32_t any) { return {h, device, any}; }

class IndexSemanticsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { index_ = make(IndexerOptions{}); }

  std::unique_ptr<Indexer> make(IndexerOptions options) {
    std::string kind = GetParam();
    if (kind == "two-shard-chain") {  // holders split between two chain indexes
      kind = "chain";
      options.shards = 2;
    } else if (kind == "node-shard-chain") {  // one shard per (described) NUMA node
      kind = "chain";
      options.shard_memory_nodes = {-1, -1};
    }
    const bool synchronized = kind.starts_with("synchronized-");
    auto parsed = parse_index_kind(synchronized ? kind.substr(13) : kind);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    auto made = make_indexer(*parsed, options);
    EXPECT_TRUE(made.ok()) << made.status();
    std::unique_ptr<Indexer> index = std::move(*made);
    return synchronized ? make_synchronized(std::move(index)) : std::move(index);
  }

  ApplyResult apply(HolderId h, std::vector<Event> events) { return index_->apply(h, events); }
  ApplyResult apply(HolderId h, Event e) { return index_->apply(h, std::span<const Event>(&e, 1)); }

  std::vector<HolderMatch> lookup(const std::vector<SeqHash>& chain) {
    std::vector<HolderMatch> out;
    index_->lookup(chain, out);
    return out;
  }

  std::vector<Membership> memberships() {
    std::vector<Membership> out;
    EXPECT_TRUE(index_->memberships(out).ok());
    return out;
  }

  Events ev_;
  std::unique_ptr<Indexer> index_;
};

TEST_P(IndexSemanticsTest, RootStoreIsFoundAsAContiguousPrefix) {
  const ApplyResult r = apply(kA, ev_.stored({11, 12, 13}, {1, 2, 3}));
  EXPECT_EQ(r.stored_blocks, 3u);
  EXPECT_EQ(r, (ApplyResult{.stored_blocks = 3}));
  EXPECT_THAT(lookup(seqs({1, 2, 3})), ElementsAre(match(kA, 3, 3)));
  EXPECT_THAT(lookup(seqs({1, 2, 3, 4, 5})), ElementsAre(match(kA, 3, 3)));
  EXPECT_THAT(lookup(seqs({1, 2})), ElementsAre(match(kA, 2, 2)));
  EXPECT_THAT(lookup(seqs({1, 9, 3})), ElementsAre(match(kA, 1, 1)));
  // The same local hashes elsewhere in a chain are other blocks.
  EXPECT_THAT(lookup(seqs({2, 3})), IsEmpty());
  EXPECT_THAT(lookup({}), IsEmpty());
}

TEST_P(IndexSemanticsTest, StoreWithParentContinuesTheParentsSequence) {
  apply(kA, ev_.stored({11}, {1}));
  apply(kA, ev_.stored({12, 13}, {2, 3}, 11));
  EXPECT_THAT(lookup(seqs({1, 2, 3})), ElementsAre(match(kA, 3, 3)));
}

TEST_P(IndexSemanticsTest, SequenceHashesUseTheConfiguredSeed) {
  index_ = make(IndexerOptions{.hash_seed = 99});
  apply(kA, ev_.stored({11, 12}, {1, 2}));
  EXPECT_THAT(lookup(seqs({1, 2}, 99)), ElementsAre(match(kA, 2, 2)));
  EXPECT_THAT(lookup(seqs({1, 2})), ElementsAre(match(kA, 1, 1)));
}

TEST_P(IndexSemanticsTest, OrphanStoreIsCountedAndDroppedWhole) {
  ApplyResult r = apply(kA, ev_.stored({12, 13}, {2, 3}, 11));
  EXPECT_EQ(r, (ApplyResult{.orphan_events = 1, .orphan_blocks = 2}));
  EXPECT_THAT(memberships(), IsEmpty());
  EXPECT_EQ(index_->stats().holders, 0u);
  // Another holder holding the parent does not help: parents resolve through the holder's own.
  apply(kB, ev_.stored({11}, {1}));
  r = apply(kA, ev_.stored({12}, {2}, 11));
  EXPECT_EQ(r.orphan_events, 1u);
  EXPECT_THAT(lookup(seqs({1, 2})), ElementsAre(match(kB, 1, 1)));
}

TEST_P(IndexSemanticsTest, ParentResolvesThroughAnyTier) {
  apply(kA, ev_.stored({11}, {1}, std::nullopt, Tier::kHost));
  const ApplyResult r = apply(kA, ev_.stored({12}, {2}, 11));
  EXPECT_EQ(r, (ApplyResult{.stored_blocks = 1}));
  EXPECT_THAT(lookup(seqs({1, 2})), ElementsAre(match(kA, 0, 2)));
}

TEST_P(IndexSemanticsTest, ABlockLivesUntilItsLastCopyIsRemoved) {
  apply(kA, ev_.stored({11}, {1}));
  EXPECT_EQ(apply(kA, ev_.stored({11}, {1})).stored_blocks, 1u);
  EXPECT_EQ(apply(kA, ev_.removed({11})), (ApplyResult{.removed_blocks = 1}));
  EXPECT_THAT(lookup(seqs({1})), ElementsAre(match(kA, 1, 1)));
  EXPECT_EQ(apply(kA, ev_.removed({11})), (ApplyResult{.removed_blocks = 1}));
  EXPECT_THAT(lookup(seqs({1})), IsEmpty());
  EXPECT_EQ(apply(kA, ev_.removed({11})), (ApplyResult{.unknown_removals = 1}));
}

TEST_P(IndexSemanticsTest, CopiesOnSeveralTiersAreCountedPerTier) {
  apply(kA, ev_.stored({11}, {1}));
  apply(kA, ev_.stored({11}, {1}, std::nullopt, Tier::kHost));
  EXPECT_THAT(memberships(),
              ElementsAre(Membership{kA, 1, tier_bit(Tier::kDevice) | tier_bit(Tier::kHost)}));
  apply(kA, ev_.removed({11}, Tier::kDevice));
  EXPECT_THAT(lookup(seqs({1})), ElementsAre(match(kA, 0, 1)));
  EXPECT_THAT(memberships(), ElementsAre(Membership{kA, 1, tier_bit(Tier::kHost)}));
  // A removal on a tier without a copy is unknown, and leaves the other tier alone.
  EXPECT_EQ(apply(kA, ev_.removed({11}, Tier::kDevice)), (ApplyResult{.unknown_removals = 1}));
  EXPECT_THAT(lookup(seqs({1})), ElementsAre(match(kA, 0, 1)));
  apply(kA, ev_.removed({11}, Tier::kHost));
  EXPECT_THAT(memberships(), IsEmpty());
}

TEST_P(IndexSemanticsTest, DeviceDepthStopsAtTheFirstBlockNotOnTheDevice) {
  apply(kA, ev_.stored({11, 12}, {1, 2}));
  apply(kA, ev_.stored({13}, {3}, 12, Tier::kHost));
  apply(kA, ev_.stored({14}, {4}, 13, Tier::kDevice));
  EXPECT_THAT(lookup(seqs({1, 2, 3, 4})), ElementsAre(match(kA, 2, 4)));
  apply(kB, ev_.stored({11}, {1}, std::nullopt, Tier::kDisk));
  apply(kB, ev_.stored({12}, {2}, 11));
  EXPECT_THAT(lookup(seqs({1, 2, 3, 4})), ElementsAre(match(kA, 2, 4), match(kB, 0, 2)));
}

TEST_P(IndexSemanticsTest, ReStoringAnEngineHashElsewhereMovesIt) {
  apply(kA, ev_.stored({11, 12}, {1, 2}));
  apply(kA, ev_.stored({11}, {1}));  // a second copy, same place
  const ApplyResult r = apply(kA, ev_.stored({11}, {5}));
  EXPECT_EQ(r, (ApplyResult{.stored_blocks = 1, .moved_blocks = 1}));
  EXPECT_THAT(lookup(seqs({1, 2})), IsEmpty());  // 12 is still held, but after a hole
  EXPECT_THAT(lookup(seqs({5})), ElementsAre(match(kA, 1, 1)));
  // The move kept one copy on the new tier only: one removal ends it.
  apply(kA, ev_.removed({11}));
  EXPECT_THAT(lookup(seqs({5})), IsEmpty());
  EXPECT_THAT(memberships(), ElementsAre(Membership{kA, seqs({1, 2})[1], 1}));
}

TEST_P(IndexSemanticsTest, AMoveWithinOneEventCountsToo) {
  const ApplyResult r = apply(kA, ev_.stored({11, 11}, {1, 2}));
  EXPECT_EQ(r, (ApplyResult{.stored_blocks = 2, .moved_blocks = 1}));
  EXPECT_THAT(lookup(seqs({1, 2})), IsEmpty());
  EXPECT_THAT(memberships(), ElementsAre(Membership{kA, seqs({1, 2})[1], 1}));
}

TEST_P(IndexSemanticsTest, TwoEngineHashesForOneBlockAreTwoRecords) {
  apply(kA, ev_.stored({11}, {1}));
  apply(kA, ev_.stored({21}, {1}));  // another engine hash scheme, same content
  EXPECT_EQ(index_->stats().memberships, 1u);
  apply(kA, ev_.removed({11}));
  EXPECT_THAT(lookup(seqs({1})), ElementsAre(match(kA, 1, 1)));
  apply(kA, ev_.removed({21}));
  EXPECT_THAT(lookup(seqs({1})), IsEmpty());
}

TEST_P(IndexSemanticsTest, UnknownRemovalIsCountedAndIgnored) {
  apply(kA, ev_.stored({11}, {1}));
  EXPECT_EQ(apply(kA, ev_.removed({99, 11, 98})),
            (ApplyResult{.removed_blocks = 1, .unknown_removals = 2}));
  EXPECT_EQ(apply(kB, ev_.removed({11})), (ApplyResult{.unknown_removals = 1}));
  EXPECT_EQ(index_->stats().holders, 0u);
}

TEST_P(IndexSemanticsTest, RemovingAMiddleBlockLeavesAHoleAndAHealRestoresDepth) {
  apply(kA, ev_.stored({11, 12, 13, 14}, {1, 2, 3, 4}));
  apply(kA, ev_.removed({12}));
  EXPECT_THAT(lookup(seqs({1, 2, 3, 4})), ElementsAre(match(kA, 1, 1)));
  EXPECT_EQ(index_->stats().memberships, 3u);
  // A store under the evicted block is an orphan until the block returns.
  EXPECT_EQ(apply(kA, ev_.stored({15}, {5}, 12)).orphan_events, 1u);
  apply(kA, ev_.stored({12}, {2}, 11));
  EXPECT_THAT(lookup(seqs({1, 2, 3, 4})), ElementsAre(match(kA, 4, 4)));
}

TEST_P(IndexSemanticsTest, ClearedEmptiesOnlyThatHolder) {
  apply(kA, ev_.stored({11, 12}, {1, 2}));
  apply(kB, ev_.stored({11, 12}, {1, 2}));
  const ApplyResult r =
      apply(kA, {ev_.stored({13}, {3}, 12), Events::cleared(), ev_.stored({14}, {4}, 12)});
  EXPECT_EQ(r,
            (ApplyResult{.stored_blocks = 1, .orphan_events = 1, .orphan_blocks = 1, .clears = 1}));
  EXPECT_THAT(lookup(seqs({1, 2, 3})), ElementsAre(match(kB, 2, 2)));
  EXPECT_EQ(index_->stats().holders, 1u);
  // Clearing an empty holder is still a clear.
  EXPECT_EQ(apply(kC, Events::cleared()).clears, 1u);
}

TEST_P(IndexSemanticsTest, RemovedHolderLeavesNothingAndItsIdStartsEmpty) {
  apply(kA, ev_.stored({11, 12}, {1, 2}));
  apply(kA, ev_.stored({11}, {1}, std::nullopt, Tier::kHost));
  apply(kB, ev_.stored({11}, {1}));
  index_->remove_holder(kA);
  index_->remove_holder(kC);  // unknown: a no-op
  EXPECT_THAT(lookup(seqs({1, 2})), ElementsAre(match(kB, 1, 1)));
  const IndexStats s = index_->stats();
  EXPECT_EQ(s.holders, 1u);
  EXPECT_EQ(s.resident_blocks, 1u);
  EXPECT_EQ(s.memberships, 1u);
  EXPECT_EQ(apply(kA, ev_.stored({12}, {2}, 11)).orphan_events, 1u);
  EXPECT_EQ(apply(kA, ev_.removed({11}, Tier::kHost)).unknown_removals, 1u);
  index_->remove_holder(kB);
  EXPECT_THAT(memberships(), IsEmpty());
  EXPECT_EQ(index_->stats().resident_blocks, 0u);
}

TEST_P(IndexSemanticsTest, MalformedEventsAreSkippedAndTheRestApplies) {
  Event bad_tier = ev_.stored({31}, {1});
  bad_tier.tier = static_cast<Tier>(9);
  Event bad_kind = ev_.removed({11});
  bad_kind.kind = static_cast<EventKind>(7);
  const ApplyResult r = apply(kA, {ev_.stored({11, 12}, {1}), ev_.stored({}, {}), bad_tier,
                                   bad_kind, ev_.stored({21}, {1}), ev_.removed({})});
  EXPECT_EQ(r, (ApplyResult{.stored_blocks = 1, .malformed_events = 4}));
  EXPECT_THAT(lookup(seqs({1})), ElementsAre(match(kA, 1, 1)));
}

TEST_P(IndexSemanticsTest, LookupReportsHoldersSortedAndOmitsNonHolders) {
  apply(kC, ev_.stored({11, 12, 13}, {1, 2, 3}));
  apply(kA, ev_.stored({11}, {1}));
  apply(kB, ev_.stored({11, 12}, {1, 2}, std::nullopt, Tier::kHost));
  apply(HolderId(3), ev_.stored({41}, {4}));
  EXPECT_THAT(lookup(seqs({1, 2, 3})),
              ElementsAre(match(kA, 1, 1), match(kB, 0, 2), match(kC, 3, 3)));
  std::vector<HolderMatch> reused(5, match(kC, 9, 9));
  index_->lookup(seqs({4}), reused);
  EXPECT_THAT(reused, ElementsAre(match(HolderId(3), 1, 1)));
}

TEST_P(IndexSemanticsTest, StatsCountHoldersBlocksAndMemberships) {
  apply(kA, ev_.stored({11, 12}, {1, 2}));
  apply(kB, ev_.stored({11, 13}, {1, 3}));
  apply(kB, ev_.stored({11}, {1}, std::nullopt, Tier::kHost));
  const IndexStats s = index_->stats();
  EXPECT_EQ(s.holders, 2u);
  EXPECT_EQ(s.resident_blocks, 3u);
  EXPECT_EQ(s.memberships, 4u);
  EXPECT_GT(s.bytes, 0u);
  std::vector<Membership> b;
  ASSERT_TRUE(index_->holder_memberships(kB, b).ok());
  const auto ab = seqs({1, 2});
  const auto ac = seqs({1, 3});
  std::vector<Membership> want = {{kB, 1, tier_bit(Tier::kDevice) | tier_bit(Tier::kHost)},
                                  {kB, ac[1], tier_bit(Tier::kDevice)}};
  std::sort(want.begin(), want.end(), [](auto& x, auto& y) { return x.seq < y.seq; });
  EXPECT_EQ(b, want);
  ASSERT_TRUE(index_->holder_memberships(kC, b).ok());
  EXPECT_THAT(b, IsEmpty());
  EXPECT_EQ(memberships().size(), 4u);
  EXPECT_EQ(memberships().front().holder, kA);
  (void)ab;
}

INSTANTIATE_TEST_SUITE_P(Kinds, IndexSemanticsTest,
                         ::testing::Values("reference", "positional", "chain", "two-shard-chain",
                                           "node-shard-chain", "synchronized-reference",
                                           "synchronized-positional"),
                         [](const auto& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(IndexerBasics, NamesParseAndFactories) {
  EXPECT_EQ(tier_name(Tier::kDevice), "device");
  EXPECT_EQ(tier_name(Tier::kExternal), "external");
  EXPECT_EQ(*parse_index_kind("positional"), IndexKind::kPositional);
  EXPECT_EQ(index_kind_name(IndexKind::kReference), "reference");
  EXPECT_FALSE(parse_index_kind("run").ok());
  auto chain = make_indexer(IndexKind::kChain);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ((*chain)->name(), "chain");
  EXPECT_TRUE((*chain)->concurrency().lookups_concurrent_with_writes);
  auto ref = make_indexer(IndexKind::kReference);
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ((*ref)->name(), "reference");
  EXPECT_FALSE((*ref)->concurrency().lookups_concurrent_with_writes);
  auto sync = make_synchronized(std::move(*ref));
  EXPECT_EQ(sync->name(), "reference");
  EXPECT_TRUE(sync->concurrency().lookups_concurrent_with_writes);
  EXPECT_TRUE(sync->concurrency().writers_per_holder);
  Indexer* raw = sync.get();
  EXPECT_EQ(make_synchronized(std::move(sync)).get(), raw);  // already concurrent: unchanged
}

TEST(IndexerBasics, ApplyResultsAdd) {
  ApplyResult a{.stored_blocks = 1,
                .removed_blocks = 2,
                .orphan_events = 3,
                .orphan_blocks = 4,
                .unknown_removals = 5,
                .moved_blocks = 6,
                .malformed_events = 7,
                .clears = 8};
  ApplyResult b = a;
  b += a;
  EXPECT_EQ(b, (ApplyResult{2, 4, 6, 8, 10, 12, 14, 16}));
}

}  // namespace
}  // namespace kvgate::index
