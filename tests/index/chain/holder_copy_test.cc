// The holder-table copy every chain lookup makes of its first run: the kernel copy_clamped picks
// (AVX2 where the CPU has it) against the scalar one and against a model, over table sizes that
// leave every tail length, and limits that clamp none, some and all of the holders.
#include "index/chain/detail/holder_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "index/chain/detail/run.h"

namespace kvgate::index::chain::detail {
namespace {

struct Model {
  std::vector<HolderMatch> out;
  ClampedCopy counts;
};

Model model(const std::vector<HolderEntry>& table, uint32_t limit) {
  Model m;
  for (const HolderEntry& e : table) {
    const uint32_t any = std::min<uint32_t>(e.any, limit);
    m.out.push_back({HolderId(e.holder), std::min<uint32_t>(e.device, limit), any});
    m.counts.max_any = std::max<uint32_t>(m.counts.max_any, e.any);
    m.counts.zeros += any == 0;
    m.counts.full += any == limit;
  }
  return m;
}

void expect_same(const ClampedCopy& got, const ClampedCopy& want) {
  EXPECT_EQ(got.max_any, want.max_any);
  EXPECT_EQ(got.zeros, want.zeros);
  EXPECT_EQ(got.full, want.full);
}

TEST(HolderCopy, BothKernelsMatchTheModel) {
  std::printf("copy_clamped uses the %s kernel\n",
              copy_clamped_is_vectorized() ? "AVX2" : "scalar");
  std::mt19937_64 rng(7);
  for (size_t n = 0; n <= 70; ++n) {
    for (int round = 0; round < 20; ++round) {
      std::vector<HolderEntry> table;
      // Depths across the whole 16-bit range (the vector kernel compares unsigned), holders with
      // their top bits set (they share a dword with the depths in the packed word).
      const uint32_t depth_span = round % 2 ? 65536 : 300;
      for (size_t i = 0; i < n; ++i) {
        const uint16_t any = static_cast<uint16_t>(rng() % depth_span);
        const uint16_t device = static_cast<uint16_t>(std::min<uint64_t>(rng() % depth_span, any));
        table.push_back({static_cast<uint32_t>(rng()), any, device});
      }
      const uint32_t limits[] = {
          0,     1,     static_cast<uint32_t>(rng() % depth_span),
          65535, 70000, table.empty() ? 5u : table[rng() % table.size()].any};
      std::vector<Word> words(n + 1);
      for (size_t i = 0; i < n; ++i) words[i].store(table[i].pack());
      for (uint32_t limit : limits) {
        const Model want = model(table, limit);
        // Sentinel past the end: neither kernel writes beyond n holders.
        std::vector<HolderMatch> fast(n + 1, HolderMatch{HolderId(99), 99, 99});
        std::vector<HolderMatch> slow(n + 1, HolderMatch{HolderId(99), 99, 99});
        expect_same(copy_clamped(words.data(), n, limit, fast.data()), want.counts);
        expect_same(copy_clamped_scalar(words.data(), n, limit, slow.data()), want.counts);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(fast[i], want.out[i]) << "n " << n << " limit " << limit << " at " << i;
          ASSERT_EQ(slow[i], want.out[i]) << "n " << n << " limit " << limit << " at " << i;
        }
        EXPECT_EQ(fast[n], (HolderMatch{HolderId(99), 99, 99}));
        EXPECT_EQ(slow[n], (HolderMatch{HolderId(99), 99, 99}));
      }
    }
  }
}

}  // namespace
}  // namespace kvgate::index::chain::detail
