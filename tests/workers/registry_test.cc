#include "kvgate/workers/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kvgate::workers {
namespace {

TEST(Registry, NormalizesUrls) {
  EXPECT_EQ(*WorkerRegistry::normalize_url("HTTP://LocalHost:8000/"), "http://localhost:8000");
  EXPECT_FALSE(WorkerRegistry::normalize_url("localhost:8000").ok());
  EXPECT_FALSE(WorkerRegistry::normalize_url("http://localhost").ok());
  EXPECT_FALSE(WorkerRegistry::normalize_url("http://localhost:0").ok());
  EXPECT_FALSE(WorkerRegistry::normalize_url("http://localhost:80/v1").ok());
  EXPECT_FALSE(WorkerRegistry::normalize_url("http://localhost:8x").ok());
  // Credentials leave the URL and become the worker's authorization.
  auto a = parse_worker_url("http://user:pass@Engine-1:8000/");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->url, "http://engine-1:8000");
  EXPECT_EQ(a->host, "engine-1");
  EXPECT_EQ(a->port, 8000);
  EXPECT_EQ(a->authorization, "Basic dXNlcjpwYXNz");
  EXPECT_EQ(*WorkerRegistry::normalize_url("http://user:pass@engine-1:8000"),
            "http://engine-1:8000");
  EXPECT_EQ(redact_url("http://user:pass@engine-1:8000"), "http://***@engine-1:8000");
  EXPECT_EQ(redact_url("http://engine-1:8000"), "http://engine-1:8000");
  const auto bad = parse_worker_url("http://user:pass@engine-1:80x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()).find("pass"), std::string::npos);
}

TEST(Registry, SnapshotsAreImmutableAndRepublishedOnChange) {
  ManualClock clock;
  WorkerRegistry reg({}, clock);
  auto a =
      reg.add("http://127.0.0.1:8000", {.models = {"m1"}, .holders = {HolderId(0), HolderId(1)}});
  ASSERT_TRUE(a.ok());
  auto b = reg.add("http://127.0.0.1:8001/", {.models = {"m2", "m1"}, .holders = {HolderId(4)}});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reg.add("http://127.0.0.1:8000").status().code(), absl::StatusCode::kAlreadyExists);

  const auto s1 = reg.snapshot();
  ASSERT_EQ(s1->workers.size(), 2u);
  EXPECT_EQ(s1->models, (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(s1->worker_index_of(HolderId(1)), 0);
  EXPECT_EQ(s1->worker_index_of(HolderId(4)), 1);
  EXPECT_EQ(s1->worker_index_of(HolderId(2)), -1);
  EXPECT_EQ(s1->worker_index_of(HolderId(99)), -1);
  EXPECT_TRUE(s1->knows_model("m2"));
  EXPECT_FALSE(s1->knows_model("m3"));

  auto removed = reg.remove("http://127.0.0.1:8000");
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(removed->id(), (*a)->id());
  const auto s2 = reg.snapshot();
  EXPECT_GT(s2->version, s1->version);
  EXPECT_EQ(s2->workers.size(), 1u);
  EXPECT_EQ(s2->worker_index_of(HolderId(4)), 0);
  EXPECT_EQ(s2->worker_index_of(HolderId(1)), -1);
  EXPECT_EQ(s1->workers.size(), 2u);  // the old snapshot did not change under its reader
  EXPECT_EQ(reg.remove("http://127.0.0.1:8000"), nullptr);
}

TEST(Registry, UpdateInfoRepublishes) {
  ManualClock clock;
  WorkerRegistry reg({}, clock);
  auto w = *reg.add("http://127.0.0.1:9000");
  EXPECT_TRUE(reg.snapshot()->knows_model("anything"));  // nothing reported yet
  ASSERT_TRUE(reg.update_info(w->id(), [](WorkerInfo& i) {
    i.models = {"llama"};
    i.block_size = 16;
  }));
  EXPECT_EQ(w->info()->block_size, 16u);
  EXPECT_FALSE(reg.snapshot()->knows_model("anything"));
  EXPECT_FALSE(reg.update_info(WorkerId(77), [](WorkerInfo&) {}));
}

// Readers copy snapshots and worker descriptions while the control path republishes them. Under
// the tsan preset this checks that the hand-over is synchronization ThreadSanitizer can see.
TEST(Registry, SnapshotsAreReadableWhileTheControlPathRepublishes) {
  ManualClock clock;
  WorkerRegistry reg({}, clock);
  auto w = *reg.add("http://127.0.0.1:9000");
  constexpr uint32_t kUpdates = 2000;
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      uint64_t last_version = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const auto s = reg.snapshot();
        ASSERT_GE(s->version, last_version);
        last_version = s->version;
        ASSERT_EQ(s->workers.size(), 1u);
        // Every description is whole: its block size always equals its number of models.
        ASSERT_EQ(s->infos[0]->block_size, s->infos[0]->models.size());
        const auto info = s->workers[0]->info();
        ASSERT_EQ(info->block_size, info->models.size());
      }
    });
  }
  for (uint32_t i = 1; i <= kUpdates; ++i) {
    EXPECT_TRUE(reg.update_info(w->id(), [i](WorkerInfo& info) {
      info.block_size = i % 8;
      info.models.assign(i % 8, "m");
    }));
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(reg.snapshot()->version, kUpdates + 1);  // the add, then every update
}

}  // namespace
}  // namespace kvgate::workers

namespace kvgate::workers {
namespace {

TEST(Registry, SnapshotTakesTheMostCommonBlockSizeAndCollectsAdapters) {
  ManualClock clock;
  WorkerRegistry reg({}, clock);
  ASSERT_TRUE(reg.add("http://127.0.0.1:1",
                      {.models = {"base", "lora-a"}, .lora_adapters = {"lora-a"}, .block_size = 16})
                  .ok());
  ASSERT_TRUE(reg.add("http://127.0.0.1:2", {.block_size = 32}).ok());
  ASSERT_TRUE(reg.add("http://127.0.0.1:3", {.block_size = 16}).ok());
  ASSERT_TRUE(reg.add("http://127.0.0.1:4").ok());
  const auto s = reg.snapshot();
  EXPECT_EQ(s->block_size, 16u);
  EXPECT_EQ(s->lora_adapters, std::vector<std::string>{"lora-a"});
}

}  // namespace
}  // namespace kvgate::workers
