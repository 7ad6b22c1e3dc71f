#include "kvgate/events/engine_hash.h"

#include <gtest/gtest.h>

#include <vector>

#include "mp_bytes.h"

namespace kvgate::events {
namespace {

using testing::hex;

std::string hex(const Digest& d) {
  return hex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

// Pinned digests were computed outside kvgate: Python's hashlib.sha256 over CBOR bytes written
// out by hand (e.g. 0x83 0x58 0x20 <32 bytes> 0x84 01 02 03 04 0xf6 for block [1, 2, 3, 4]), the
// bytes cbor2.dumps((parent, (1, 2, 3, 4), None), canonical=True) produces.
TEST(VllmSha256Cbor, NoneHashIsSha256OfCborTextSeed) {
  EXPECT_EQ(hex(VllmSha256Cbor().none_hash()),
            "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0");
  // PYTHONHASHSEED=0 makes the seed the one-character string "0".
  EXPECT_EQ(hex(VllmSha256Cbor("0").none_hash()),
            "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e");
}

TEST(VllmSha256Cbor, FirstBlockChainsFromNoneHash) {
  const VllmSha256Cbor h;
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  const Digest b0 = h.block(h.none_hash(), tokens);
  EXPECT_EQ(hex(b0), "58d0879dff3800f65f8c5fd449d73048c0f7699dd238a03b84b146b151d55111");
  EXPECT_EQ(VllmSha256Cbor::wire_value(b0), 0x84b146b151d55111ULL);
}

TEST(VllmSha256Cbor, TokenHeadsUseShortestCborForm) {
  const VllmSha256Cbor h;
  const std::vector<TokenId> t0 = {1, 2, 3, 4};
  const Digest b0 = h.block(h.none_hash(), t0);
  // Each value sits on a head-size boundary: 1-byte inline, 0x18, 0x19, 0x1a forms.
  const std::vector<TokenId> t1 = {23, 24, 255, 256, 65535, 65536, 0xffffffffu};
  const Digest b1 = h.block(b0, t1);
  EXPECT_EQ(hex(b1), "0e30eb6c87bb8cae9795d190ab4e7c6bb795a5ba4f4ffe6c0b463c935fbf7903");
  EXPECT_EQ(VllmSha256Cbor::wire_value(b1), 0x0b463c935fbf7903ULL);
}

TEST(VllmSha256Cbor, ExtraKeysCarryLoraOnEveryBlockAndSaltOnBlockZero) {
  EXPECT_EQ(hex(VllmSha256Cbor::extra_keys_cbor(std::nullopt, std::nullopt, 0)), "f6");
  EXPECT_EQ(hex(VllmSha256Cbor::extra_keys_cbor(std::nullopt, "s", 0)), "816173");
  EXPECT_EQ(hex(VllmSha256Cbor::extra_keys_cbor(std::nullopt, "s", 1)), "f6");
  EXPECT_EQ(hex(VllmSha256Cbor::extra_keys_cbor(std::nullopt, "", 0)), "f6");  // empty salt: none
  EXPECT_EQ(hex(VllmSha256Cbor::extra_keys_cbor("ad", "s", 1)), "81626164");
  const std::string extra = VllmSha256Cbor::extra_keys_cbor("ad", "tenant-a", 0);
  EXPECT_EQ(hex(extra),
            "82626164687465"
            "6e616e742d61");
  const VllmSha256Cbor h;
  const std::vector<TokenId> tokens = {5, 6};
  const Digest d = h.block(h.none_hash(), tokens, extra);
  EXPECT_EQ(hex(d), "2daec72629ce252e6652c77a683712a683ff24e7d88e8d0f0911aa543ccb5b2a");
  EXPECT_NE(d, h.block(h.none_hash(), tokens));
  // A nil entry spelled out equals the default.
  EXPECT_EQ(h.block(h.none_hash(), tokens, "\xf6"), h.block(h.none_hash(), tokens));
}

TEST(VllmSha256Cbor, SeedChangesEveryBlock) {
  const VllmSha256Cbor a, b("42");
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  EXPECT_NE(a.block(a.none_hash(), tokens), b.block(b.none_hash(), tokens));
}

TEST(SglangSha256, UnsaltedChainHashesLittleEndianWords) {
  const std::vector<TokenId> p0 = {1, 2, 3, 4}, p1 = {5, 6, 7, 8};
  const Digest s0 = SglangSha256::block(nullptr, p0);
  EXPECT_EQ(hex(s0), "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72");
  // Published as the first 8 bytes read as a signed int64: negative here.
  EXPECT_EQ(static_cast<int64_t>(SglangSha256::wire_value(s0)), -3488128144981237669LL);
  const Digest s1 = SglangSha256::block(&s0, p1);
  EXPECT_EQ(static_cast<int64_t>(SglangSha256::wire_value(s1)), 5674439469042975057LL);
}

TEST(SglangSha256, SaltedChainStartsFromSaltRoot) {
  EXPECT_FALSE(SglangSha256::salted_root("").has_value());
  const auto root = SglangSha256::salted_root("tenant-a");
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(hex(*root), "f5d0f785efe6042a4e4b0297a4d712917e1763c850835e93df58b373fd47fd2c");
  const std::vector<TokenId> page = {1, 2};
  EXPECT_EQ(SglangSha256::wire_value(SglangSha256::block(&*root, page)), 0x006feb306a146eedULL);
}

}  // namespace
}  // namespace kvgate::events
