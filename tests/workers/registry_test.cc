#include "kvgate/workers/registry.h"

#include <gtest/gtest.h>

namespace kvgate::workers {
namespace {

TEST(Registry, NormalizesUrls) {
  EXPECT_EQ(*WorkerRegistry::normalize_url("HTTP://LocalHost:8000/"), "http://localhost:8000");
  EXPECT_FALSE(WorkerRegistry::normalize_url("localhost:8000").ok());
  EXPECT_FALSE(WorkerRegistry::normalize_url("http://localhost").ok());
  EXPECT_FALSE(WorkerRegistry::normalize_url("http://localhost:0").ok());
  EXPECT_FALSE(WorkerRegistry::normalize_url("http://localhost:80/v1").ok());
  EXPECT_FALSE(WorkerRegistry::normalize_url("http://localhost:8x").ok());
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
