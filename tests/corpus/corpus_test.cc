// The Mooncake corpus: file format round trip and damage, trace reading, the KV pool simulation,
// and the builder's stream replayed into the reference indexer.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "index/reference_indexer.h"
#include "kvgate/corpus/corpus_builder.h"
#include "kvgate/corpus/corpus_file.h"
#include "kvgate/corpus/kv_pool.h"
#include "kvgate/corpus/mooncake_trace.h"
#include "xxhash.h"

namespace kvgate::corpus {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/kvgate_corpus_" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

Result<Corpus> parse_bytes(const std::string& bytes) {
  std::vector<uint64_t> words((bytes.size() + 7) / 8);
  if (!bytes.empty()) std::memcpy(words.data(), bytes.data(), bytes.size());
  return Corpus::parse(std::move(words), bytes.size(), "test");
}

// Rewrites both checksums so a test can reach the structural checks behind them.
void reseal(std::string& bytes) {
  CorpusHeader h;
  std::memcpy(static_cast<void*>(&h), bytes.data(), sizeof(h));
  h.payload_xxh3 = XXH3_64bits(bytes.data() + sizeof(h), bytes.size() - sizeof(h));
  h.header_xxh3 = XXH3_64bits(&h, offsetof(CorpusHeader, header_xxh3));
  std::memcpy(bytes.data(), &h, sizeof(h));
}

class CorpusFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path("file.kvgc");
    auto w = CorpusWriter::open(path_);
    ASSERT_TRUE(w.ok()) << w.status();
    const std::vector<SeqHash> chain = {1, 2, 3};
    ASSERT_TRUE((*w)->lookup(chain).ok());
    const std::vector<index::EngineHash> engine = {11, 12};
    const std::vector<LocalHash> local = {21, 22};
    index::Event stored;
    stored.kind = index::EventKind::kStored;
    stored.tier = index::Tier::kHost;
    stored.has_parent = true;
    stored.parent = 10;
    stored.engine_hashes = engine;
    stored.local_hashes = local;
    index::Event removed;
    removed.kind = index::EventKind::kRemoved;
    removed.engine_hashes = std::span<const uint64_t>(engine).first(1);
    const std::vector<index::Event> events = {stored, removed, index::Event{}};
    ASSERT_TRUE((*w)->batch(HolderId(5), events).ok());
    ASSERT_TRUE((*w)->lookup({}).ok());
    CorpusParams p;
    p.workers = 7;
    std::strcpy(p.trace, "unit");
    ASSERT_TRUE((*w)->finish(p, 2, 3, 4, 5).ok());
    bytes_ = read_bytes(path_);
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::string path_;
  std::string bytes_;
};

TEST_F(CorpusFileTest, RoundTrips) {
  auto c = Corpus::load(path_);
  ASSERT_TRUE(c.ok()) << c.status();
  const CorpusTotals& t = c->header().totals;
  EXPECT_EQ(c->header().params.workers, 7u);
  EXPECT_STREQ(c->header().params.trace, "unit");
  EXPECT_EQ(t.requests, 2u);
  EXPECT_EQ(t.lookups, 2u);
  EXPECT_EQ(t.lookup_blocks, 3u);
  EXPECT_EQ(t.stored_blocks, 2u);
  EXPECT_EQ(t.removed_blocks, 1u);
  EXPECT_EQ(t.events, 3u);
  EXPECT_EQ(t.batches, 1u);
  EXPECT_EQ(t.distinct_blocks, 3u);
  EXPECT_EQ(t.peak_memberships, 4u);
  EXPECT_EQ(t.final_memberships, 5u);
  EXPECT_EQ(t.records, 3u);
  EXPECT_EQ(t.block_ops(), 6u);
  ASSERT_EQ(c->ops().size(), 3u);
  EXPECT_EQ(c->ops()[0].kind, Corpus::Op::Kind::kLookup);
  EXPECT_EQ(c->ops()[1].kind, Corpus::Op::Kind::kBatch);
  EXPECT_THAT(c->lookup(0), ElementsAre(1, 2, 3));
  EXPECT_TRUE(c->lookup(1).empty());
  const Corpus::Batch& b = c->batches()[0];
  EXPECT_EQ(b.holder, HolderId(5));
  EXPECT_EQ(b.stored_blocks, 2u);
  EXPECT_EQ(b.removed_blocks, 1u);
  auto ev = c->events(b);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kind, index::EventKind::kStored);
  EXPECT_EQ(ev[0].tier, index::Tier::kHost);
  EXPECT_TRUE(ev[0].has_parent);
  EXPECT_EQ(ev[0].parent, 10u);
  EXPECT_THAT(ev[0].engine_hashes, ElementsAre(11, 12));
  EXPECT_THAT(ev[0].local_hashes, ElementsAre(21, 22));
  EXPECT_EQ(ev[1].kind, index::EventKind::kRemoved);
  EXPECT_THAT(ev[1].engine_hashes, ElementsAre(11));
  EXPECT_EQ(ev[2].kind, index::EventKind::kCleared);
  // Moving the corpus keeps its views valid.
  Corpus moved = std::move(*c);
  EXPECT_THAT(moved.lookup(0), ElementsAre(1, 2, 3));
}

TEST_F(CorpusFileTest, EveryTruncationIsAnError) {
  for (size_t len = 0; len < bytes_.size(); ++len) {
    auto c = parse_bytes(bytes_.substr(0, len));
    ASSERT_FALSE(c.ok()) << "truncated to " << len;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
    if (len < sizeof(CorpusHeader)) {
      EXPECT_THAT(c.status().message(), HasSubstr("shorter than the 256-byte header"));
    } else {
      EXPECT_THAT(c.status().message(), HasSubstr("(truncated)"));
    }
  }
}

TEST_F(CorpusFileTest, EveryBitFlipIsAnError) {
  for (size_t i = 0; i < bytes_.size(); ++i) {
    for (int bit : {0, 7}) {
      std::string damaged = bytes_;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      auto c = parse_bytes(damaged);
      ASSERT_FALSE(c.ok()) << "flipped bit " << bit << " of byte " << i;
      EXPECT_THAT(c.status().message(), HasSubstr("at byte"));
    }
  }
}

TEST_F(CorpusFileTest, WrongMagicAndVersionAreNamed) {
  std::string bad = bytes_;
  bad[0] = 'X';
  EXPECT_THAT(parse_bytes(bad).status().message(), HasSubstr("not a kvgate corpus"));
  bad = bytes_;
  bad[8] = 2;  // version
  reseal(bad);
  EXPECT_THAT(parse_bytes(bad).status().message(),
              HasSubstr("version 2 is not the supported version 1"));
  EXPECT_THAT(parse_bytes("").status().message(), HasSubstr("shorter than"));
  EXPECT_EQ(Corpus::load(temp_path("absent.kvgc")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CorpusFileTest, StructuralDamageBehindValidChecksumsIsNamed) {
  // Payload layout: lookup head at 256, its 3 hashes, then the batch head at 288, its second word
  // at 296, the stored event's head at 304.
  auto with = [&](size_t offset, uint8_t value) {
    std::string b = bytes_;
    b[offset] = static_cast<char>(value);
    reseal(b);
    return std::string(parse_bytes(b).status().message());
  };
  EXPECT_THAT(with(256, 9), HasSubstr("record 0: unknown record tag 9 (at byte 256)"));
  EXPECT_THAT(with(260, 200), HasSubstr("record 0: lookup runs past the end"));
  EXPECT_THAT(with(305, 4), HasSubstr("record 1 event 0: unknown tier 4 (at byte 304)"));
  EXPECT_THAT(with(304, 3), HasSubstr("unknown event kind 3"));
  EXPECT_THAT(with(306, 2), HasSubstr("bad flags"));
  EXPECT_THAT(with(308, 250), HasSubstr("hashes run past the end"));
  EXPECT_THAT(with(300, 1), HasSubstr("reserved batch field is not zero"));
  EXPECT_THAT(with(296, 2), HasSubstr("do not add up"));  // two events declared, three present
  std::string totals = bytes_;
  CorpusHeader h;
  std::memcpy(static_cast<void*>(&h), totals.data(), sizeof(h));
  h.totals.lookup_blocks = 4;
  std::memcpy(totals.data(), &h, sizeof(h));
  reseal(totals);
  EXPECT_THAT(parse_bytes(totals).status().message(),
              HasSubstr("records do not add up to the header's totals"));
}

TEST(MooncakeTrace, ParsesRowsAndNamesBadLines) {
  auto t = parse_trace(
      "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [0, 7]}\n"
      "\n"
      "{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [3]}\n",
      "t");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].timestamp_ms, 5u);
  EXPECT_EQ(t->rows[0].input_length, 600u);
  EXPECT_THAT(t->rows[0].hash_ids, ElementsAre(0, 7));
  EXPECT_EQ(t->max_hash_id, 7u);
  auto first = parse_trace(
      "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, "
      "\"hash_ids\": [1]}\n{\"timestamp\": 2}\n",
      "t", 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->rows.size(), 1u);

  const std::string ok_head = "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, ";
  EXPECT_THAT(parse_trace("{\"timestamp\": 1,", "t").status().message(),
              HasSubstr("trace t line 1: not JSON"));
  EXPECT_THAT(parse_trace(ok_head + "\"hash_ids\": [1]}\n[1]", "t").status().message(),
              HasSubstr("line 2: not a JSON object"));
  EXPECT_THAT(parse_trace(ok_head + "\"hash_ids\": [-1]}", "t").status().message(),
              HasSubstr("a hash id is not a non-negative integer"));
  EXPECT_THAT(parse_trace(ok_head + "\"hash_ids\": [1.5]}", "t").status().message(),
              HasSubstr("a hash id is not a non-negative integer"));
  EXPECT_THAT(parse_trace(ok_head + "\"ids\": [1]}", "t").status().message(),
              HasSubstr("\"hash_ids\" is missing"));
  EXPECT_THAT(parse_trace("{\"timestamp\": -1, \"input_length\": 1, \"output_length\": 1, "
                          "\"hash_ids\": []}",
                          "t")
                  .status()
                  .message(),
              HasSubstr("\"timestamp\" is missing or not a non-negative integer"));
  EXPECT_THAT(parse_trace("\n\n", "t").status().message(), HasSubstr("has no rows"));
  EXPECT_EQ(read_trace("/nonexistent/trace.jsonl").status().code(), absl::StatusCode::kNotFound);
}

std::vector<PoolBlock> chain_of(std::initializer_list<uint64_t> ids) {
  std::vector<PoolBlock> out;
  for (uint64_t id : ids) out.push_back({id, id + 1000});
  return out;
}

TEST(KvPool, KeepsThePrefixStoresTheRestAndEvictsLeavesFirst) {
  KvPool pool(4);
  std::vector<index::EngineHash> evicted;
  KvPool::Outcome o = pool.serve(chain_of({1, 2, 3}), evicted);
  EXPECT_EQ(o.matched, 0u);
  EXPECT_EQ(o.stored, 3u);
  EXPECT_THAT(pool.recency_order(), ElementsAre(1, 2, 3));
  o = pool.serve(chain_of({1, 2, 4}), evicted);
  EXPECT_EQ(o.matched, 2u);
  EXPECT_EQ(o.stored, 1u);
  EXPECT_TRUE(evicted.empty());
  EXPECT_THAT(pool.recency_order(), ElementsAre(1, 2, 4, 3));
  o = pool.serve(chain_of({5, 6}), evicted);
  EXPECT_EQ(o.stored, 2u);
  EXPECT_THAT(evicted, ElementsAre(1003, 1004));  // the leaves, least recent first
  EXPECT_THAT(pool.recency_order(), ElementsAre(5, 6, 1, 2));
  EXPECT_EQ(pool.size(), 4u);
}

TEST(KvPool, NeverEvictsTheRequestsOwnPrefixAndStoresWhatFits) {
  KvPool pool(3);
  std::vector<index::EngineHash> evicted;
  pool.serve(chain_of({1, 2, 3}), evicted);
  const KvPool::Outcome o = pool.serve(chain_of({1, 2, 3, 4, 5}), evicted);
  EXPECT_EQ(o.matched, 3u);
  EXPECT_EQ(o.stored, 0u);
  EXPECT_TRUE(evicted.empty());
  KvPool small(2);
  const KvPool::Outcome s = small.serve(chain_of({7, 8, 9}), evicted);
  EXPECT_EQ(s.stored, 2u);
  EXPECT_THAT(small.recency_order(), ElementsAre(7, 8));
}

TEST(KvPool, StaysPrefixClosedUnderRandomTraffic) {
  // Chains over a small tree: block id = parent id * 4 + branch, so a block's parent is id / 4.
  KvPool pool(24);
  std::vector<index::EngineHash> evicted;
  uint64_t x = 12345;
  for (int r = 0; r < 5000; ++r) {
    std::vector<PoolBlock> chain;
    uint64_t id = 1;
    const int len = 1 + static_cast<int>((x >> 7) % 9);
    for (int i = 0; i < len; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      id = id * 4 + (x >> 62);
      chain.push_back({id, id});
    }
    pool.serve(chain, evicted);
    for (SeqHash s : pool.recency_order()) {
      ASSERT_TRUE(s / 4 == 1 || pool.contains(s / 4)) << "hole under " << s << " at request " << r;
    }
  }
}

class CorpusBuilderTest : public ::testing::Test {
 protected:
  static std::string excerpt() {
    const char* src = std::getenv("KVGATE_SOURCE_DIR");
    return std::string(src ? src : ".") + "/tests/corpus/data/conversation_excerpt.jsonl";
  }
  static BuildOptions small() {
    return {.workers = 4,
            .duplication = 3,
            .length_factor = 4,
            .block_tokens = 128,
            .pool_blocks = 300,
            .seed = 9};
  }
};

TEST_F(CorpusBuilderTest, StreamIsCleanAndItsTotalsAreTrue) {
  auto trace = read_trace(excerpt());
  ASSERT_TRUE(trace.ok()) << trace.status();
  const std::string path = temp_path("built.kvgc");
  auto built = build_corpus(*trace, "excerpt", small(), path);
  ASSERT_TRUE(built.ok()) << built.status();
  auto c = Corpus::load(path);
  ASSERT_TRUE(c.ok()) << c.status();
  const CorpusTotals& t = c->header().totals;
  EXPECT_EQ(t.requests, trace->rows.size() * 3);
  EXPECT_EQ(t.lookups, t.requests);
  uint64_t ids = 0;
  for (const TraceRow& r : trace->rows) ids += r.hash_ids.size();
  EXPECT_EQ(t.lookup_blocks, ids * 4 * 3);
  EXPECT_GT(t.removed_blocks, 0u);
  EXPECT_LT(t.stored_blocks, t.lookup_blocks);  // some prefixes were reused

  // Replayed into the reference, the stream never orphans, moves or misses a removal, and the
  // index ends holding exactly what the pools hold.
  index::ReferenceIndexer ref;
  index::ApplyResult sum;
  uint64_t peak = 0, matched = 0;
  std::vector<index::HolderMatch> out;
  for (const Corpus::Op& op : c->ops()) {
    if (op.kind == Corpus::Op::Kind::kLookup) {
      ref.lookup(c->lookup(op.index), out);
      for (const auto& m : out) matched += m.device_depth;
    } else {
      const Corpus::Batch& b = c->batches()[op.index];
      sum += ref.apply(b.holder, c->events(b));
      peak = std::max(peak, ref.stats().memberships);
    }
  }
  EXPECT_EQ(sum.orphan_events, 0u);
  EXPECT_EQ(sum.unknown_removals, 0u);
  EXPECT_EQ(sum.moved_blocks, 0u);
  EXPECT_EQ(sum.malformed_events, 0u);
  EXPECT_EQ(sum.stored_blocks, t.stored_blocks);
  EXPECT_EQ(sum.removed_blocks, t.removed_blocks);
  EXPECT_EQ(ref.stats().memberships, t.final_memberships);
  EXPECT_EQ(peak, t.peak_memberships);
  EXPECT_LE(peak, 4u * 300u);
  EXPECT_GT(matched, 0u);
  EXPECT_GE(t.distinct_blocks, ref.stats().resident_blocks);

  // The first request's chain is the router's hashing of its expanded ids.
  const uint64_t first_id = trace->rows[0].hash_ids[0] * 4;
  BlockHasher hasher;
  const LocalHash l0 = XXH3_64bits_withSeed(&first_id, 8, kDefaultHashSeed);
  const uint64_t second_id = first_id + 1;
  const LocalHash l1 = XXH3_64bits_withSeed(&second_id, 8, kDefaultHashSeed);
  EXPECT_EQ(c->lookup(0)[0], l0);
  EXPECT_EQ(c->lookup(0)[1], hasher.chain(l0, l1));
  std::remove(path.c_str());
}

TEST_F(CorpusBuilderTest, SameInputsSameBytes) {
  auto trace = read_trace(excerpt());
  ASSERT_TRUE(trace.ok()) << trace.status();
  const std::string a = temp_path("a.kvgc"), b = temp_path("b.kvgc"), c = temp_path("c.kvgc");
  ASSERT_TRUE(build_corpus(*trace, "excerpt", small(), a).ok());
  ASSERT_TRUE(build_corpus(*trace, "excerpt", small(), b).ok());
  BuildOptions other = small();
  other.seed = 10;
  ASSERT_TRUE(build_corpus(*trace, "excerpt", other, c).ok());
  EXPECT_EQ(read_bytes(a), read_bytes(b));
  EXPECT_NE(read_bytes(a), read_bytes(c));
  for (const auto& p : {a, b, c}) std::remove(p.c_str());
}

TEST(CorpusBuilder, RejectsInconsistentOptions) {
  BuildOptions o;
  EXPECT_TRUE(validate(o).ok());
  o.block_tokens = 256;
  EXPECT_THAT(validate(o).message(), HasSubstr("--block-tokens must be 512 / --length-factor"));
  o = {};
  o.length_factor = 3;
  EXPECT_FALSE(validate(o).ok());
  o = {};
  o.workers = 0;
  EXPECT_FALSE(validate(o).ok());
  o = {};
  o.pool_blocks = 0;
  EXPECT_FALSE(validate(o).ok());
}

}  // namespace
}  // namespace kvgate::corpus
