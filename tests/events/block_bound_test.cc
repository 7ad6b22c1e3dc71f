#include "kvgate/events/block_bound.h"

#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <vector>

namespace kvgate::events {
namespace {

TEST(BlockLimit, ThePoolTimesTheMarginOrTheDefault) {
  EXPECT_EQ(holder_block_limit(26'000, 2.0, 1 << 20), 52'000u);
  EXPECT_EQ(holder_block_limit(1'001, 1.5, 1 << 20), 1'502u);  // rounded up
  EXPECT_EQ(holder_block_limit(0, 2.0, 4096), 4096u) << "pool unknown";
  EXPECT_EQ(holder_block_limit(index::kMaxCapacityHint + 1, 2.0, 4096), 4096u)
      << "a pool no GPU holds is not believed";
  EXPECT_EQ(holder_block_limit(100, 0.5, 4096), 100u) << "a margin below 1 is 1";
}

// A holder in a reference index fed as a lane feeds it: room made before each batch, the batch
// applied, its stores remembered, and a clear when nothing is left to evict.
class Holder {
 public:
  explicit Holder(uint64_t limit)
      : index_(*index::make_indexer(index::IndexKind::kReference)), bound_(limit) {}

  void apply(std::vector<index::Event> events) {
    uint64_t incoming = 0;
    for (const auto& e : events)
      if (e.kind == index::EventKind::kStored) incoming += e.engine_hashes.size();
    make_room(incoming);
    held_ = index::blocks_after(held_, index_->apply(kHolder, events));
    bound_.remember(events, held_);
    make_room(0);
    ASSERT_LE(held_, bound_.limit());
    ASSERT_EQ(held_, memberships());
  }

  std::vector<EngineHash> held_hashes() const {
    std::vector<index::Membership> m;
    EXPECT_TRUE(index_->holder_memberships(kHolder, m).ok());
    std::vector<EngineHash> out;
    for (const auto& x : m) out.push_back(x.seq);
    return out;
  }
  size_t memberships() const {
    std::vector<index::Membership> m;
    EXPECT_TRUE(index_->holder_memberships(kHolder, m).ok());
    size_t copies = 0;
    for (const auto& x : m) copies += std::popcount(x.tier_mask);
    return copies;
  }
  uint64_t held() const { return held_; }
  int clears() const { return clears_; }
  BlockBound& bound() { return bound_; }

 private:
  void make_room(uint64_t incoming) {
    for (auto r = bound_.make_room(held_, incoming); !r.empty();
         r = bound_.make_room(held_, incoming)) {
      held_ = index::blocks_after(held_, index_->apply(kHolder, r));
    }
    if (held_ + std::min(incoming, bound_.limit()) > bound_.limit()) {
      const index::Event clear{};
      index_->apply(kHolder, std::span<const index::Event>(&clear, 1));
      held_ = 0;
      bound_.forget_all();
      ++clears_;
    }
  }

  static constexpr HolderId kHolder{1};
  std::unique_ptr<index::Indexer> index_;
  BlockBound bound_;
  uint64_t held_ = 0;
  int clears_ = 0;
};

// Stored events of single-block sequences (no parent, so every store applies), with their
// buffers kept alive.
struct Stores {
  std::vector<std::unique_ptr<std::vector<EngineHash>>> hashes;
  std::vector<index::Event> of(uint64_t first, uint64_t n,
                               index::Tier tier = index::Tier::kDevice) {
    std::vector<index::Event> out;
    for (uint64_t h = first; h < first + n; ++h) {
      hashes.push_back(std::make_unique<std::vector<EngineHash>>(1, h));
      index::Event e;
      e.kind = index::EventKind::kStored;
      e.tier = tier;
      e.engine_hashes = *hashes.back();
      e.local_hashes = *hashes.back();
      out.push_back(e);
    }
    return out;
  }
};

TEST(BlockBound, AStreamWithoutRemovalsKeepsItsNewestBlocksWithinTheLimit) {
  Holder h(100);
  Stores s;
  for (uint64_t k = 0; k < 50; ++k) h.apply(s.of(1000 + 7 * k, 7));  // 350 stores, none removed
  EXPECT_EQ(h.held(), 100u);
  EXPECT_EQ(h.clears(), 0);
  // Exactly the newest 100: what an engine of that size evicting its oldest would hold.
  std::vector<EngineHash> newest;
  for (EngineHash x = 1250; x < 1350; ++x) newest.push_back(x);
  EXPECT_EQ(h.held_hashes(), newest);
}

TEST(BlockBound, ABatchLargerThanTheLimitLeavesItsNewestBlocks) {
  Holder h(10);
  Stores s;
  h.apply(s.of(1, 25));
  EXPECT_EQ(h.held(), 10u);
  std::vector<EngineHash> newest;
  for (EngineHash x = 16; x < 26; ++x) newest.push_back(x);
  EXPECT_EQ(h.held_hashes(), newest);
}

TEST(BlockBound, AnHonestStreamIsNeverTouched) {
  // Stores and removals within the pool: nothing is evicted however long it runs.
  Holder h(64);
  Stores s;
  std::vector<std::unique_ptr<std::vector<EngineHash>>> removed;
  for (uint64_t k = 0; k < 500; ++k) {
    auto events = s.of(k, 1);
    if (k >= 60) {
      removed.push_back(std::make_unique<std::vector<EngineHash>>(1, k - 60));
      index::Event r;
      r.kind = index::EventKind::kRemoved;
      r.engine_hashes = *removed.back();
      events.insert(events.begin(), r);
    }
    h.apply(events);
  }
  EXPECT_EQ(h.held(), 60u);
  EXPECT_EQ(h.clears(), 0);
}

TEST(BlockBound, EvictingRemovesEveryTierTheHolderStoredOn) {
  Holder h(4);
  Stores s;
  h.apply(s.of(1, 2, index::Tier::kDevice));
  h.apply(s.of(1, 2, index::Tier::kHost));  // the same two blocks offloaded: 4 copies
  EXPECT_EQ(h.held(), 4u);
  h.apply(s.of(10, 2));  // the oldest stores go, each with its copies on both tiers
  EXPECT_LE(h.held(), 4u);
  EXPECT_EQ(h.clears(), 0);
}

TEST(BlockBound, WhenNothingRememberedCanBeEvictedTheHolderIsCleared) {
  Holder h(8);
  Stores s;
  h.apply(s.of(1, 8));
  h.bound().forget_all();  // as if every held block were older than the remembered stores
  h.apply(s.of(100, 1));
  EXPECT_EQ(h.clears(), 1);
  EXPECT_EQ(h.held(), 1u);
}

TEST(BlockBound, RemembersAtMostTwiceThePeakAndNeverMoreThanTheLimit) {
  BlockBound b(1'000'000);
  Stores s;
  for (uint64_t k = 0; k < 20'000; ++k) b.remember(s.of(k, 1), /*held=*/100);
  EXPECT_EQ(b.remembered(), 4096u) << "a holder that churns a small cache keeps a small memory";
  BlockBound small(50);
  for (uint64_t k = 0; k < 200; ++k) small.remember(s.of(k, 1), /*held=*/50);
  EXPECT_EQ(small.remembered(), 50u);
}

}  // namespace
}  // namespace kvgate::events
