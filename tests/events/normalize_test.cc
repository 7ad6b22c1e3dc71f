#include "kvgate/events/normalize.h"

#include <gtest/gtest.h>

#include "kvgate/events/encode.h"
#include "kvgate/index/indexer.h"

namespace kvgate::events {
namespace {

using index::EventKind;
using index::Tier;

BlockStored store(std::vector<EngineHash> hashes, std::vector<TokenId> tokens, uint32_t bs,
                  std::optional<EngineHash> parent = std::nullopt) {
  BlockStored s;
  s.block_hashes = std::move(hashes);
  s.token_ids = std::move(tokens);
  s.block_size = bs;
  s.parent = parent;
  return s;
}

// Encodes (vllm-map carries every field) and decodes, then normalizes.
NormalizedBatch normalize(Normalizer& n, std::vector<WireEvent> events,
                          WireFormat f = WireFormat::kVllmMap) {
  WireBatch b;
  b.events = std::move(events);
  std::string bytes;
  encode_batch(b, f, &bytes);
  static BatchDecoder decoder;
  static DecodedBatch decoded;
  EXPECT_TRUE(decoder.decode(bytes, &decoded));
  NormalizedBatch out;
  n.normalize(decoded, &out);
  return out;
}

size_t dropped(const NormalizedBatch& b, DropReason r) { return b.dropped[static_cast<size_t>(r)]; }

TEST(Normalize, TierFromMedium) {
  bool known;
  EXPECT_EQ(tier_of_medium(std::nullopt, &known), Tier::kDevice);
  EXPECT_TRUE(known);
  EXPECT_EQ(tier_of_medium("GPU"), Tier::kDevice);
  EXPECT_EQ(tier_of_medium("CPU"), Tier::kHost);
  EXPECT_EQ(tier_of_medium("CPU_PINNED"), Tier::kHost);
  EXPECT_EQ(tier_of_medium("DISK"), Tier::kDisk);
  EXPECT_EQ(tier_of_medium("EXTERNAL", &known), Tier::kExternal);
  EXPECT_TRUE(known);
  EXPECT_EQ(tier_of_medium("NVME_OF", &known), Tier::kExternal);
  EXPECT_FALSE(known);
}

TEST(Normalize, RoutingSaltRule) {
  EXPECT_EQ(routing_salt(std::nullopt, std::nullopt), "");
  EXPECT_EQ(routing_salt("", ""), "");
  EXPECT_EQ(routing_salt("ad", std::nullopt), "lora=ad");
  EXPECT_EQ(routing_salt(std::nullopt, "t"), "salt=t");
  EXPECT_EQ(routing_salt("ad", "t"), "lora=ad\x1fsalt=t");
  EXPECT_NE(routing_salt("x", std::nullopt), routing_salt(std::nullopt, "x"));
}

TEST(Normalize, StoresCarryLocalHashesOfTheirBlocks) {
  Normalizer n;
  BlockStored s = store({11, 12}, {1, 2, 3, 4}, 2, 10);
  s.lora_name = "ad";
  s.medium = "CPU";
  BlockRemoved r;
  r.block_hashes = {11};
  auto out = normalize(n, {s, r, AllBlocksCleared{}});
  ASSERT_EQ(out.events.size(), 3u);
  const index::Event& e = out.events[0];
  EXPECT_EQ(e.kind, EventKind::kStored);
  EXPECT_EQ(e.tier, Tier::kHost);
  EXPECT_TRUE(e.has_parent);
  EXPECT_EQ(e.parent, 10u);
  ASSERT_EQ(e.engine_hashes.size(), 2u);
  EXPECT_EQ(e.engine_hashes[1], 12u);
  ASSERT_EQ(e.local_hashes.size(), 2u);
  const BlockHasher h = BlockHasher().salted("lora=ad");
  const std::vector<TokenId> b1 = {3, 4};
  EXPECT_EQ(e.local_hashes[1], h.local(b1));
  EXPECT_NE(e.local_hashes[1], BlockHasher().local(b1));
  EXPECT_EQ(out.events[1].kind, EventKind::kRemoved);
  EXPECT_EQ(out.events[1].engine_hashes.size(), 1u);
  EXPECT_EQ(out.events[2].kind, EventKind::kCleared);
  EXPECT_EQ(n.block_size(), 2u);
  EXPECT_EQ(out.stored_blocks, 2u);
  // Moving the batch keeps the spans valid.
  NormalizedBatch moved = std::move(out);
  EXPECT_EQ(moved.events[0].engine_hashes[0], 11u);
}

TEST(Normalize, BadShapesDropOnlyThemselves) {
  Normalizer n;
  BlockRemoved empty;
  auto out = normalize(n, {store({1}, {1, 2, 3}, 2), store({2}, {1, 2}, 2), empty});
  EXPECT_EQ(dropped(out, DropReason::kTokenCountMismatch), 1u);
  EXPECT_EQ(dropped(out, DropReason::kEmptyEvent), 1u);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].engine_hashes[0], 2u);
}

TEST(Normalize, UnknownMediumIsExternalAndCounted) {
  Normalizer n;
  BlockStored s = store({1}, {1}, 1);
  s.medium = "TAPE";
  auto out = normalize(n, {s});
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].tier, Tier::kExternal);
  EXPECT_EQ(n.stats().unknown_mediums, 1u);
}

TEST(Normalize, BlockSizeIsLearnedAndChangesCounted) {
  Normalizer n;
  normalize(n, {store({1}, {1, 2}, 2)});
  EXPECT_EQ(n.block_size(), 2u);
  EXPECT_EQ(n.stats().block_size_changes, 0u);
  normalize(n, {store({2}, {1, 2, 3, 4}, 4)});
  EXPECT_EQ(n.block_size(), 4u);
  EXPECT_EQ(n.stats().block_size_changes, 1u);
}

BlockStored grouped(EngineHash h, int64_t g, std::optional<std::string> kind) {
  BlockStored s = store({h}, {1, 2}, 2);
  s.group_idx = g;
  s.kv_cache_spec_kind = std::move(kind);
  return s;
}

TEST(Normalize, WindowGroupDroppedWhileFullAttentionGroupPresent) {
  Normalizer n;
  // The window group is listed first; the full group in the same batch already rules it out.
  auto out = normalize(n, {grouped(1, 1, "sliding_window"), grouped(2, 0, "full_attention")});
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].engine_hashes[0], 2u);
  EXPECT_EQ(dropped(out, DropReason::kSlidingWindowGroup), 1u);
  BlockRemoved r1, r0;
  r1.block_hashes = {1};
  r1.group_idx = 1;
  r0.block_hashes = {2};
  r0.group_idx = 0;
  out = normalize(n, {r1, r0});
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].engine_hashes[0], 2u);
  EXPECT_EQ(dropped(out, DropReason::kSlidingWindowGroup), 1u);
  EXPECT_EQ(n.stats().group_policy_clears, 0u);
}

TEST(Normalize, WindowOnlyGroupsApplyUntilAFullGroupAppears) {
  Normalizer n;
  BlockStored w = grouped(1, 1, std::nullopt);
  w.kv_cache_spec_sliding_window = 128;
  auto out = normalize(n, {w});
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].kind, EventKind::kStored);
  // The full group shows up: the holder is cleared first, then only the full group applies.
  out = normalize(n, {grouped(3, 1, "sliding_window"), grouped(2, 0, std::nullopt)});
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[0].kind, EventKind::kCleared);
  EXPECT_EQ(out.events[1].engine_hashes[0], 2u);
  EXPECT_EQ(n.stats().group_policy_clears, 1u);
}

// Normalized events applied to the reference index answer a request whose chain the router
// computes from the same tokens and salt.
TEST(Normalize, AppliedStoresMeetTheRequestChain) {
  for (WireFormat f : kAllWireFormats) {
    SCOPED_TRACE(wire_format_name(f));
    auto idx = index::make_indexer(index::IndexKind::kReference);
    ASSERT_TRUE(idx.ok());
    Normalizer n;
    BlockStored a = store({100, 101}, {1, 2, 3, 4}, 2);
    a.cache_salt = "tenant";
    BlockStored b = store({102}, {5, 6}, 2, 101);
    b.cache_salt = "tenant";
    // Two batches: vLLM names the salt only in the first store's extra keys.
    auto out = normalize(n, {a}, f);
    auto out2 = normalize(n, {b}, f);
    out.events.insert(out.events.end(), out2.events.begin(), out2.events.end());
    const HolderId holder(3);
    const auto r = (*idx)->apply(holder, out.events);
    EXPECT_EQ(r.stored_blocks, 3u);
    EXPECT_EQ(r.orphan_events, 0u);
    std::vector<SeqHash> chain;
    const std::vector<TokenId> prompt = {1, 2, 3, 4, 5, 6, 7};
    BlockHasher()
        .salted(routing_salt(std::nullopt, "tenant"))
        .hash_blocks(prompt, 2, nullptr, &chain);
    std::vector<index::HolderMatch> matches;
    (*idx)->lookup(chain, matches);
    ASSERT_EQ(matches.size(), 1u);
    EXPECT_EQ(matches[0].holder, holder);
    EXPECT_EQ(matches[0].device_depth, 3u);
    // Without the salt the request meets nothing.
    chain.clear();
    BlockHasher().hash_blocks(prompt, 2, nullptr, &chain);
    (*idx)->lookup(chain, matches);
    EXPECT_TRUE(matches.empty());
  }
}

}  // namespace
}  // namespace kvgate::events
