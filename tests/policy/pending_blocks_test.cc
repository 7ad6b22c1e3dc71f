#include "policy/detail/pending_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace kvgate::policy::detail {
namespace {

using Matches = std::vector<index::HolderMatch>;

// The depth `lookup` gives `holder` for `chain` (0: not reported).
uint32_t depth(const PendingBlocks& p, HolderId holder, const std::vector<SeqHash>& chain) {
  Matches out;
  p.lookup(chain, out);
  for (const auto& m : out) {
    if (m.holder == holder) return m.any_depth;
  }
  return 0;
}

std::vector<SeqHash> chain_of(SeqHash first, size_t blocks) {
  std::vector<SeqHash> c(blocks);
  for (size_t i = 0; i < blocks; ++i) c[i] = first + i;
  return c;
}

TEST(PendingBlocks, EachHolderGetsTheLongestPrefixItsCreditsCover) {
  ManualClock clock;
  PendingBlocks p({}, clock);
  EXPECT_TRUE(p.empty());
  const std::vector<SeqHash> a = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<SeqHash> b = {1, 2, 3, 40, 50};  // shares three blocks with a
  ASSERT_NE(p.add(WorkerId(1), HolderId(1), a), 0u);
  ASSERT_NE(p.add(WorkerId(2), HolderId(2), b), 0u);
  ASSERT_NE(p.add(WorkerId(3), HolderId(3), std::vector<SeqHash>{1, 2}), 0u);
  EXPECT_EQ(depth(p, HolderId(1), a), 8u);
  EXPECT_EQ(depth(p, HolderId(2), a), 3u);
  EXPECT_EQ(depth(p, HolderId(3), a), 2u);
  EXPECT_EQ(depth(p, HolderId(1), b), 3u);
  EXPECT_EQ(depth(p, HolderId(2), b), 5u);
  EXPECT_EQ(depth(p, HolderId(1), std::vector<SeqHash>{1, 2, 3, 4, 99}), 4u);
  EXPECT_EQ(depth(p, HolderId(1), std::vector<SeqHash>{9, 20, 30}), 0u);  // another prompt
  Matches out;
  p.lookup(a, out);
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(p.add(WorkerId(1), HolderId(1), std::vector<SeqHash>{}), 0u);
  EXPECT_EQ(p.stats().live_requests, 3u);
  EXPECT_EQ(p.stats().live_blocks, 15u);
}

TEST(PendingBlocks, ACreditEndsAtItsGraceAfterTheFirstTokenOrAtItsMaxAge) {
  ManualClock clock;
  PendingBlocks p({.max_age = std::chrono::seconds(30), .grace = std::chrono::seconds(1)}, clock);
  const std::vector<SeqHash> chain = {1, 2, 3};
  const uint64_t prefilled = p.add(WorkerId(1), HolderId(1), chain);
  p.add(WorkerId(2), HolderId(2), chain);  // never gets a first token
  clock.advance(std::chrono::seconds(5));
  p.prefilled(prefilled);
  clock.advance(std::chrono::milliseconds(999));
  EXPECT_EQ(depth(p, HolderId(1), chain), 3u);
  clock.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(depth(p, HolderId(1), chain), 0u);
  EXPECT_EQ(depth(p, HolderId(2), chain), 3u);
  clock.advance(std::chrono::seconds(24));
  EXPECT_EQ(depth(p, HolderId(2), chain), 0u);
  // A later first token does not extend a credit past its max age.
  const uint64_t late = p.add(WorkerId(3), HolderId(3), chain);
  clock.advance(std::chrono::milliseconds(29'500));
  p.prefilled(late);
  clock.advance(std::chrono::milliseconds(600));
  EXPECT_EQ(depth(p, HolderId(3), chain), 0u);
  p.add(WorkerId(4), HolderId(4), std::vector<SeqHash>{7});  // sweeps the expired ones
  EXPECT_EQ(p.stats().live_requests, 1u);
}

TEST(PendingBlocks, AWithdrawnCreditCountsNoMoreAndOthersOnTheSameBlocksStay) {
  ManualClock clock;
  PendingBlocks p({}, clock);
  const std::vector<SeqHash> chain = {1, 2, 3, 4};
  const uint64_t first = p.add(WorkerId(1), HolderId(1), chain);
  const uint64_t second = p.add(WorkerId(1), HolderId(1), std::vector<SeqHash>{1, 2});
  p.withdraw(first);
  EXPECT_EQ(depth(p, HolderId(1), chain), 2u);
  p.withdraw(first);  // twice: no-op
  p.withdraw(second);
  EXPECT_EQ(depth(p, HolderId(1), chain), 0u);
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.stats().withdrawn, 2u);
  EXPECT_EQ(p.stats().live_blocks, 0u);
  p.withdraw(12345);  // never issued
}

TEST(PendingBlocks, AWorkerLeavingEndsItsCreditsOnly) {
  ManualClock clock;
  PendingBlocks p({}, clock);
  const std::vector<SeqHash> chain = {1, 2, 3};
  p.add(WorkerId(1), HolderId(1), chain);
  p.add(WorkerId(2), HolderId(2), chain);
  p.forget(WorkerId(1));
  EXPECT_EQ(depth(p, HolderId(1), chain), 0u);
  EXPECT_EQ(depth(p, HolderId(2), chain), 3u);
}

TEST(PendingBlocks, BoundsEndTheOldestCreditsFirst) {
  ManualClock clock;
  PendingBlocks by_count({.max_requests = 2}, clock);
  by_count.add(WorkerId(1), HolderId(1), std::vector<SeqHash>{1});
  by_count.add(WorkerId(2), HolderId(2), std::vector<SeqHash>{1});
  by_count.add(WorkerId(3), HolderId(3), std::vector<SeqHash>{1});
  EXPECT_EQ(depth(by_count, HolderId(1), {1}), 0u);
  EXPECT_EQ(depth(by_count, HolderId(2), {1}), 1u);
  EXPECT_EQ(depth(by_count, HolderId(3), {1}), 1u);
  EXPECT_EQ(by_count.stats().evicted, 1u);

  PendingBlocks by_blocks({.capacity_blocks = 10}, clock);
  by_blocks.add(WorkerId(1), HolderId(1), chain_of(100, 6));
  by_blocks.add(WorkerId(2), HolderId(2), chain_of(100, 4));
  by_blocks.add(WorkerId(3), HolderId(3), chain_of(100, 3));  // 13 > 10: the oldest goes
  EXPECT_EQ(depth(by_blocks, HolderId(1), chain_of(100, 6)), 0u);
  EXPECT_EQ(depth(by_blocks, HolderId(2), chain_of(100, 6)), 4u);
  by_blocks.add(WorkerId(4), HolderId(4), chain_of(100, 50));  // longer than all: its head only
  EXPECT_EQ(depth(by_blocks, HolderId(4), chain_of(100, 50)), 10u);
  EXPECT_LE(by_blocks.stats().live_blocks, 10u);
}

TEST(PendingBlocks, LongChainsAreFoundByBinarySearchExactly) {
  ManualClock clock;
  PendingBlocks p({.depth_levels = 64}, clock);
  const std::vector<SeqHash> chain = chain_of(1000, 5000);
  // Holders 1..40, holder h credited with the chain's first 100*h+h blocks.
  for (uint32_t h = 1; h <= 40; ++h) {
    p.add(WorkerId(h), HolderId(h), std::span(chain).first(100 * h + h));
  }
  Matches out;
  p.lookup(chain, out);
  ASSERT_EQ(out.size(), 40u);
  for (const auto& m : out) EXPECT_EQ(m.any_depth, 100 * m.holder.value() + m.holder.value());
}

// Only the holders at the deepest few depths are counted: each level costs a search.
TEST(PendingBlocks, ALookupCountsTheDeepestLevelsOnly) {
  ManualClock clock;
  PendingBlocks p({.depth_levels = 2}, clock);
  const std::vector<SeqHash> chain = chain_of(1, 10);
  p.add(WorkerId(1), HolderId(1), chain_of(1, 10));
  p.add(WorkerId(2), HolderId(2), chain_of(1, 10));  // the same level as holder 1
  p.add(WorkerId(3), HolderId(3), chain_of(1, 6));
  p.add(WorkerId(4), HolderId(4), chain_of(1, 3));  // a third level: not counted
  EXPECT_EQ(depth(p, HolderId(1), chain), 10u);
  EXPECT_EQ(depth(p, HolderId(2), chain), 10u);
  EXPECT_EQ(depth(p, HolderId(3), chain), 6u);
  EXPECT_EQ(depth(p, HolderId(4), chain), 0u);
}

// Dispatches, first tokens, failures and lookups from several threads at once: under
// ThreadSanitizer, no race; and every lookup's depths are what some credit covers.
TEST(PendingBlocks, ConcurrentUseStaysConsistent) {
  ManualClock clock;
  PendingBlocks p({.max_requests = 64, .capacity_blocks = 4096}, clock);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (uint32_t t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      for (uint32_t i = 0; i < 4000; ++i) {
        const size_t blocks = 1 + (i * 7 + t) % 200;
        const uint64_t ticket = p.add(WorkerId(t), HolderId(i % 16), chain_of(1, blocks));
        if (i % 3 == 0) p.withdraw(ticket);
        if (i % 3 == 1) p.prefilled(ticket);
        if (i % 500 == 0) p.forget(WorkerId(t));
      }
    });
  }
  std::thread reader([&] {
    Matches out;
    while (!stop.load()) {
      out.clear();
      p.lookup(chain_of(1, 200), out);
      for (const auto& m : out) ASSERT_LE(m.any_depth, 200u);
      (void)p.stats();
    }
  });
  for (auto& w : writers) w.join();
  stop = true;
  reader.join();
  EXPECT_LE(p.stats().live_requests, 64u);
  EXPECT_LE(p.stats().live_blocks, 4096u);
}

}  // namespace
}  // namespace kvgate::policy::detail
