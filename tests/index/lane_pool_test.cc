#include "kvgate/index/lane_pool.h"

#include "kvgate/core/numa.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

namespace kvgate::index {
namespace {

TEST(LanePool, KeepsEachKeysOrderAndNeverRunsAKeyOnTwoLanes) {
  constexpr int kKeys = 16, kPerKey = 2000;
  std::array<std::atomic<int>, kKeys> busy{};
  std::array<int, kKeys> next{};  // touched only by the key's running task
  std::atomic<int> violations{0};
  {
    LanePool pool({.lanes = 4, .max_queued_per_key = kPerKey, .burst = 8});
    std::vector<std::thread> producers;
    for (int p = 0; p < 2; ++p) {
      producers.emplace_back([&, p] {
        for (int i = 0; i < kPerKey; ++i) {
          for (int k = p; k < kKeys; k += 2) {
            ASSERT_TRUE(pool.submit(k, [&, k, i] {
              if (busy[k].exchange(1) != 0) ++violations;
              if (next[k] != i) ++violations;
              next[k] = i + 1;
              busy[k].store(0);
            }));
          }
        }
      });
    }
    for (auto& t : producers) t.join();
    pool.flush_all();
    const auto s = pool.stats();
    EXPECT_EQ(s.executed, uint64_t{kKeys} * kPerKey);
    EXPECT_EQ(s.queued, 0u);
  }
  EXPECT_EQ(violations.load(), 0);
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(next[k], kPerKey);
}

TEST(LanePool, OneBusyKeyDoesNotStarveTheOthers) {
  LanePool pool({.lanes = 1, .max_queued_per_key = 100000, .burst = 4});
  std::atomic<bool> gate{false};
  ASSERT_TRUE(pool.submit(1, [&] {
    while (!gate.load()) std::this_thread::yield();
  }));
  std::atomic<int> key1_done{0};
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(pool.submit(1, [&] { ++key1_done; }));
  std::atomic<int> seen_when_key2_ran{-1};
  ASSERT_TRUE(pool.submit(2, [&] { seen_when_key2_ran = key1_done.load(); }));
  gate = true;
  pool.flush_all();
  // Key 2 ran after a burst or two of key 1 (4 tasks each), not after all 1,000 of them.
  EXPECT_GE(seen_when_key2_ran.load(), 0);
  EXPECT_LE(seen_when_key2_ran.load(), 8);
}

TEST(LanePool, RefusesBeyondTheQueueBoundAndForgetDrops) {
  LanePool pool({.lanes = 1, .max_queued_per_key = 3, .burst = 1});
  std::atomic<bool> gate{false};
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.submit(7, [&] {
    while (!gate.load()) std::this_thread::yield();
    ++ran;
  }));
  // The first task may still be queued or already running: fill up to the bound either way.
  int accepted = 0;
  for (int i = 0; i < 10; ++i) accepted += pool.submit(7, [&] { ++ran; }) ? 1 : 0;
  EXPECT_GE(accepted, 2);
  EXPECT_LE(accepted, 3);
  EXPECT_EQ(pool.stats().refused, static_cast<uint64_t>(10 - accepted));
  const size_t dropped = pool.forget(7);
  gate = true;
  pool.flush_all();
  EXPECT_EQ(ran.load() + static_cast<int>(dropped), 1 + accepted);
  // The key works again after forget().
  ASSERT_TRUE(pool.submit(7, [&] { ran += 100; }));
  pool.flush(7);
  EXPECT_GE(ran.load(), 100);
}

// Per-node groups (NUMA): key k runs only on the lanes of group k % groups, pinned to that group's
// CPUs, and each key keeps its order while both groups run at once.
TEST(LanePool, GroupsRunTheirKeysOnTheirOwnCpus) {
  const std::vector<int> cpus = current_thread_cpus();
  ASSERT_FALSE(cpus.empty());
  const std::vector<std::vector<int>> groups = {{cpus.front()}, {cpus.back()}};
  constexpr int kKeys = 8, kPerKey = 500;
  std::array<std::vector<int>, kKeys> ran_on;  // touched only by the key's running task
  std::array<int, kKeys> next{};
  std::atomic<int> violations{0};
  {
    LanePool pool({.lanes = 3, .max_queued_per_key = kPerKey, .burst = 4, .group_cpus = groups});
    EXPECT_EQ(pool.lanes(), 3u);
    for (int i = 0; i < kPerKey; ++i) {
      for (int k = 0; k < kKeys; ++k) {
        ASSERT_TRUE(pool.submit(k, [&, k, i] {
          if (next[k] != i) ++violations;
          next[k] = i + 1;
          if (i % 100 == 0) ran_on[k] = current_thread_cpus();
        }));
      }
    }
    pool.flush_all();
  }
  EXPECT_EQ(violations.load(), 0);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(next[k], kPerKey);
    EXPECT_EQ(ran_on[k], groups[k % 2]) << "key " << k;
  }
}

TEST(LanePool, DestructorRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    LanePool pool({.lanes = 2});
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(pool.submit(i % 5, [&] { ++ran; }));
  }
  EXPECT_EQ(ran.load(), 500);
}

}  // namespace
}  // namespace kvgate::index
