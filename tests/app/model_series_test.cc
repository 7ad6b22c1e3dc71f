#include "app/model_series.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kvgate/metrics/metrics.h"

namespace kvgate::app {
namespace {

class ModelSeriesTest : public ::testing::Test {
 protected:
  ModelSeries make(size_t limit) {
    return ModelSeries(metrics::counter_family(registry_, "kvgate_requests_total", "r"),
                       metrics::counter_family(registry_, "kvgate_completion_tokens_total", "t"),
                       limit);
  }
  static workers::FleetSnapshot fleet_of(std::vector<std::string> models) {
    workers::FleetSnapshot f;
    f.models = std::move(models);  // sorted, as the registry keeps them
    return f;
  }
  bool shown(const std::string& line) {
    return metrics::text_exposition(registry_).find(line) != std::string::npos;
  }
  metrics::Registry registry_;
};

TEST_F(ModelSeriesTest, AServedModelHasItsOwnSeriesAndAnyOtherNameCountsAsOther) {
  ModelSeries s = make(4);
  const auto fleet = fleet_of({"llama-70b", "qwen3-8b"});
  const size_t qwen = s.slot_of("qwen3-8b", &fleet);
  EXPECT_NE(qwen, ModelSeries::kOther);
  EXPECT_EQ(s.slot_of("qwen3-8b", &fleet), qwen);
  EXPECT_EQ(s.slot_of("no-such-model", &fleet), ModelSeries::kOther);
  EXPECT_EQ(s.slot_of("", &fleet), ModelSeries::kOther) << "two models: no default";
  s.request_done(qwen, ApiRoute::kChatCompletions, 0);
  s.completion_tokens(qwen, 7);
  s.request_done(ModelSeries::kOther, ApiRoute::kChatCompletions, 1);
  s.publish();
  EXPECT_TRUE(
      shown(R"(kvgate_requests_total{model="qwen3-8b",route="chat_completions",status="2xx"} 1)"))
      << metrics::text_exposition(registry_);
  EXPECT_TRUE(shown(R"(kvgate_completion_tokens_total{model="qwen3-8b"} 7)"));
  EXPECT_TRUE(
      shown(R"(kvgate_requests_total{model="other",route="chat_completions",status="4xx"} 1)"));
  EXPECT_FALSE(shown("no-such-model")) << "a client's name makes no series";
  EXPECT_FALSE(shown("llama-70b")) << "a model's series appear at its first request";
}

TEST_F(ModelSeriesTest, ARequestWithoutAModelIsTheFleetsOnlyModel) {
  ModelSeries s = make(4);
  const auto fleet = fleet_of({"qwen3-8b"});
  EXPECT_EQ(s.slot_of("", &fleet), s.slot_of("qwen3-8b", &fleet));
  EXPECT_NE(s.slot_of("", &fleet), ModelSeries::kOther);
  EXPECT_EQ(s.slot_of("qwen3-8b", nullptr), ModelSeries::kOther) << "no fleet yet";
}

TEST_F(ModelSeriesTest, ModelsPastTheLimitShareOther) {
  ModelSeries s = make(2);
  const auto fleet = fleet_of({"a", "b", "c"});
  EXPECT_NE(s.slot_of("a", &fleet), ModelSeries::kOther);
  EXPECT_NE(s.slot_of("b", &fleet), ModelSeries::kOther);
  EXPECT_EQ(s.slot_of("c", &fleet), ModelSeries::kOther);
  EXPECT_NE(s.slot_of("a", &fleet), s.slot_of("b", &fleet));
}

// Threads meeting new models at once: each model gets one slot, and every request is counted.
TEST_F(ModelSeriesTest, ThreadsCountingNewModelsAtOnceLoseNothing) {
  ModelSeries s = make(8);
  const auto fleet = fleet_of({"m0", "m1", "m2", "m3", "m4", "m5"});
  constexpr int kThreads = 4, kRequests = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRequests; ++i) {
        const std::string model = "m" + std::to_string((i + t) % 6);
        s.request_done(s.slot_of(model, &fleet), ApiRoute::kCompletions, 0);
        if (i % 100 == 0) s.publish();  // scrapes meanwhile
      }
    });
  }
  for (auto& th : threads) th.join();
  s.publish();
  const std::string text = metrics::text_exposition(registry_);
  double total = 0;
  for (int m = 0; m < 6; ++m) {
    const std::string series =
        "kvgate_requests_total{model=\"m" + std::to_string(m) + "\",route=\"completions\",";
    const size_t at = text.find(series + "status=\"2xx\"} ");
    ASSERT_NE(at, std::string::npos) << text;
    total += std::stod(text.substr(text.find("} ", at) + 2));
    size_t series_count = 0;
    for (size_t p = text.find(series); p != std::string::npos; p = text.find(series, p + 1)) {
      ++series_count;
    }
    EXPECT_EQ(series_count, 3u) << "one series per model and status class";
  }
  EXPECT_EQ(total, kThreads * kRequests);
}

}  // namespace
}  // namespace kvgate::app
