#include "kvgate/workers/load.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "kvgate/workers/worker.h"

namespace kvgate::workers {
namespace {

TEST(Overload, DefaultThresholds) {
  const OverloadThresholds t;
  EXPECT_FALSE(is_overloaded({.running = 50, .waiting = 7, .kv_usage = 0.79}, t));
  EXPECT_TRUE(is_overloaded({.waiting = 8}, t));
  EXPECT_TRUE(is_overloaded({.kv_usage = 0.8}, t));
}

TEST(Overload, DisabledRules) {
  const OverloadThresholds off{.token_usage = std::nullopt, .waiting_requests = std::nullopt};
  EXPECT_FALSE(is_overloaded({.waiting = 1000, .kv_usage = 1.0}, off));
}

TEST(Overload, TheInFlightRuleCountsTheGatewayFleet) {
  OverloadThresholds t;
  EXPECT_FALSE(is_overloaded({}, t, 1000));  // off by default
  t.in_flight_requests = 4;
  EXPECT_FALSE(is_overloaded({}, t, 3));
  EXPECT_TRUE(is_overloaded({}, t, 4));
}

TEST(Overload, ThePrefillingRuleCountsThisReplicasPromptsWithoutAFirstToken) {
  OverloadThresholds t;
  EXPECT_FALSE(is_overloaded({}, t, 0, 1000));  // off by default
  EXPECT_FALSE(OverloadRule(t).overloaded(0, 0, 0, 1000));
  t.prefilling_requests = 1;
  EXPECT_FALSE(is_overloaded({}, t, 50, 0)) << "requests decoding there do not count";
  EXPECT_TRUE(is_overloaded({}, t, 1, 1));
  EXPECT_FALSE(OverloadRule(t).overloaded(0, 0, 50, 0));
  EXPECT_TRUE(OverloadRule(t).overloaded(0, 0, 1, 1));
}

TEST(Worker, APromptCountsAsPrefillingUntilItsFirstToken) {
  ManualClock clock;
  Worker w(WorkerId(1), "http://127.0.0.1:8000", {}, clock);
  w.begin_request(std::nullopt, 100);
  w.begin_request(std::nullopt, 0);  // a prompt found whole in the cache still waits its turn
  EXPECT_EQ(w.routing_figures().prefilling, 2);
  EXPECT_EQ(w.routing_figures().fleet_queued_prompt_tokens, 100u);
  w.prefilled(100);
  EXPECT_EQ(w.routing_figures().prefilling, 1);
  EXPECT_EQ(w.routing_figures().fleet_queued_prompt_tokens, 0u);
  w.prefilled(0);
  w.end_request();
  w.end_request();
  EXPECT_EQ(w.routing_figures().prefilling, 0);
  EXPECT_EQ(w.routing_figures().fleet_in_flight, 0);
}

TEST(Overload, TheIntegerRuleGivesIsOverloadedsVerdictForEveryUsage) {
  // Every KV usage a worker can report (ppm / 1e6), against thresholds on, between and beside
  // those values, with the other two rules on and off.
  const std::vector<std::optional<double>> usages = {std::nullopt, 0.0, 0.8, 0.1 + 0.2, 1e-7,
                                                     0.9999995,    1.0, 1.5, -0.1,      0.5000005};
  for (const auto& usage : usages) {
    const OverloadThresholds t{.token_usage = usage,
                               .waiting_requests = 3,
                               .in_flight_requests = 2,
                               .prefilling_requests = 2};
    const OverloadRule rule(t);
    for (uint32_t ppm = 0; ppm <= 1'000'000; ++ppm) {
      const EngineLoad load{.waiting = ppm % 5, .kv_usage = ppm / 1e6};
      const int32_t in_flight = static_cast<int32_t>(ppm % 4) - 1;
      const int32_t prefilling = static_cast<int32_t>(ppm % 7) - 4;
      ASSERT_EQ(rule.overloaded(ppm, load.waiting, in_flight, prefilling),
                is_overloaded(load, t, in_flight, prefilling))
          << "usage threshold " << usage.value_or(-1) << ", ppm " << ppm;
    }
  }
  const OverloadThresholds off{.token_usage = std::nullopt, .waiting_requests = std::nullopt};
  EXPECT_FALSE(OverloadRule(off).overloaded(1'000'000, UINT32_MAX, INT32_MAX));
}

TEST(Worker, PeersInFlightAddToTheFleetFigures) {
  ManualClock clock;
  Worker w(WorkerId(1), "http://127.0.0.1:8000", {}, clock);
  w.begin_request(DpRank(2), 500);
  w.begin_request(std::nullopt, 300);
  EXPECT_EQ(w.queued_prompt_tokens(), 800u);
  w.prefilled(300);
  EXPECT_EQ(w.queued_prompt_tokens(), 500u);
  w.set_peer_load(5, {{2, 3}, {1, 2}}, 7000);
  EXPECT_EQ(w.fleet_in_flight(), 7);
  EXPECT_EQ(w.fleet_in_flight(DpRank(2)), 4);
  EXPECT_EQ(w.fleet_in_flight(DpRank(1)), 2);
  EXPECT_EQ(w.fleet_queued_prompt_tokens(), 7500u);
  // A new record replaces the last: ranks it does not name have none.
  w.set_peer_load(1, {{1, 1}}, 0);
  EXPECT_EQ(w.fleet_in_flight(DpRank(2)), 1);
  EXPECT_EQ(w.peer_in_flight(), 1);
  EXPECT_EQ(w.peer_queued_prompt_tokens(), 0u);
}

TEST(Worker, EngineLoadRoundTripsAndInFlightCounts) {
  ManualClock clock;
  Worker w(WorkerId(3), "http://127.0.0.1:8000", {}, clock);
  w.set_engine_load(
      {.running = 4, .waiting = 2, .kv_usage = 0.4567891, .queued_prefill_tokens = 900},
      clock.now());
  const auto l = w.engine_load();
  EXPECT_EQ(l.running, 4u);
  EXPECT_EQ(l.waiting, 2u);
  EXPECT_NEAR(l.kv_usage, 0.4567891, 1e-6);
  EXPECT_EQ(l.queued_prefill_tokens, 900u);
  EXPECT_EQ(w.engine_load_at(), clock.now());
  w.begin_request();
  w.begin_request();
  w.end_request();
  EXPECT_EQ(w.in_flight(), 1);
  EXPECT_FALSE(w.routable());  // not probed yet
  w.health().record(true);
  EXPECT_TRUE(w.routable());
  // What a routing decision reads, in one call, agrees with the figures one by one.
  w.set_index_blocks(DpRank(0), 77);
  w.set_peer_load(2, {}, 50);
  const Worker::RoutingFigures f = w.routing_figures();
  EXPECT_EQ(f.running, 4u);
  EXPECT_EQ(f.waiting, 2u);
  EXPECT_EQ(f.kv_usage_ppm / 1e6, l.kv_usage);
  EXPECT_EQ(f.queued_prefill_tokens, 900u);
  EXPECT_EQ(f.fleet_in_flight, 3);
  EXPECT_EQ(f.fleet_queued_prompt_tokens, w.fleet_queued_prompt_tokens());
  EXPECT_EQ(f.index_blocks, 77u);
  w.set_rank_load(DpRank(1), {.running = 1, .waiting = 5, .kv_usage = 0.25});
  w.begin_request(DpRank(1));
  const Worker::RoutingFigures r = w.routing_figures(DpRank(1));
  EXPECT_EQ(r.waiting, 5u);
  EXPECT_EQ(r.kv_usage_ppm, 250'000u);
  EXPECT_EQ(r.fleet_in_flight, 1);
  EXPECT_EQ(r.fleet_queued_prompt_tokens, 0u) << "kept per worker only";
  // The trackers' states, kept in the worker's first cache line, are what routable() reads.
  w.health().force(Health::kUnhealthy);
  EXPECT_FALSE(w.routable());
  w.health().force(Health::kHealthy);
  EXPECT_TRUE(w.routable());
  for (int i = 0; i < 5; ++i) w.breaker().record(Outcome::kConnectFailed);
  EXPECT_EQ(w.breaker().state(), BreakerState::kOpen);
  EXPECT_FALSE(w.routable());
}

// A probe that passes is contact: it ends an unreachable veto at once. It is also one passing
// probe, and the health checker alone decides when a demoted worker has passed enough of them.
TEST(Worker, OnePassingProbeEndsAStallVetoButDoesNotRepromote) {
  ManualClock clock;
  WorkerOptions options;
  options.health = {.failure_threshold = 3, .success_threshold = 2};
  options.liveness = {.wedge = std::chrono::seconds(3), .stall = std::chrono::seconds(2)};
  Worker w(WorkerId(1), "http://127.0.0.1:8000", options, clock);
  w.health().record(true);
  ASSERT_TRUE(w.routable());
  for (int i = 0; i < 3; ++i) {  // the engine went away: probes and connections fail
    w.health().record(false);
    w.liveness().note_connect_failed();
  }
  clock.advance(std::chrono::seconds(3));
  (void)w.liveness().evaluate();
  ASSERT_EQ(w.liveness().state(), Liveness::kUnreachable);
  ASSERT_TRUE(w.vetoed());
  ASSERT_FALSE(w.routable());

  // The first probe that passes again.
  w.health().record(true);
  w.liveness().note_contact();
  (void)w.liveness().evaluate();
  EXPECT_EQ(w.liveness().state(), Liveness::kLive);
  EXPECT_FALSE(w.vetoed());
  EXPECT_EQ(w.health().state(), Health::kUnhealthy);
  EXPECT_FALSE(w.routable()) << "one passing probe re-promoted a demoted worker";

  w.health().record(true);  // the success threshold's second
  EXPECT_TRUE(w.routable());
}

}  // namespace
}  // namespace kvgate::workers
