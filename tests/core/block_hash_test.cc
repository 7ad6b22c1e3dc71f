#include "kvgate/core/block_hash.h"

#include <gtest/gtest.h>

#include <numeric>

#include "xxhash.h"

namespace kvgate {
namespace {

std::vector<TokenId> iota_tokens(size_t n, TokenId first) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Pinned values: a change here changes every router's block names and breaks agreement between
// replicas and with stored corpora. Change them only with a scheme change that says so.
TEST(BlockHash, LocalHashOfFixedBlocksIsPinned) {
  const BlockHasher h;
  const auto block = iota_tokens(16, 0);
  EXPECT_EQ(h.local(block), 0xd47a8f41c833328aULL);
  EXPECT_EQ(h.local(iota_tokens(16, 1000)), 0xf7e6c5a1896bad24ULL);
  EXPECT_EQ(h.local(std::span<const TokenId>()), 0xd1f3e77444430ab9ULL);
}

TEST(BlockHash, LocalHashIsXxh3OverLittleEndianU32) {
  const BlockHasher h(7);
  const std::vector<TokenId> block = {1, 0x01020304, 0xffffffff};
  const unsigned char bytes[] = {1, 0, 0, 0, 4, 3, 2, 1, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(h.local(block), XXH3_64bits_withSeed(bytes, sizeof(bytes), 7));
}

TEST(BlockHash, ChainIsPinnedAndOrderSensitive) {
  const BlockHasher h;
  EXPECT_EQ(h.chain(1, 2), 0xe853d985bbde7cf0ULL);
  EXPECT_NE(h.chain(1, 2), h.chain(2, 1));
}

TEST(BlockHash, SequenceStartsWithLocalAndChains) {
  const BlockHasher h;
  const auto tokens = iota_tokens(4 * 16 + 5, 0);  // 4 full blocks and a partial one
  std::vector<LocalHash> local;
  std::vector<SeqHash> seq;
  ASSERT_EQ(h.hash_blocks(tokens, 16, &local, &seq), 4u);
  ASSERT_EQ(local.size(), 4u);
  ASSERT_EQ(seq.size(), 4u);
  EXPECT_EQ(seq[0], local[0]);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(local[i], h.local(std::span(tokens).subspan(i * 16, 16)));
    EXPECT_EQ(seq[i], h.chain(seq[i - 1], local[i]));
  }
  EXPECT_EQ(seq[3], 0x35f7c0d119848950ULL);
}

TEST(BlockHash, ContinuingAChainEqualsHashingTheWhole) {
  const BlockHasher h;
  const auto tokens = iota_tokens(64, 3);
  std::vector<SeqHash> whole;
  h.hash_blocks(tokens, 16, nullptr, &whole);
  std::vector<SeqHash> head, tail;
  h.hash_blocks(std::span(tokens).first(32), 16, nullptr, &head);
  h.hash_blocks(std::span(tokens).subspan(32), 16, nullptr, &tail, &head.back());
  head.insert(head.end(), tail.begin(), tail.end());
  EXPECT_EQ(head, whole);
}

TEST(BlockHash, SaltSeparatesNamespacesAndEmptySaltIsUnsalted) {
  const BlockHasher h;
  const auto block = iota_tokens(16, 0);
  EXPECT_EQ(h.salted("").local(block), h.local(block));
  EXPECT_NE(h.salted("lora-a").local(block), h.local(block));
  EXPECT_NE(h.salted("lora-a").local(block), h.salted("lora-b").local(block));
  EXPECT_EQ(h.salted("lora-a").local(block), 0x9bb53db7405d0ca5ULL);
  // The chain step is not salted: the salt enters through seq[0] = local[0].
  EXPECT_EQ(h.salted("lora-a").chain(5, 6), h.chain(5, 6));
}

TEST(BlockHash, SeedChangesEverything) {
  const auto block = iota_tokens(16, 0);
  EXPECT_NE(BlockHasher(1).local(block), BlockHasher(2).local(block));
  EXPECT_NE(BlockHasher(1).chain(1, 2), BlockHasher(2).chain(1, 2));
}

TEST(BlockHash, ZeroBlockSizeHashesNothing) {
  std::vector<SeqHash> seq;
  EXPECT_EQ(BlockHasher().hash_blocks(iota_tokens(10, 0), 0, nullptr, &seq), 0u);
  EXPECT_TRUE(seq.empty());
}

}  // namespace
}  // namespace kvgate
