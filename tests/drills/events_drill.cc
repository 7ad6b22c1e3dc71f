// Drills: an engine's KV-event stream misbehaves (batches lost on the wire, a slow publisher, a
// publisher restarted while the engine keeps its cache) under streamed traffic. The gateway's
// index must end where the engine is, and its metrics must say what happened.
#include <gtest/gtest.h>

#include <cstdio>

#include "drills/harness.h"

namespace kvgate::drills {
namespace {

struct OneEngine {
  MockFleet fleet{1, {}};
  GatewayProcess gw{fleet.urls(), {"--log-level", "warn"}};
  bool ready() const { return fleet.ready() && gw.ready() && gw.wait_routable(1, 20); }
  // Waits until the gateway's index holds exactly what the engine holds (true), up to `timeout_s`.
  bool index_matches_engine(double timeout_s, uint64_t* index, size_t* engine) const {
    std::vector<IndexVsEngine> v;
    const bool exact = wait_index_exact(gw, fleet, timeout_s, &v);
    *index = v.at(0).index;
    *engine = v.at(0).engine;
    return exact;
  }
};

TEST(Drill, TwentyBatchesDroppedOnTheWire) {
  OneEngine f;
  ASSERT_TRUE(f.ready());
  Traffic traffic({.port = f.gw.port(), .max_tokens = 16});
  traffic.start_open(20);
  sleep_s(2);
  const double gaps0 = f.gw.metric_sum("kvgate_events_gaps_total").value_or(0);
  const double replayed0 =
      f.gw.metric_sum("kvgate_events_batches_total", R"(disposition="replayed")").value_or(0);
  ASSERT_TRUE(f.fleet.post(0, "/admin/fault/drop_batches", R"({"count":20})"));
  sleep_s(5);
  traffic.stop(30);
  uint64_t index = 0;
  size_t engine = 0;
  const bool exact = f.index_matches_engine(5, &index, &engine);
  const double gaps = f.gw.metric_sum("kvgate_events_gaps_total").value_or(0) - gaps0;
  const double replayed =
      f.gw.metric_sum("kvgate_events_batches_total", R"(disposition="replayed")").value_or(0) -
      replayed0;
  const TrafficSummary s = summarize(traffic.records());
  char measured[200];
  std::snprintf(measured, sizeof measured,
                "%.0f gap(s) detected, %.0f batches replayed; index %llu blocks, engine %zu; %s",
                gaps, replayed, static_cast<unsigned long long>(index), engine,
                s.describe().c_str());
  const bool passed = gaps >= 1 && replayed >= 20 && exact && s.failures == 0;
  report("20 batches dropped on the wire", "gap detected and all 20 replayed", measured, passed);
  EXPECT_GE(gaps, 1);
  EXPECT_GE(replayed, 20);
  EXPECT_TRUE(exact) << measured;
  EXPECT_EQ(s.failures, 0u) << s.describe();
}

TEST(Drill, PublisherDelayed) {
  OneEngine f;
  ASSERT_TRUE(f.ready());
  ASSERT_TRUE(f.fleet.post(0, "/admin/fault/delay_publisher", R"({"delay_ms":1500})"));
  const double sum0 = f.gw.metric_sum("kvgate_events_apply_lag_seconds_sum").value_or(0);
  const double count0 = f.gw.metric_sum("kvgate_events_apply_lag_seconds_count").value_or(0);
  Traffic traffic({.port = f.gw.port(), .max_tokens = 16});
  traffic.start_open(10);
  sleep_s(6);
  traffic.stop(30);
  sleep_s(2);  // the last delayed batches arrive
  const double n = f.gw.metric_sum("kvgate_events_apply_lag_seconds_count").value_or(0) - count0;
  const double mean =
      n > 0 ? (f.gw.metric_sum("kvgate_events_apply_lag_seconds_sum").value_or(0) - sum0) / n : 0;
  char measured[120];
  std::snprintf(measured, sizeof measured,
                "mean apply lag %.2f s over %.0f batches (kvgate_events_apply_lag_seconds)", mean,
                n);
  const bool passed = n > 0 && mean >= 0.75;
  report("publisher delayed 1.5 s", "mean apply lag >= 0.75 s reported by the gateway's metric",
         measured, passed);
  EXPECT_GT(n, 0);
  EXPECT_GE(mean, 0.75);
}

// The publisher restarts (sequence numbers from zero, replay buffer empty) while the engine keeps
// its cache. The gateway cannot know what survived, so it starts the worker over as empty: the
// warm-up rule must route to it again, first while every prompt is a hit on its peer, then in a
// trickle of new ones, until its index is back within the thinness ratio.
TEST(Drill, PublisherRestartedCacheKept) {
  TwoEngines f;
  ASSERT_TRUE(f.ready());
  MockFleet& a = *f.a;
  MockFleet& b = f.b;
  GatewayProcess& gw = f.gw;
  const auto requests_of = [&](const std::string& url) { return f.requests_of(url); };
  const auto blocks_of = [&](const std::string& url) { return f.index_blocks_of(url); };
  TrafficOptions prompts{.port = gw.port(), .max_tokens = 8, .prompt_words = 200};
  {
    Traffic fill(prompts);
    fill.start_closed(16);
    sleep_s(5);
    fill.stop(30);
  }
  const double restarts0 = gw.metric_sum("kvgate_events_publisher_restarts_total").value_or(0);
  const uint64_t held_before = blocks_of(a.url(0));
  ASSERT_TRUE(a.post(0, "/admin/fault/restart_publisher", R"({"clear_cache":false})"));
  // The new publisher's first batches (sequence 0 on) are what tell the gateway: requests sent to
  // the engine directly make them (the first may go out before the gateway's subscriber has
  // reconnected to the new socket; the replay then brings it).
  std::string words;
  for (int w = 0; w < 80; ++w) words += " unheard" + std::to_string(w);
  uint64_t emptied_to = held_before;
  for (int i = 0; i < 50 && emptied_to * 10 > held_before; ++i) {
    ASSERT_TRUE(a.post(0, "/v1/completions",
                       R"({"model":"mock-8b","max_tokens":2,"prompt":"prompt )" +
                           std::to_string(i) + words + "\"}"));
    sleep_s(0.1);
    emptied_to = blocks_of(a.url(0));
  }
  // Hits only: the same 16 clients' prompts, every one of which the fleet already holds.
  const uint64_t a0 = requests_of(a.url(0));
  {
    Traffic hits(prompts);
    hits.start_closed(16);
    sleep_s(6);
    hits.stop(30);
  }
  const uint64_t a_hits = requests_of(a.url(0)) - a0;
  // A trickle of new prompts.
  const uint64_t a1 = requests_of(a.url(0));
  TrafficOptions fresh = prompts;
  fresh.prompt_words = 60;
  const auto refilled = [&] {
    const double a_blocks = static_cast<double>(blocks_of(a.url(0)));
    const double mean = (a_blocks + static_cast<double>(blocks_of(b.url(0)))) / 2;
    return mean > 0 ? a_blocks / mean : 0;
  };
  {
    Traffic trickle(fresh);
    trickle.start_open(4);
    sleep_s(8);
    // On a loaded machine the trickle takes longer to bring it back: the trickle goes on until it
    // has (bounded), rather than judging the refill at a fixed time.
    kvgate::testing::wait_until([&] { return refilled() >= 0.5; }, std::chrono::seconds(30),
                                std::chrono::milliseconds(250));
    trickle.stop(30);
  }
  const uint64_t a_trickle = requests_of(a.url(0)) - a1;
  const double restarts =
      gw.metric_sum("kvgate_events_publisher_restarts_total").value_or(0) - restarts0;
  const double ratio = refilled();
  char measured[240];
  std::snprintf(measured, sizeof measured,
                "%.0f publisher restart(s) seen; index emptied from %llu to %llu blocks; routed to "
                "it %llu times in the hits-only phase, %llu in the trickle; refilled to %.2f of "
                "the fleet's mean",
                restarts, static_cast<unsigned long long>(held_before),
                static_cast<unsigned long long>(emptied_to),
                static_cast<unsigned long long>(a_hits), static_cast<unsigned long long>(a_trickle),
                ratio);
  const bool passed = restarts >= 1 && emptied_to * 10 <= held_before && a_hits > 0 &&
                      a_trickle > 0 && ratio >= 0.5;
  report("publisher restarted, cache kept",
         "resync counted; the emptied worker routed to again in both phases; refilled to the "
         "thinness ratio",
         measured, passed);
  EXPECT_GE(restarts, 1);
  EXPECT_LE(emptied_to * 10, held_before) << "the index still holds what the old publisher said";
  EXPECT_GT(a_hits, 0u);
  EXPECT_GT(a_trickle, 0u);
  EXPECT_GE(ratio, 0.5);
}

}  // namespace
}  // namespace kvgate::drills
