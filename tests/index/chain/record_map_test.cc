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
      ASSERT_TRUE(map.live(r, k));
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

}  // namespace
}  // namespace kvgate::index::chain::detail
