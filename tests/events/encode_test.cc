#include "kvgate/events/encode.h"

#include <gtest/gtest.h>

#include "kvgate/events/engine_hash.h"
#include "mp_bytes.h"

namespace kvgate::events {
namespace {

using testing::hex;
using testing::Mp;

// One batch that touches every event kind: a 2-block store (one hash above 2^63), a removal on
// the host tier and a clear.
WireBatch sample_batch() {
  WireBatch b;
  b.ts = 1.5;
  BlockStored s;
  s.block_hashes = {1, 0xffffffffffffffffULL};
  s.token_ids = {1, 2, 3, 4};
  s.block_size = 2;
  b.events.push_back(s);
  BlockRemoved r;
  r.block_hashes = {7};
  r.medium = "CPU";
  b.events.push_back(r);
  b.events.push_back(AllBlocksCleared{});
  b.dp_rank = 0;
  return b;
}

std::string encode(const WireBatch& b, WireFormat f) {
  std::string out;
  encode_batch(b, f, &out);
  return out;
}

TEST(EncodeBatch, VllmArrayIsByteExact) {
  // Written out byte by byte from WIRE.md: 12-element BlockStored with every trailing nil.
  const std::string expected = testing::unhex(
      "93"                           // [ts, events, dp_rank]
      "cb3ff8000000000000"           // 1.5
      "93"                           // 3 events
      "9c ab426c6f636b53746f726564"  // [ "BlockStored",
      "92 01 cfffffffffffffffff"     //   [1, 2^64-1],
      "c0 94 01020304 02"            //   nil, [1,2,3,4], 2,
      "c0 c0 c0 c0 c0 c0 c0"         //   lora_id .. kv_cache_spec_sliding_window ]
      "94 ac426c6f636b52656d6f766564 91 07 a3435055 c0"  // ["BlockRemoved", [7], "CPU", nil]
      "91 b0416c6c426c6f636b73436c6561726564"            // ["AllBlocksCleared"]
      "00");                                             // dp_rank 0
  EXPECT_EQ(hex(encode(sample_batch(), WireFormat::kVllmArray)), hex(expected));
}

TEST(EncodeBatch, VllmMapIsByteExact) {
  Mp m;
  m.arr(3).f64(1.5).arr(3);
  m.map(8).str("type").str("BlockStored");
  m.str("block_hashes").arr(2).uint(1).uint(0xffffffffffffffffULL);
  m.str("parent_block_hash").nil();
  m.str("token_ids").arr(4).uint(1).uint(2).uint(3).uint(4);
  m.str("block_size").uint(2);
  m.str("lora_id").nil().str("medium").nil().str("lora_name").nil();
  m.map(3).str("type").str("BlockRemoved").str("block_hashes").arr(1).uint(7);
  m.str("medium").str("CPU");
  m.map(1).str("type").str("AllBlocksCleared");
  m.uint(0);
  EXPECT_EQ(hex(encode(sample_batch(), WireFormat::kVllmMap)), hex(m.bytes()));
}

TEST(EncodeBatch, SglangArrayWritesSignedHashes) {
  Mp m;
  m.arr(3).f64(1.5).arr(3);
  m.arr(7).str("BlockStored").arr(2).uint(1).sint(-1).nil().arr(4).uint(1).uint(2).uint(3).uint(4);
  m.uint(2).nil().nil();
  m.arr(3).str("BlockRemoved").arr(1).uint(7).str("CPU");
  m.arr(1).str("AllBlocksCleared");
  m.uint(0);
  EXPECT_EQ(hex(encode(sample_batch(), WireFormat::kSglangArray)), hex(m.bytes()));
}

TEST(EncodeBatch, SglangMapIsByteExact) {
  Mp m;
  m.arr(3).f64(1.5).arr(3);
  m.map(7).str("type").str("BlockStored");
  m.str("block_hashes").arr(2).uint(1).sint(-1);
  m.str("parent_block_hash").nil();
  m.str("token_ids").arr(4).uint(1).uint(2).uint(3).uint(4);
  m.str("block_size").uint(2).str("lora_id").nil().str("medium").nil();
  m.map(3).str("type").str("BlockRemoved").str("block_hashes").arr(1).uint(7);
  m.str("medium").str("CPU");
  m.map(1).str("type").str("AllBlocksCleared");
  m.uint(0);
  EXPECT_EQ(hex(encode(sample_batch(), WireFormat::kSglangMap)), hex(m.bytes()));
}

TEST(EncodeBatch, SaltedSglangStoreAppendsMetadataMap) {
  WireBatch b;
  b.ts = 2;
  BlockStored s;
  s.block_hashes = {0x8000000000000000ULL};
  s.parent = 5;
  s.token_ids = {9};
  s.block_size = 1;
  s.medium = "GPU";
  s.cache_salt = "t";
  b.events.push_back(s);
  Mp m;
  m.arr(3).f64(2).arr(1);
  m.arr(8)
      .str("BlockStored")
      .arr(1)
      .sint(INT64_MIN)
      .uint(5)
      .arr(1)
      .uint(9)
      .uint(1)
      .nil()
      .str("GPU");
  m.map(1).str("cache_salt").str("t");
  m.nil();  // no dp_rank
  EXPECT_EQ(hex(encode(b, WireFormat::kSglangArray)), hex(m.bytes()));
}

TEST(EncodeBatch, VllmWritesSaltAndLoraAsExtraKeys) {
  WireBatch b;
  BlockStored s;
  s.block_hashes = {1, 2};
  s.token_ids = {1, 2};
  s.block_size = 1;
  s.lora_name = "ad";
  s.cache_salt = "salt";
  s.group_idx = 1;
  b.events.push_back(s);
  Mp m;
  m.arr(3).f64(0).arr(1);
  m.map(10).str("type").str("BlockStored");
  m.str("block_hashes").arr(2).uint(1).uint(2);
  m.str("parent_block_hash").nil();
  m.str("token_ids").arr(2).uint(1).uint(2);
  m.str("block_size").uint(1).str("lora_id").nil().str("medium").nil();
  m.str("lora_name").str("ad");
  // Block 0: (lora, salt); block 1: (lora,) -- vLLM's generate_block_hash_extra_keys.
  m.str("extra_keys").arr(2).arr(2).str("ad").str("salt").arr(1).str("ad");
  m.str("group_idx").uint(1);
  m.nil();
  EXPECT_EQ(hex(encode(b, WireFormat::kVllmMap)), hex(m.bytes()));
}

TEST(EncodeBatch, PairTokensAreWrittenAsPairs) {
  WireBatch b;
  BlockStored s;
  s.block_hashes = {1};
  s.pair_words = {10, 11, 12, 13};
  s.token_ids = {pair_token(10, 11), pair_token(12, 13)};
  s.block_size = 2;
  b.events.push_back(s);
  Mp m;
  m.arr(3).f64(0).arr(1);
  m.arr(7).str("BlockStored").arr(1).uint(1).nil();
  m.arr(2).arr(2).uint(10).uint(11).arr(2).uint(12).uint(13);
  m.uint(2).nil().nil();
  m.nil();
  EXPECT_EQ(hex(encode(b, WireFormat::kSglangArray)), hex(m.bytes()));
}

TEST(EncodeBatch, AppendsToExistingBytes) {
  std::string out = "x";
  encode_batch(WireBatch{}, WireFormat::kVllmArray, &out);
  EXPECT_EQ(hex(out),
            "78"
            "93"
            "cb0000000000000000"
            "90"
            "c0");
}

TEST(SeqFrame, BigEndianRoundTrip) {
  const auto f = encode_seq(0x0102030405060708ULL);
  EXPECT_EQ(f, (std::array<uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(decode_seq(f), 0x0102030405060708ULL);
  EXPECT_EQ(decode_seq(encode_seq(kReplayEndSeq)), kReplayEndSeq);
  const uint8_t short_frame[7] = {};
  EXPECT_FALSE(decode_seq(short_frame).has_value());
  const uint8_t long_frame[9] = {};
  EXPECT_FALSE(decode_seq(long_frame).has_value());
}

TEST(WireFormatNames, ParseRoundTrips) {
  for (WireFormat f : kAllWireFormats) EXPECT_EQ(parse_wire_format(wire_format_name(f)), f);
  EXPECT_FALSE(parse_wire_format("vllm").has_value());
}

}  // namespace
}  // namespace kvgate::events
