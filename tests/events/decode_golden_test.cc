// Golden vectors: every layout of docs/wire.md written byte by byte with the test-only builder
// (mp_bytes.h), decoded, and compared field by field with the model the engines meant.
#include <gtest/gtest.h>

#include "kvgate/events/decode.h"
#include "kvgate/events/engine_hash.h"
#include "mp_bytes.h"

namespace kvgate::events {
namespace {

using testing::Mp;

struct Decoded {
  bool ok;
  DecodedBatch batch;
  WireBatch wire;
};

Decoded decode(const std::string& bytes) {
  BatchDecoder d;
  Decoded r;
  r.ok = d.decode(bytes, &r.batch);
  r.wire = to_wire(r.batch);
  return r;
}

const BlockStored& stored(const WireBatch& b, size_t i) {
  return std::get<BlockStored>(b.events[i]);
}
const BlockRemoved& removed(const WireBatch& b, size_t i) {
  return std::get<BlockRemoved>(b.events[i]);
}

// vLLM 0.9: a two-element batch and BlockStored that stops after lora_id.
TEST(DecodeGolden, Vllm09TwoElementBatchFiveFieldStore) {
  Mp m;
  m.arr(2).f64(1700000000.25).arr(1);
  m.arr(6).str("BlockStored").arr(2).uint(11).uint(12).nil().arr(4).uint(1).uint(2).uint(3).uint(4);
  m.uint(2).nil();
  auto d = decode(m.bytes());
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.wire.ts, 1700000000.25);
  EXPECT_TRUE(d.batch.ts_valid);
  EXPECT_FALSE(d.wire.dp_rank.has_value());
  ASSERT_EQ(d.wire.events.size(), 1u);
  BlockStored want;
  want.block_hashes = {11, 12};
  want.token_ids = {1, 2, 3, 4};
  want.block_size = 2;
  EXPECT_EQ(stored(d.wire, 0), want);
  EXPECT_EQ(d.batch.hints.guess(), WireFormat::kVllmArray);
}

// Every vLLM array length from 5 to 11 fields after the tag: the fields present are read, the
// missing trailing ones are nil.
TEST(DecodeGolden, VllmArrayStoreOfEveryLength) {
  for (int fields = 5; fields <= 11; ++fields) {
    SCOPED_TRACE(fields);
    Mp ev;
    ev.arr(fields + 1).str("BlockStored").arr(1).uint(0xfedcba9876543210ULL).uint(5);
    ev.arr(2).uint(7).uint(8).uint(2);
    Mp m;
    BlockStored want;
    want.block_hashes = {0xfedcba9876543210ULL};
    want.parent = 5;
    want.token_ids = {7, 8};
    want.block_size = 2;
    if (fields >= 5) ev.uint(3), want.lora_id = 3;
    if (fields >= 6) ev.str("CPU"), want.medium = "CPU";
    if (fields >= 7) ev.str("ad"), want.lora_name = "ad";
    if (fields >= 8) {
      ev.arr(1).arr(2).str("ad").str("salt");
      want.cache_salt = "salt";
      want.extra_keys_cbor = std::vector<std::string>{
          VllmSha256Cbor::extra_keys_cbor(std::string_view("ad"), std::string_view("salt"), 0)};
    }
    if (fields >= 9) ev.uint(1), want.group_idx = 1;
    if (fields >= 10) ev.str("sliding_window"), want.kv_cache_spec_kind = "sliding_window";
    if (fields >= 11) ev.uint(4096), want.kv_cache_spec_sliding_window = 4096;
    m.arr(3).f64(1).arr(1).append(ev).uint(0);
    auto d = decode(m.bytes());
    ASSERT_TRUE(d.ok);
    ASSERT_EQ(d.wire.events.size(), 1u);
    EXPECT_EQ(stored(d.wire, 0), want);
    EXPECT_EQ(d.wire.dp_rank, 0);
  }
}

TEST(DecodeGolden, VllmBlockRemovedOfEveryLength) {
  Mp m;
  m.arr(3).f64(1).arr(3);
  m.arr(2).str("BlockRemoved").arr(2).uint(1).uint(2);
  m.arr(3).str("BlockRemoved").arr(1).uint(3).str("DISK");
  m.arr(4).str("BlockRemoved").arr(1).uint(4).nil().uint(2);
  m.uint(1);
  auto d = decode(m.bytes());
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.wire.events.size(), 3u);
  EXPECT_EQ(removed(d.wire, 0), (BlockRemoved{{1, 2}, std::nullopt, std::nullopt}));
  EXPECT_EQ(removed(d.wire, 1), (BlockRemoved{{3}, "DISK", std::nullopt}));
  EXPECT_EQ(removed(d.wire, 2), (BlockRemoved{{4}, std::nullopt, 2}));
  EXPECT_EQ(d.wire.dp_rank, 1);
}

TEST(DecodeGolden, ClearedInBothForms) {
  Mp m;
  m.arr(3).f64(1).arr(2).arr(1).str("AllBlocksCleared").map(1).str("type").str("AllBlocksCleared");
  m.nil();
  auto d = decode(m.bytes());
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.wire.events.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(d.wire.events[0]));
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(d.wire.events[1]));
}

// vLLM bin hashes (int hashes disabled): the last 8 bytes big-endian.
TEST(DecodeGolden, BinHashesReadTheirLastEightBytes) {
  std::string digest(32, '\0');
  for (int i = 0; i < 32; ++i) digest[i] = static_cast<char>(i);
  Mp m;
  m.arr(3).f64(1).arr(1);
  m.arr(5).str("BlockStored").arr(1).bin(digest).bin(digest.substr(0, 8)).arr(1).uint(1).uint(1);
  m.nil();
  auto d = decode(m.bytes());
  ASSERT_EQ(d.wire.events.size(), 1u);
  EXPECT_EQ(stored(d.wire, 0).block_hashes[0], 0x18191a1b1c1d1e1fULL);
  EXPECT_EQ(stored(d.wire, 0).parent, 0x0001020304050607ULL);
  EXPECT_TRUE(d.batch.hints.bin_hashes);
}

// vLLM >= 0.24: map events, keys in any order, unknown keys ignored, optional keys absent.
TEST(DecodeGolden, VllmMapEvents) {
  Mp m;
  m.arr(3).f64(2.5).arr(2);
  m.map(10).str("medium").str("CPU_PINNED").str("token_ids").arr(2).uint(9).uint(10);
  m.str("type").str("BlockStored").str("future_field").arr(2).uint(1).map(1).str("x").nil();
  m.str("block_size").uint(2).str("parent_block_hash").u64_wide(77);
  m.str("block_hashes").arr(1).u64_wide(0x8000000000000000ULL).str("lora_id").nil();
  m.str("lora_name").nil().str("group_idx").uint(0);
  m.map(3).str("type").str("BlockRemoved").str("block_hashes").arr(1).uint(5).str("medium").nil();
  m.uint(3);
  auto d = decode(m.bytes());
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.wire.events.size(), 2u);
  BlockStored want;
  want.block_hashes = {0x8000000000000000ULL};
  want.parent = 77;
  want.token_ids = {9, 10};
  want.block_size = 2;
  want.medium = "CPU_PINNED";
  want.group_idx = 0;
  EXPECT_EQ(stored(d.wire, 0), want);
  EXPECT_EQ(removed(d.wire, 1), (BlockRemoved{{5}, std::nullopt, std::nullopt}));
  EXPECT_EQ(d.wire.dp_rank, 3);
  EXPECT_EQ(d.batch.hints.guess(), WireFormat::kVllmMap);
}

// The map-shaped batch {ts, events, data_parallel_rank}, in any key order.
TEST(DecodeGolden, MapShapedBatch) {
  Mp m;
  m.map(4).str("data_parallel_rank").uint(2).str("extra").arr(1).nil().str("events").arr(1);
  m.arr(1).str("AllBlocksCleared").str("ts").f64(9.5);
  auto d = decode(m.bytes());
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.wire.dp_rank, 2);
  EXPECT_DOUBLE_EQ(d.wire.ts, 9.5);
  ASSERT_EQ(d.wire.events.size(), 1u);
  EXPECT_TRUE(d.batch.hints.map_batch);
}

// SGLang array events: signed int64 hashes (negative ones occur), 7 fields, the optional
// metadata map as the 8th element, and a store that omits its trailing medium.
TEST(DecodeGolden, SglangArrayEvents) {
  Mp m;
  m.arr(3).f64(3).arr(3);
  m.arr(8).str("BlockStored").arr(2).sint(-3488128144981237669LL).i64_wide(5).sint(-1);
  m.arr(2).uint(1).uint(2).uint(1).nil().str("GPU");
  m.map(2).str("cache_salt").str("tenant-a").str("session_id").str("s1");
  m.arr(6).str("BlockStored").arr(1).sint(-2).nil().arr(1).uint(3).uint(1).nil();
  m.arr(3).str("BlockRemoved").arr(1).sint(-2).str("CPU_PINNED");
  m.uint(0);
  auto d = decode(m.bytes());
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.wire.events.size(), 3u);
  BlockStored want;
  want.block_hashes = {static_cast<uint64_t>(-3488128144981237669LL), 5};
  want.parent = ~uint64_t{0};
  want.token_ids = {1, 2};
  want.block_size = 1;
  want.medium = "GPU";
  want.cache_salt = "tenant-a";
  want.session_id = "s1";
  EXPECT_EQ(stored(d.wire, 0), want);
  EXPECT_EQ(stored(d.wire, 1).block_hashes, std::vector<EngineHash>{~uint64_t{1}});
  EXPECT_FALSE(stored(d.wire, 1).medium.has_value());
  EXPECT_EQ(removed(d.wire, 2).medium, "CPU_PINNED");
  EXPECT_EQ(d.batch.hints.guess(), WireFormat::kSglangArray);
}

TEST(DecodeGolden, SglangMapEvents) {
  Mp m;
  m.arr(3).f64(4).arr(1);
  m.map(10).str("type").str("BlockStored").str("block_hashes").arr(1).sint(-7);
  m.str("parent_block_hash").nil().str("token_ids").arr(2).uint(4).uint(5);
  m.str("block_size").uint(2).str("lora_id").uint(1).str("medium").nil();
  m.str("cache_salt").str("t").str("session_id").str("sess").str("lora_name").str("ad");
  m.nil();
  auto d = decode(m.bytes());
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.wire.events.size(), 1u);
  BlockStored want;
  want.block_hashes = {static_cast<uint64_t>(-7)};
  want.token_ids = {4, 5};
  want.block_size = 2;
  want.lora_id = 1;
  want.cache_salt = "t";
  want.session_id = "sess";
  want.lora_name = "ad";
  EXPECT_EQ(stored(d.wire, 0), want);
  EXPECT_EQ(d.batch.hints.guess(), WireFormat::kSglangMap);
}

// Token ids as [a, b] pairs (SGLang bigram pages) fold into one id each; the words are kept
// for the engine-hash check.
TEST(DecodeGolden, TokenPairs) {
  Mp m;
  m.arr(3).f64(1).arr(2);
  m.arr(7)
      .str("BlockStored")
      .arr(1)
      .uint(1)
      .nil()
      .arr(2)
      .arr(2)
      .uint(10)
      .uint(11)
      .arr(2)
      .uint(12)
      .uint(13);
  m.uint(2).nil().nil();
  // Mixed ints and pairs: folded ids only.
  m.arr(7).str("BlockStored").arr(1).uint(2).nil().arr(2).uint(5).arr(2).uint(6).uint(7);
  m.uint(2).nil().nil();
  m.nil();
  auto d = decode(m.bytes());
  ASSERT_EQ(d.wire.events.size(), 2u);
  EXPECT_EQ(stored(d.wire, 0).token_ids,
            (std::vector<TokenId>{pair_token(10, 11), pair_token(12, 13)}));
  EXPECT_EQ(stored(d.wire, 0).pair_words, (std::vector<TokenId>{10, 11, 12, 13}));
  EXPECT_EQ(stored(d.wire, 1).token_ids, (std::vector<TokenId>{5, pair_token(6, 7)}));
  EXPECT_TRUE(stored(d.wire, 1).pair_words.empty());
  EXPECT_NE(pair_token(10, 11), pair_token(11, 10));
}

// Engines differ in how small they pack numbers; every width decodes to the same value, and a
// float32 or integer timestamp is accepted.
TEST(DecodeGolden, WideAndNarrowIntegersAndTimestamps) {
  Mp m;
  m.arr(3).f32(2.5f).arr(1);
  m.arr(5).str("BlockStored").arr(2).u64_wide(1).byte(0xcd).be(300, 2).i64_wide(-1);
  m.arr(1).byte(0xce).be(42, 4).byte(0xcc).be(1, 1);
  m.i64_wide(1);
  auto d = decode(m.bytes());
  ASSERT_TRUE(d.ok);
  EXPECT_DOUBLE_EQ(d.wire.ts, 2.5);
  ASSERT_EQ(d.wire.events.size(), 1u);
  EXPECT_EQ(stored(d.wire, 0).block_hashes, (std::vector<EngineHash>{1, 300}));
  EXPECT_EQ(stored(d.wire, 0).parent, ~uint64_t{0});
  EXPECT_EQ(stored(d.wire, 0).token_ids, std::vector<TokenId>{42});
  EXPECT_EQ(d.wire.dp_rank, 1);

  Mp n;
  n.arr(3).uint(1700000000).arr(0).nil();
  auto e = decode(n.bytes());
  EXPECT_TRUE(e.batch.ts_valid);
  EXPECT_DOUBLE_EQ(e.wire.ts, 1700000000.0);
}

// vLLM extra keys with a multimodal tuple and a prompt-embeds digest: the salt is the first
// string after the LoRA name, and every entry is re-encoded as the CBOR vLLM hashed.
TEST(DecodeGolden, VllmExtraKeysWithMultimodalItems) {
  Mp m;
  m.arr(3).f64(1).arr(1);
  m.arr(9).str("BlockStored").arr(2).uint(1).uint(2).nil().arr(2).uint(1).uint(2).uint(1);
  m.nil().nil().str("ad");
  m.arr(2).arr(4).str("ad").arr(2).str("mmhash").uint(3).str("salt").bin("\x01\x02");
  m.nil();
  m.nil();
  auto d = decode(m.bytes());
  ASSERT_EQ(d.wire.events.size(), 1u);
  const auto& s = stored(d.wire, 0);
  EXPECT_EQ(s.cache_salt, "salt");
  ASSERT_TRUE(s.extra_keys_cbor.has_value());
  ASSERT_EQ(s.extra_keys_cbor->size(), 2u);
  EXPECT_EQ(testing::hex((*s.extra_keys_cbor)[0]),
            "84"
            "626164"
            "82666d6d6861736803"
            "6473616c74"
            "420102");
  EXPECT_EQ(testing::hex((*s.extra_keys_cbor)[1]), "f6");
  EXPECT_FALSE(s.extra_keys_opaque);
}

TEST(DecodeGolden, ExtraKeysWithFloatsAreOpaque) {
  Mp m;
  m.arr(3).f64(1).arr(1);
  m.arr(9).str("BlockStored").arr(1).uint(1).nil().arr(1).uint(1).uint(1).nil().nil().nil();
  m.arr(1).arr(1).f64(0.5);
  m.nil();
  auto d = decode(m.bytes());
  ASSERT_EQ(d.wire.events.size(), 1u);
  EXPECT_TRUE(stored(d.wire, 0).extra_keys_opaque);
  EXPECT_FALSE(stored(d.wire, 0).extra_keys_cbor.has_value());
}

}  // namespace
}  // namespace kvgate::events
