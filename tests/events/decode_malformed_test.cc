// Bad input costs only what it touches: each malformed shape drops its own event with the right
// reason and keeps its neighbours; broken bytes drop the rest of the payload, never the part
// before them.
#include <gtest/gtest.h>

#include <random>

#include "kvgate/events/decode.h"
#include "mp_bytes.h"

namespace kvgate::events {
namespace {

using testing::Mp;

size_t reason_count(const DecodedBatch& b, DropReason r) {
  return b.dropped[static_cast<size_t>(r)];
}

Mp good_store(uint64_t hash) {
  Mp m;
  m.arr(7).str("BlockStored").arr(1).uint(hash).nil().arr(2).uint(1).uint(2).uint(2).nil().nil();
  return m;
}

// [ts, [good(1), bad, good(2)], 0]: the bad event is dropped for `want`, the others kept.
void expect_dropped_alone(const Mp& bad, DropReason want, DecodeLimits limits = {}) {
  Mp m;
  m.arr(3).f64(1).arr(3).append(good_store(1)).append(bad).append(good_store(2)).uint(0);
  BatchDecoder d(limits);
  DecodedBatch b;
  ASSERT_TRUE(d.decode(m.bytes(), &b));
  EXPECT_EQ(b.dropped_total(), 1u) << testing::hex(bad.bytes());
  EXPECT_EQ(reason_count(b, want), 1u)
      << "want " << drop_reason_name(want) << " for " << testing::hex(bad.bytes());
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.hashes_of(b.events[0])[0], 1u);
  EXPECT_EQ(b.hashes_of(b.events[1])[0], 2u);
  EXPECT_EQ(b.dp_rank, 0);
}

TEST(DecodeMalformed, NotAnEventOrBadTag) {
  expect_dropped_alone(Mp().uint(5), DropReason::kNotAnEvent);
  expect_dropped_alone(Mp().arr(0), DropReason::kNotAnEvent);
  expect_dropped_alone(Mp().map(1).str("block_hashes").arr(0), DropReason::kNotAnEvent);
  expect_dropped_alone(Mp().arr(2).uint(1).arr(0), DropReason::kBadTag);
  expect_dropped_alone(Mp().map(1).str("type").uint(1), DropReason::kBadTag);
  expect_dropped_alone(Mp().arr(2).str("BlockMoved").arr(0), DropReason::kUnknownTag);
  expect_dropped_alone(Mp().str("BlockStored"), DropReason::kNotAnEvent);
}

TEST(DecodeMalformed, WrongTypesInStoreFields) {
  auto store = [](auto&& hashes, auto&& parent, auto&& tokens, auto&& bs) {
    Mp m;
    m.arr(5).str("BlockStored");
    hashes(m);
    parent(m);
    tokens(m);
    bs(m);
    return m;
  };
  auto ok_hashes = [](Mp& m) { m.arr(1).uint(9); };
  auto ok_parent = [](Mp& m) { m.nil(); };
  auto ok_tokens = [](Mp& m) { m.arr(1).uint(1); };
  auto ok_bs = [](Mp& m) { m.uint(1); };
  expect_dropped_alone(store([](Mp& m) { m.uint(9); }, ok_parent, ok_tokens, ok_bs),
                       DropReason::kBadBlockHashes);
  expect_dropped_alone(store([](Mp& m) { m.arr(1).str("x"); }, ok_parent, ok_tokens, ok_bs),
                       DropReason::kBadHash);
  expect_dropped_alone(store([](Mp& m) { m.arr(1).f64(1); }, ok_parent, ok_tokens, ok_bs),
                       DropReason::kBadHash);
  // A hash bin shorter than 8 bytes.
  expect_dropped_alone(store([](Mp& m) { m.arr(1).bin("1234567"); }, ok_parent, ok_tokens, ok_bs),
                       DropReason::kBadHash);
  expect_dropped_alone(store(
                           ok_hashes, [](Mp& m) { m.str("p"); }, ok_tokens, ok_bs),
                       DropReason::kBadParent);
  expect_dropped_alone(store(
                           ok_hashes, [](Mp& m) { m.bin("12"); }, ok_tokens, ok_bs),
                       DropReason::kBadParent);
  expect_dropped_alone(store(
                           ok_hashes, ok_parent, [](Mp& m) { m.uint(1); }, ok_bs),
                       DropReason::kBadTokenIds);
  expect_dropped_alone(store(
                           ok_hashes, ok_parent, [](Mp& m) { m.arr(1).sint(-1); }, ok_bs),
                       DropReason::kBadTokenIds);
  expect_dropped_alone(store(
                           ok_hashes, ok_parent, [](Mp& m) { m.arr(1).uint(1ULL << 32); }, ok_bs),
                       DropReason::kBadTokenIds);
  expect_dropped_alone(
      store(
          ok_hashes, ok_parent, [](Mp& m) { m.arr(1).arr(3).uint(1).uint(2).uint(3); }, ok_bs),
      DropReason::kBadTokenIds);
  expect_dropped_alone(store(ok_hashes, ok_parent, ok_tokens, [](Mp& m) { m.uint(0); }),
                       DropReason::kBadBlockSize);
  expect_dropped_alone(store(ok_hashes, ok_parent, ok_tokens, [](Mp& m) { m.str("16"); }),
                       DropReason::kBadBlockSize);
  // Missing required fields read as nil.
  expect_dropped_alone(Mp().arr(3).str("BlockStored").arr(1).uint(1).nil(),
                       DropReason::kBadTokenIds);
  expect_dropped_alone(Mp().arr(4).str("BlockStored").arr(1).uint(1).nil().arr(0),
                       DropReason::kBadBlockSize);
  expect_dropped_alone(Mp().arr(1).str("BlockRemoved"), DropReason::kBadBlockHashes);
}

TEST(DecodeMalformed, WrongTypesInOptionalFields) {
  auto with = [](int pos, auto&& value) {
    Mp m;
    m.arr(12).str("BlockStored").arr(1).uint(9).nil().arr(1).uint(1).uint(1);
    for (int i = 5; i <= 11; ++i) {
      if (i == pos)
        value(m);
      else
        m.nil();
    }
    return m;
  };
  auto an_array = [](Mp& m) { m.arr(1).uint(1); };
  expect_dropped_alone(with(5, [](Mp& m) { m.str("1"); }), DropReason::kBadField);  // lora_id
  expect_dropped_alone(with(6, [](Mp& m) { m.uint(1); }), DropReason::kBadField);   // medium
  expect_dropped_alone(with(7, [](Mp& m) { m.uint(1); }), DropReason::kBadField);   // lora_name
  expect_dropped_alone(with(8, [](Mp& m) { m.str("k"); }), DropReason::kBadExtraKeys);
  expect_dropped_alone(with(9, [](Mp& m) { m.str("0"); }), DropReason::kBadField);  // group
  expect_dropped_alone(with(10, an_array), DropReason::kBadField);                  // kind
  expect_dropped_alone(with(11, [](Mp& m) { m.f64(1); }), DropReason::kBadField);   // window
  expect_dropped_alone(with(5, [](Mp& m) { m.u64_wide(~0ULL); }), DropReason::kBadField);
  // SGLang metadata of the wrong shape.
  Mp meta;
  meta.arr(8).str("BlockStored").arr(1).uint(9).nil().arr(1).uint(1).uint(1).nil().nil();
  meta.map(1).str("cache_salt").uint(3);
  expect_dropped_alone(meta, DropReason::kBadMetadata);
  Mp salt;
  salt.map(5).str("type").str("BlockStored").str("block_hashes").arr(1).uint(9);
  salt.str("token_ids").arr(1).uint(1).str("block_size").uint(1).str("session_id").arr(0);
  expect_dropped_alone(salt, DropReason::kBadMetadata);
  Mp removed;
  removed.arr(3).str("BlockRemoved").arr(1).uint(1).uint(7);
  expect_dropped_alone(removed, DropReason::kBadField);
}

TEST(DecodeMalformed, OversizedItemsCostOnlyTheirEvent) {
  DecodeLimits small;
  small.max_array = 8;
  small.max_str = 16;  // "AllBlocksCleared" fits
  small.max_map = 4;
  small.max_bin = 16;
  Mp tokens;
  tokens.arr(5).str("BlockStored").arr(1).uint(1).nil().arr(9);
  for (int i = 0; i < 9; ++i) tokens.uint(i);
  tokens.uint(9);
  expect_dropped_alone(tokens, DropReason::kTooLarge, small);
  expect_dropped_alone(Mp().arr(7)
                           .str("BlockStored")
                           .arr(1)
                           .uint(1)
                           .nil()
                           .arr(1)
                           .uint(1)
                           .uint(1)
                           .nil()
                           .str("CPU_PINNED_AND_MORE"),
                       DropReason::kTooLarge, small);
  expect_dropped_alone(Mp().arr(2).str("BlockRemoved").arr(1).bin(std::string(17, 'x')),
                       DropReason::kTooLarge, small);
  Mp big_map;
  big_map.map(5);
  for (int i = 0; i < 5; ++i) big_map.str(std::string(1, static_cast<char>('a' + i))).nil();
  expect_dropped_alone(big_map, DropReason::kTooLarge, small);
}

TEST(DecodeMalformed, NestingBombCostsOnlyItsEvent) {
  Mp bomb;
  bomb.map(2).str("type").str("AllBlocksCleared").str("junk");
  for (int i = 0; i < 100000; ++i) bomb.arr(1);
  bomb.nil();
  expect_dropped_alone(bomb, DropReason::kTooDeep);
}

TEST(DecodeMalformed, HugeLengthClaimsAreRejectedWithoutAllocating) {
  // The events array claims 2^32-1 events in a 20-byte payload.
  Mp events;
  events.arr(3).f64(1).byte(0xdd).be(0xffffffffu, 4).nil();
  BatchDecoder d;
  DecodedBatch b;
  EXPECT_FALSE(d.decode(events.bytes(), &b));
  EXPECT_EQ(b.rejected, DropReason::kTooLarge);
  // A token array claiming 2^32-1 elements: nothing after it can be located, so it and the
  // event after it are lost as truncated; the event before it is kept.
  Mp m;
  m.arr(3).f64(1).arr(3).append(good_store(1));
  m.arr(5).str("BlockStored").arr(1).uint(1).nil().byte(0xdd).be(0xffffffffu, 4);
  m.append(good_store(2)).uint(0);
  ASSERT_TRUE(d.decode(m.bytes(), &b));
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(reason_count(b, DropReason::kTruncated), 2u);
  // A string claiming 4 GiB.
  Mp s;
  s.arr(3).f64(1).arr(1).arr(2).str("BlockRemoved").byte(0xdb).be(0xffffffffu, 4).byte('x');
  ASSERT_TRUE(d.decode(s.bytes(), &b));
  EXPECT_EQ(reason_count(b, DropReason::kTruncated), 1u);
  // The whole payload over the byte limit.
  DecodeLimits tiny;
  tiny.max_payload_bytes = 8;
  BatchDecoder t(tiny);
  EXPECT_FALSE(t.decode(m.bytes(), &b));
  EXPECT_EQ(b.rejected, DropReason::kPayloadTooLarge);
}

TEST(DecodeMalformed, NeverUsedByteDropsTheRest) {
  Mp m;
  m.arr(3).f64(1).arr(3).append(good_store(1));
  m.arr(2).str("BlockRemoved").byte(0xc1);
  m.append(good_store(2)).uint(0);
  BatchDecoder d;
  DecodedBatch b;
  ASSERT_TRUE(d.decode(m.bytes(), &b));
  EXPECT_EQ(b.events.size(), 1u);
  EXPECT_EQ(reason_count(b, DropReason::kMalformed), 2u);
}

TEST(DecodeMalformed, TruncatedAtEveryOffsetKeepsWholeEvents) {
  Mp head;
  head.arr(3).f64(1).arr(3);
  std::vector<size_t> event_end;
  Mp m = head;
  m.append(good_store(1));
  event_end.push_back(m.size());
  m.map(3).str("type").str("BlockRemoved").str("block_hashes").arr(2).uint(1).u64_wide(2);
  m.str("medium").str("CPU");
  event_end.push_back(m.size());
  m.arr(1).str("AllBlocksCleared");
  event_end.push_back(m.size());
  m.uint(7);
  const std::string full = m.bytes();
  BatchDecoder d;
  DecodedBatch b;
  ASSERT_TRUE(d.decode(full, &b));
  ASSERT_EQ(b.events.size(), 3u);
  for (size_t k = 0; k < full.size(); ++k) {
    SCOPED_TRACE(k);
    const bool ok = d.decode(std::string_view(full).substr(0, k), &b);
    if (k < head.size()) {
      EXPECT_FALSE(ok);
      EXPECT_TRUE(b.events.empty());
      continue;
    }
    ASSERT_TRUE(ok);
    size_t whole = 0;
    while (whole < 3 && event_end[whole] <= k) ++whole;
    EXPECT_EQ(b.events.size(), whole);
    EXPECT_EQ(reason_count(b, DropReason::kTruncated), 3 - whole);
    EXPECT_EQ(b.dropped_total(), 3 - whole);
    EXPECT_FALSE(b.dp_rank.has_value());
    EXPECT_EQ(b.dp_rank_valid, whole < 3);  // only a missing rank after whole events counts
  }
}

TEST(DecodeMalformed, BatchLevelShapes) {
  BatchDecoder d;
  DecodedBatch b;
  EXPECT_FALSE(d.decode(std::string_view(), &b));
  EXPECT_EQ(b.rejected, DropReason::kNotABatch);
  EXPECT_FALSE(d.decode(Mp().uint(3).bytes(), &b));
  EXPECT_EQ(b.rejected, DropReason::kNotABatch);
  EXPECT_FALSE(d.decode(Mp().arr(1).f64(1).bytes(), &b));
  EXPECT_EQ(b.rejected, DropReason::kNotABatch);
  EXPECT_FALSE(d.decode(Mp().arr(3).f64(1).uint(3).nil().bytes(), &b));
  EXPECT_EQ(b.rejected, DropReason::kNotABatch);
  EXPECT_FALSE(d.decode(Mp().map(1).str("ts").f64(1).bytes(), &b));
  EXPECT_EQ(b.rejected, DropReason::kNotABatch);
  // A bad timestamp or rank costs only that field.
  ASSERT_TRUE(d.decode(Mp().arr(3).str("now").arr(1).append(good_store(1)).sint(-1).bytes(), &b));
  EXPECT_FALSE(b.ts_valid);
  EXPECT_FALSE(b.dp_rank_valid);
  EXPECT_FALSE(b.dp_rank.has_value());
  EXPECT_EQ(b.events.size(), 1u);
  // A 4-element batch: the extra element is ignored.
  ASSERT_TRUE(d.decode(Mp().arr(4).f64(1).arr(0).uint(2).str("x").bytes(), &b));
  EXPECT_EQ(b.dp_rank, 2);
}

// Whatever the bytes, the decoder returns, and every event the header announced is either
// decoded or counted as dropped.
TEST(DecodeMalformed, RandomMutationsKeepTheAccountingExact) {
  Mp m;
  m.arr(3).f64(1).arr(4).append(good_store(1));
  m.map(3).str("type").str("BlockRemoved").str("block_hashes").arr(1).uint(1).str("medium").nil();
  m.arr(12).str("BlockStored").arr(1).uint(9).uint(3).arr(2).arr(2).uint(1).uint(2).uint(3);
  m.uint(1).uint(0).str("CPU").str("ad").arr(1).arr(2).str("ad").str("s").uint(0).str("full");
  m.nil();
  m.arr(1).str("AllBlocksCleared").uint(0);
  const std::string base = m.bytes();
  std::mt19937_64 rng(12345);
  BatchDecoder d;
  DecodedBatch b;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[at] = static_cast<char>(rng());
          break;
        case 1:
          s.erase(at, 1 + rng() % 4);
          break;
        default:
          s.insert(at, 1, static_cast<char>(rng()));
          break;
      }
      if (s.empty()) s.push_back('\x90');
    }
    if (d.decode(s, &b)) {
      ASSERT_EQ(b.events.size() + b.dropped_total(), b.events_in_payload) << testing::hex(s);
    } else {
      ASSERT_TRUE(b.rejected.has_value());
      ASSERT_TRUE(b.events.empty());
    }
  }
}

}  // namespace
}  // namespace kvgate::events
