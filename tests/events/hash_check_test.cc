#include "kvgate/events/hash_check.h"

#include <gtest/gtest.h>

#include "kvgate/events/encode.h"

namespace kvgate::events {
namespace {

// A publisher that hashes like an engine: it keeps the digest of each block it published.
struct Engine {
  HashScheme scheme;
  VllmSha256Cbor vllm;
  std::optional<std::string> salt;
  std::optional<Digest> last;
  uint32_t block_size = 4;

  explicit Engine(HashScheme s, std::string seed = "vllm-none-hash") : scheme(s), vllm(seed) {}

  // The next `blocks` blocks of a chain, continuing the last one unless `fresh`.
  BlockStored store(size_t blocks, TokenId first_token, bool fresh) {
    BlockStored s;
    s.block_size = block_size;
    s.cache_salt = salt;
    if (fresh) last.reset();
    if (last) {
      s.parent = scheme == HashScheme::kSglang ? SglangSha256::wire_value(*last)
                                               : VllmSha256Cbor::wire_value(*last);
    }
    for (size_t b = 0; b < blocks; ++b) {
      std::vector<TokenId> tokens;
      for (uint32_t t = 0; t < block_size; ++t) tokens.push_back(first_token++);
      s.token_ids.insert(s.token_ids.end(), tokens.begin(), tokens.end());
      Digest d;
      if (scheme == HashScheme::kSglang) {
        std::optional<Digest> root;
        if (!last && salt) root = SglangSha256::salted_root(*salt);
        d = SglangSha256::block(last ? &*last : (root ? &*root : nullptr), tokens);
        s.block_hashes.push_back(SglangSha256::wire_value(d));
      } else {
        const Digest parent = last ? *last : vllm.none_hash();
        d = vllm.block(parent, tokens,
                       VllmSha256Cbor::extra_keys_cbor(std::nullopt, salt, last ? 1 : 0));
        s.block_hashes.push_back(VllmSha256Cbor::wire_value(d));
      }
      last = d;
    }
    return s;
  }
};

HashCheckCounts check(EngineHashChecker& c, std::vector<WireEvent> events, WireFormat f) {
  WireBatch b;
  b.events = std::move(events);
  std::string bytes;
  encode_batch(b, f, &bytes);
  BatchDecoder d;
  DecodedBatch decoded;
  EXPECT_TRUE(d.decode(bytes, &decoded));
  c.check(decoded);
  return c.counts();
}

TEST(HashCheck, AutoDetectsVllmAndMatchesAChain) {
  Engine e(HashScheme::kVllmSha256Cbor);
  EngineHashChecker c;
  check(c, {e.store(2, 100, true)}, WireFormat::kVllmArray);
  EXPECT_EQ(c.scheme(), HashScheme::kVllmSha256Cbor);
  const auto n = check(c, {e.store(3, 200, false)}, WireFormat::kVllmMap);
  EXPECT_EQ(n.matched, 5u);
  EXPECT_EQ(n.mismatched, 0u);
  EXPECT_EQ(n.unchecked, 0u);
  EXPECT_EQ(n.mismatch_ratio(), 0.0);
}

TEST(HashCheck, VllmSaltedChainUsesExtraKeys) {
  Engine e(HashScheme::kVllmSha256Cbor);
  e.salt = "tenant";
  EngineHashChecker c({HashScheme::kVllmSha256Cbor});
  const auto n = check(c, {e.store(2, 1, true), e.store(1, 50, false)}, WireFormat::kVllmMap);
  EXPECT_EQ(n.matched, 3u);
  EXPECT_EQ(n.mismatched, 0u);
}

TEST(HashCheck, AutoDetectsSglangIncludingSaltedChains) {
  Engine e(HashScheme::kSglang);
  EngineHashChecker c;
  check(c, {e.store(2, 7, true), e.store(2, 70, false)}, WireFormat::kSglangArray);
  EXPECT_EQ(c.scheme(), HashScheme::kSglang);
  e.salt = "t";
  const auto n = check(c, {e.store(2, 7, true)}, WireFormat::kSglangMap);
  EXPECT_EQ(n.matched, 6u);
  EXPECT_EQ(n.mismatched, 0u);
}

TEST(HashCheck, SglangBigramPagesHashBothWords) {
  EngineHashChecker c({HashScheme::kSglang});
  BlockStored s;
  s.block_size = 2;
  s.pair_words = {1, 2, 3, 4};
  s.token_ids = {pair_token(1, 2), pair_token(3, 4)};
  const std::vector<TokenId> words = {1, 2, 3, 4};
  s.block_hashes = {SglangSha256::wire_value(SglangSha256::block(nullptr, words))};
  const auto n = check(c, {s}, WireFormat::kSglangArray);
  EXPECT_EQ(n.matched, 1u);
}

// A worker started with another seed (PYTHONHASHSEED) than the gateway was told.
TEST(HashCheck, MisconfiguredSeedShowsAsMismatches) {
  Engine e(HashScheme::kVllmSha256Cbor, "42");
  EngineHashChecker c;
  for (int i = 0; i < 4; ++i) check(c, {e.store(2, 10 * i, true)}, WireFormat::kVllmArray);
  EXPECT_EQ(c.scheme(), HashScheme::kAuto);  // nothing matched
  EXPECT_EQ(c.counts().mismatched, 4u);
  EXPECT_EQ(c.counts().mismatch_ratio(), 1.0);
  // Told the right seed, the same stream matches.
  EngineHashChecker right({HashScheme::kVllmSha256Cbor, "42"});
  Engine f(HashScheme::kVllmSha256Cbor, "42");
  check(right, {f.store(2, 1, true)}, WireFormat::kVllmArray);
  EXPECT_EQ(right.counts().matched, 2u);
}

// A worker whose tokenizer differs: its token ids do not produce its published hashes.
TEST(HashCheck, TokensThatDoNotHashToTheEngineHashMismatch) {
  Engine e(HashScheme::kSglang);
  EngineHashChecker c({HashScheme::kSglang});
  BlockStored s = e.store(3, 1, true);
  s.token_ids[0] += 1;
  const auto n = check(c, {s}, WireFormat::kSglangArray);
  EXPECT_EQ(n.mismatched, 1u);
  EXPECT_EQ(n.unchecked, 2u);  // the rest of the chain cannot be judged
  EXPECT_EQ(n.matched, 0u);
}

TEST(HashCheck, UnknownParentsAreUncheckedAndMemoryIsBounded) {
  Engine e(HashScheme::kVllmSha256Cbor);
  HashCheckOptions o;
  o.scheme = HashScheme::kVllmSha256Cbor;
  o.max_digests = 2;
  EngineHashChecker c(o);
  BlockStored first = e.store(1, 1, true);
  check(c, {first, e.store(1, 10, false), e.store(1, 20, false)}, WireFormat::kVllmArray);
  EXPECT_EQ(c.counts().matched, 3u);
  // A store continuing the first block: its digest was evicted.
  Engine g(HashScheme::kVllmSha256Cbor);
  g.store(1, 1, true);
  const auto n = check(c, {g.store(2, 500, false)}, WireFormat::kVllmArray);
  EXPECT_EQ(n.unchecked, 2u);
  // The newest two are still known.
  check(c, {e.store(1, 30, false)}, WireFormat::kVllmArray);
  EXPECT_EQ(c.counts().matched, 4u);
  c.reset();
  check(c, {e.store(1, 40, false)}, WireFormat::kVllmArray);
  EXPECT_EQ(c.counts().unchecked, 3u);
}

TEST(HashCheck, OffChecksNothing) {
  Engine e(HashScheme::kVllmSha256Cbor);
  EngineHashChecker c({HashScheme::kOff});
  const auto n = check(c, {e.store(2, 1, true)}, WireFormat::kVllmArray);
  EXPECT_EQ(n.matched + n.mismatched + n.unchecked, 0u);
  EXPECT_EQ(parse_hash_scheme("vllm-sha256-cbor").value(), HashScheme::kVllmSha256Cbor);
  EXPECT_FALSE(parse_hash_scheme("xxhash").ok());
}

// ---- HashQuarantine ----

HashCheckCounts counts(uint64_t matched, uint64_t mismatched) {
  HashCheckCounts c;
  c.matched = matched;
  c.mismatched = mismatched;
  return c;
}

TEST(HashQuarantine, AStreamThatStopsAgreeingIsQuarantinedUntilItAgreesAgain) {
  HashQuarantine q({.max_mismatch_ratio = 0.5, .window_blocks = 100});
  EXPECT_EQ(q.update(counts(100, 0), true), HashQuarantine::Change::kNone);
  EXPECT_EQ(q.update(counts(110, 40), true), HashQuarantine::Change::kNone);     // window not full
  EXPECT_EQ(q.update(counts(120, 80), true), HashQuarantine::Change::kEntered);  // 80 of 100
  EXPECT_TRUE(q.quarantined());
  EXPECT_DOUBLE_EQ(q.last_ratio(), 0.8);
  EXPECT_EQ(q.update(counts(140, 160), true), HashQuarantine::Change::kNone);  // 80 of 100 again
  EXPECT_EQ(q.update(counts(240, 160), true), HashQuarantine::Change::kLeft);
  EXPECT_FALSE(q.quarantined());
  EXPECT_EQ(q.episodes(), 1u);
}

TEST(HashQuarantine, NothingIsJudgedWhileTheSchemeIsUnknownOrTheRuleIsOff) {
  // A worker with another algorithm: auto never settles, its index is still right.
  HashQuarantine q({.max_mismatch_ratio = 0.5, .window_blocks = 10});
  EXPECT_EQ(q.update(counts(0, 1000), false), HashQuarantine::Change::kNone);
  EXPECT_FALSE(q.quarantined());
  // What was counted before the scheme settled is not held against it afterwards.
  EXPECT_EQ(q.update(counts(10, 1000), true), HashQuarantine::Change::kNone);
  EXPECT_FALSE(q.quarantined());
  HashQuarantine off({.max_mismatch_ratio = 0, .window_blocks = 10});
  EXPECT_EQ(off.update(counts(0, 1000), true), HashQuarantine::Change::kNone);
}

TEST(HashQuarantine, AConfiguredSchemeJudgesAFloodOfMadeUpHashes) {
  EngineHashChecker c({HashScheme::kVllmSha256Cbor});
  HashQuarantine q({.max_mismatch_ratio = 0.5, .window_blocks = 16});
  Engine e(HashScheme::kVllmSha256Cbor);
  check(c, {e.store(2, 1, true)}, WireFormat::kVllmArray);
  EXPECT_EQ(q.update(c.counts(), true), HashQuarantine::Change::kNone);
  HashQuarantine::Change change = HashQuarantine::Change::kNone;
  for (uint64_t k = 0; k < 16 && change == HashQuarantine::Change::kNone; ++k) {
    BlockStored bogus;
    bogus.block_size = 4;
    bogus.block_hashes = {0xdead0000 + k};
    bogus.token_ids = {1, 2, 3, static_cast<TokenId>(k)};
    check(c, {bogus}, WireFormat::kVllmArray);
    change = q.update(c.counts(), c.scheme() != HashScheme::kAuto);
  }
  EXPECT_EQ(change, HashQuarantine::Change::kEntered);
}

}  // namespace
}  // namespace kvgate::events
