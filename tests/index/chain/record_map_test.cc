// RecordMap against a model (absl::flat_hash_map): random inserts, finds and erases, through
// growth and through a long steady state of as many inserts as erases, the chain index's lane
// state under a full KV pool.
#include "index/chain/detail/record_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace kvgate::index::chain::detail {
namespace {

void expect_equal(RecordMap& map, const absl::flat_hash_map<uint64_t, RunId>& model,
                  const std::vector<uint64_t>& absent) {
  ASSERT_EQ(map.size(), model.size());
  for (const auto& [engine, run] : model) {
    const Record* r = map.find(engine);
    ASSERT_NE(r, nullptr) << engine;
    ASSERT_EQ(r->run, run);
  }
  for (uint64_t engine : absent) ASSERT_EQ(map.find(engine), nullptr) << engine;
  size_t seen = 0;
  map.for_each([&](const Record&) { ++seen; });
  ASSERT_EQ(seen, model.size());
}

TEST(RecordMap, MatchesAModelThroughGrowthAndSteadyChurn) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    RecordMap map;
    absl::flat_hash_map<uint64_t, RunId> model;
    std::vector<uint64_t> keys;  // live keys, for erasing a random one
    std::vector<uint64_t> gone;  // erased keys (must not be found)
    // Clustered keys too: sequential engine hashes stress one probe path.
    auto fresh = [&](size_t i) { return i % 3 == 0 ? (seed << 40) + i : rng(); };
    auto insert = [&](size_t i) {
      const uint64_t k = fresh(i);
      if (model.contains(k)) return;
      const RunId run = static_cast<RunId>(rng() & 0xffffff);
      map.insert(k, run, 0, TierCopies{});
      model[k] = run;
      keys.push_back(k);
    };
    auto erase_one = [&] {
      const size_t at = rng() % keys.size();
      const uint64_t k = keys[at];
      Record* r = map.find(k);
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(r->engine, k);
      map.erase(r);
      model.erase(k);
      keys[at] = keys.back();
      keys.pop_back();
      if (gone.size() < 2000) gone.push_back(k);
    };
    size_t i = 0;
    for (; model.size() < 16384; ++i) insert(i);  // fill, growing
    expect_equal(map, model, gone);
    const uint64_t full_bytes = map.bytes();
    EXPECT_GT(map.size(), map.capacity() * 2 / 3) << "a full pool's map runs well filled";
    for (int round = 0; round < 20; ++round) {
      for (int n = 0; n < 20000; ++n) {
        if (rng() % 2 == 0 || keys.size() < 16000) {
          insert(i++);
        } else {
          erase_one();
        }
        if (keys.size() > 16800) erase_one();
      }
      gone.erase(
          std::remove_if(gone.begin(), gone.end(), [&](uint64_t k) { return model.contains(k); }),
          gone.end());
      expect_equal(map, model, gone);
    }
    EXPECT_LE(map.bytes(), full_bytes * 5 / 4)
        << "steady churn at a constant size does not keep growing the table";
    while (!keys.empty()) erase_one();
    expect_equal(map, model, gone);
    EXPECT_EQ(map.size(), 0u);
  }
}

TEST(RecordMap, KeepsEveryFieldThroughGrowthMovesAndChurn) {
  RecordMap map;
  std::mt19937_64 rng(7);
  struct Want {
    RunId run;
    uint16_t offset;
    uint16_t copies;
  };
  absl::flat_hash_map<uint64_t, Want> model;
  auto insert = [&] {
    const uint64_t k = rng();
    if (model.contains(k)) return;
    TierCopies c;
    c.bits = static_cast<uint16_t>(rng());
    const Want w{static_cast<RunId>(rng() % 1000000), static_cast<uint16_t>(rng()), c.bits};
    Record* r = map.insert(k, w.run, w.offset, c);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r, map.find(k)) << "insert returns the record as placed";
    model[k] = w;
  };
  auto check = [&] {
    ASSERT_EQ(map.size(), model.size());
    for (const auto& [k, w] : model) {
      const Record* r = map.find(k);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(r->engine, k);
      EXPECT_EQ(r->run, w.run);
      EXPECT_EQ(r->offset, w.offset);
      EXPECT_EQ(r->copies.bits, w.copies);
    }
  };
  for (int i = 0; i < 20000; ++i) insert();
  check();
  for (int i = 0; i < 20000; ++i) {  // at a constant size: erases free slots that inserts reuse
    auto it = model.begin();
    std::advance(it, static_cast<long>(rng() % 64));
    Record* r = map.find(it->first);
    ASSERT_NE(r, nullptr);
    map.erase(r);
    EXPECT_EQ(map.find(it->first), nullptr) << "an erased record is gone";
    model.erase(it);
    insert();
  }
  check();
}

TEST(RecordMap, EmptyMapsAndEngineHashZero) {
  RecordMap map;
  EXPECT_EQ(map.find(0), nullptr);
  map.prefetch(0);  // nothing to ask for in an empty map
  size_t seen = 0;
  map.for_each([&](const Record&) { ++seen; });
  EXPECT_EQ(seen, 0u);
  Record* r = map.insert(0, 5, 1, TierCopies{});
  ASSERT_EQ(map.find(0), r);
  EXPECT_EQ(r->run, 5u);
  Record* other = map.insert(1, 6, 2, TierCopies{});
  map.erase(map.find(0));
  EXPECT_EQ(map.find(0), nullptr);
  EXPECT_EQ(map.find(1), other) << "erasing never moves other records";
  map.clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.find(1), nullptr);
  map.insert(2, 7, 3, TierCopies{});
  EXPECT_EQ(map.find(2)->run, 7u);
}

}  // namespace

struct RecordMapTestPeer {
  static size_t buckets(const RecordMap& m) { return m.left_count_ + m.right_count_; }
  static std::pair<size_t, size_t> places(const RecordMap& m, uint64_t k) {
    const auto p = m.places(k);
    return {p.left, p.right};
  }
  static void grow(RecordMap& m, size_t records) { m.grow(records); }
};

namespace {

// reserve(): the table is sized once, inserts up to the reserved count never grow it, and after
// clear() the first insert brings the reserved size back (an engine's pool refills).
TEST(RecordMap, ReserveSizesOnceAndSurvivesClear) {
  RecordMap map;
  map.reserve(1000);
  const size_t buckets = RecordMapTestPeer::buckets(map);
  EXPECT_GE(map.capacity(), 1000u);
  std::mt19937_64 rng(5);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 1000; ++i) {
    keys.push_back(rng());
    map.insert(keys.back(), 1, static_cast<uint16_t>(i), TierCopies{});
  }
  EXPECT_EQ(RecordMapTestPeer::buckets(map), buckets) << "grew below the reserved size";
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(map.find(keys[i])->offset, i);
  for (int i = 1000; i < 1500; ++i) map.insert(rng(), 1, 0, TierCopies{});
  EXPECT_GT(RecordMapTestPeer::buckets(map), buckets) << "past it, the table grows as before";
  map.clear();
  EXPECT_EQ(map.bytes(), 0u);
  map.insert(7, 1, 0, TierCopies{});
  EXPECT_GE(map.capacity(), 1000u);
  EXPECT_EQ(map.find(7)->run, 1u);
}

// Nine keys whose two buckets are the same two buckets: the ninth cannot fit in their eight slots,
// no resident can move elsewhere, the walk gives up, and the table must grow with nothing lost.
TEST(RecordMap, GrowsWhenNineKeysShareTheirTwoBuckets) {
  RecordMap map;
  RecordMapTestPeer::grow(map, 60);  // a small table: sharing a pair of buckets is findable
  const size_t before = RecordMapTestPeer::buckets(map);
  ASSERT_GE(before, 8u);
  std::mt19937_64 rng(11);
  const auto target = RecordMapTestPeer::places(map, rng());
  std::vector<uint64_t> keys;
  while (keys.size() < 9) {
    const uint64_t k = rng();
    const auto p = RecordMapTestPeer::places(map, k);
    if (p == target && std::find(keys.begin(), keys.end(), k) == keys.end()) {
      keys.push_back(k);
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    map.insert(keys[i], static_cast<RunId>(100 + i), static_cast<uint16_t>(i), TierCopies{});
  }
  EXPECT_GT(RecordMapTestPeer::buckets(map), before) << "the walk gave up and the table grew";
  ASSERT_EQ(map.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const Record* r = map.find(keys[i]);
    ASSERT_NE(r, nullptr) << i;
    EXPECT_EQ(r->run, 100 + i);
    EXPECT_EQ(r->offset, i);
  }
}

}  // namespace
}  // namespace kvgate::index::chain::detail
