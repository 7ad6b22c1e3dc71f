// Drills on the KV-event relay (`kvgate relay` between the engines and a gateway started with
// --kv-events-relay): the gateway restarted after the relay's history rolled past its start, the
// link to the relay cut for longer than its silence timeout, cut for longer than its history,
// batches lost between an engine and the relay, and an engine's publisher slow or restarted
// behind it. Each ends with the gateway's index compared block for block with the engines.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "drills/harness.h"

namespace kvgate::drills {
namespace {

std::vector<std::string> via_relay(const std::string& host, uint16_t port) {
  return {"--log-level", "warn", "--kv-events-relay",
          "grpc://" + host + ":" + std::to_string(port)};
}

// The gateway's follower totals over every (worker, rank).
struct FollowTotals {
  double batches = 0, snapshots = 0, streams = 0, resumes = 0, restarts = 0;
  explicit FollowTotals(const GatewayProcess& gw) {
    const std::string text = gw.metrics();
    batches = metric_sum(text, "kvgate_relay_follow_batches_total").value_or(0);
    snapshots = metric_sum(text, "kvgate_relay_follow_snapshots_total").value_or(0);
    streams = metric_sum(text, "kvgate_relay_follow_streams_total").value_or(0);
    resumes = metric_sum(text, "kvgate_relay_follow_resumes_total").value_or(0);
    restarts = metric_sum(text, "kvgate_relay_follow_restarts_total").value_or(0);
  }
};

// Every worker's index within `fraction` of what its engine holds (and the engine holds some).
bool within(const std::vector<IndexVsEngine>& v, double fraction) {
  return std::all_of(v.begin(), v.end(), [fraction](const IndexVsEngine& w) {
    const double diff = std::abs(static_cast<double>(w.index) - static_cast<double>(w.engine));
    return w.answered && w.engine > 0 && diff <= fraction * static_cast<double>(w.engine);
  });
}

// Polls every `every_s` until every worker's index is within 1% of its engine: when (nullopt: not
// by `deadline`); `last` gets the last comparison.
std::optional<double> first_within_1pct(const GatewayProcess& gw, const MockFleet& fleet,
                                        double deadline, double every_s,
                                        std::vector<IndexVsEngine>* last) {
  while (now_s() < deadline) {
    *last = index_vs_engines(gw, fleet);
    if (within(*last, 0.01)) return now_s();
    sleep_s(every_s);
  }
  return std::nullopt;
}

// A relay whose history (50 batches per rank) rolls past a new subscriber's start within a
// second of load: the restarted gateway can only be brought up to date by snapshots.
TEST(Drill, GatewayRestartedBehindTheRelay) {
  MockFleet fleet(4, {});
  ASSERT_TRUE(fleet.ready());
  RelayProcess relay(fleet.urls(), {"--relay-history-batches", "50"});
  ASSERT_TRUE(relay.ready());
  const std::vector<std::string> args = via_relay("127.0.0.1", relay.port());
  auto gw = std::make_unique<GatewayProcess>(fleet.urls(), args);
  ASSERT_TRUE(gw->ready());
  ASSERT_TRUE(gw->wait_routable(4, 20));
  const uint16_t port = gw->port();
  Traffic traffic({.port = port, .max_tokens = 16});
  traffic.start_closed(16);
  sleep_s(6);
  ASSERT_TRUE(gw->process().signal(SIGKILL));
  (void)gw->process().wait(std::chrono::milliseconds(2000));
  const double relayed =
      relay.metric_sum("kvgate_relay_engine_batches_total", R"(disposition="applied")").value_or(0);
  gw = std::make_unique<GatewayProcess>(fleet.urls(), args, port);
  ASSERT_TRUE(gw->ready());
  const double listening_at = now_s();
  std::vector<IndexVsEngine> v;
  const std::optional<double> close_at = first_within_1pct(*gw, fleet, listening_at + 5, 0.05, &v);
  const std::string at_close = describe(v);
  sleep_s(3);
  traffic.stop(30);
  std::vector<IndexVsEngine> end;
  const bool exact = wait_index_exact(*gw, fleet, 5, &end);
  std::string relay_holds = "relay holds";
  for (size_t i = 0; i < fleet.size(); ++i) {
    const double n =
        relay.metric_sum("kvgate_relay_rank_blocks", "\"" + fleet.url(i) + "\"").value_or(-1);
    relay_holds += (i == 0 ? " " : ", ") + std::to_string(static_cast<long>(n));
  }
  const FollowTotals follow(*gw);
  const TrafficSummary s = summarize(traffic.records());
  char measured[400];
  std::snprintf(measured, sizeof measured,
                "%.0f batches relayed before the restart (history 50 per rank); every worker "
                "within 1%% %s after listening (%s); %.0f snapshots; after the load %s %s (%s)",
                relayed, seconds_after(close_at, listening_at).c_str(), at_close.c_str(),
                follow.snapshots, exact ? "equal," : "NOT equal,", describe(end).c_str(),
                relay_holds.c_str());
  const bool passed = relayed > 4 * 50 && close_at && *close_at - listening_at <= 2.5 && exact &&
                      follow.snapshots >= 4;
  report("gateway restarted behind the relay, history rolled past its start",
         "every worker's index within 1% of its engine <= 2.5 s after start, equal once load "
         "stops",
         measured, passed);
  EXPECT_GT(relayed, 4 * 50) << "the history did not roll past the restarted gateway's start";
  ASSERT_TRUE(close_at.has_value()) << measured;
  EXPECT_LE(*close_at - listening_at, 2.5);
  EXPECT_TRUE(exact) << measured;
  EXPECT_GE(follow.snapshots, 4);
  EXPECT_GT(s.ok, 0u);
}

// The gateway reaches the relay through a partition it can cut (127.0.0.2 -> 127.0.0.1).
struct PartitionedRelay {
  MockFleet fleet;
  RelayProcess relay;
  Partition link;
  GatewayProcess gw;
  PartitionedRelay(int workers, std::vector<std::string> relay_args)
      : fleet(workers, {}),
        relay(fleet.urls(), std::move(relay_args)),
        link({relay.port()}),
        gw(fleet.urls(), via_relay("127.0.0.2", relay.port())) {}
  bool ready() const {
    return fleet.ready() && relay.ready() && link.ready() && gw.ready() &&
           gw.wait_routable(fleet.size(), 20);
  }
};

// Cut for 15 s, past the follower's 3 s silence timeout: its streams are taken for dead and
// reopened until the link heals; the relay's history (10,000 batches) still holds everything
// since, so each resumes where it was.
TEST(Drill, RelayLinkCutFifteenSeconds) {
  PartitionedRelay f(2, {});
  ASSERT_TRUE(f.ready());
  Traffic traffic({.port = f.gw.port(), .max_tokens = 16});
  traffic.start_open(20);
  sleep_s(3);
  const FollowTotals before(f.gw);
  f.link.cut();
  const double cut_at = now_s();
  sleep_s(15);
  f.link.heal();
  const double healed_at = now_s();
  std::vector<IndexVsEngine> v;
  // Caught up while the load goes on: within 1% (blocks in flight), then equal once it stops.
  const std::optional<double> caught_up = first_within_1pct(f.gw, f.fleet, healed_at + 10, 0.1, &v);
  traffic.stop(30);
  const bool exact = wait_index_exact(f.gw, f.fleet, 5, &v);
  const FollowTotals after(f.gw);
  const double resumes = after.resumes - before.resumes;
  const double snapshots = after.snapshots - before.snapshots;
  const double restarts = after.restarts - before.restarts;
  char measured[300];
  std::snprintf(measured, sizeof measured,
                "cut %.1f s; caught up %s after the heal; %.0f resumes, %.0f snapshots, %.0f "
                "restarts; %s, %s",
                healed_at - cut_at, seconds_after(caught_up, healed_at).c_str(), resumes, snapshots,
                restarts, exact ? "equal" : "NOT equal", describe(v).c_str());
  const bool passed = caught_up && exact && resumes >= 2 && snapshots == 0 && restarts == 0;
  report("link to the relay cut 15 s",
         "the streams resume and catch up, index exact after the heal, no resync", measured,
         passed);
  EXPECT_TRUE(caught_up.has_value()) << measured;
  EXPECT_TRUE(exact) << measured;
  EXPECT_GE(resumes, 2) << "each worker's stream resumed";
  EXPECT_EQ(snapshots, 0) << measured;
  EXPECT_EQ(restarts, 0) << measured;
}

// Cut for longer than the relay's history (20 batches per rank) lasts under the load: the
// follower's resume point is gone, the relay answers with a snapshot, and nothing stays lost.
TEST(Drill, GapBeyondTheRelayWindow) {
  PartitionedRelay f(2, {"--relay-history-batches", "20"});
  ASSERT_TRUE(f.ready());
  Traffic traffic({.port = f.gw.port(), .max_tokens = 16});
  traffic.start_open(20);
  sleep_s(3);
  const FollowTotals before(f.gw);
  const double relayed0 =
      f.relay.metric_sum("kvgate_relay_engine_batches_total", R"(disposition="applied")")
          .value_or(0);
  f.link.cut();
  sleep_s(8);
  const double during_cut =
      f.relay.metric_sum("kvgate_relay_engine_batches_total", R"(disposition="applied")")
          .value_or(0) -
      relayed0;
  f.link.heal();
  sleep_s(5);
  traffic.stop(30);
  std::vector<IndexVsEngine> v;
  const bool exact = wait_index_exact(f.gw, f.fleet, 10, &v);
  const FollowTotals after(f.gw);
  const double snapshots = after.snapshots - before.snapshots;
  const double degraded = f.relay.metric_sum("kvgate_relay_rank_degraded").value_or(-1);
  const double resyncs = f.relay.metric_sum("kvgate_relay_engine_resyncs_total").value_or(-1);
  char measured[300];
  std::snprintf(measured, sizeof measured,
                "%.0f batches relayed during the cut (history 20 per rank); %.0f snapshots; "
                "%s, %s; %.0f degraded ranks, %.0f resyncs at the relay",
                during_cut, snapshots, exact ? "equal" : "NOT equal", describe(v).c_str(), degraded,
                resyncs);
  const bool passed =
      during_cut > 2 * 20 && snapshots >= 1 && exact && degraded == 0 && resyncs == 0;
  report("gap beyond the relay's window", "snapshot resync, nothing unrecovered, no degraded rank",
         measured, passed);
  EXPECT_GT(during_cut, 2 * 20) << "the cut did not outlast the history";
  EXPECT_GE(snapshots, 1);
  EXPECT_TRUE(exact) << measured;
  EXPECT_EQ(degraded, 0);
  EXPECT_EQ(resyncs, 0);
}

// The engine's publisher skips 20 batches: the relay's cursor sees the gap and refills it from the
// engine's replay socket before relaying on, so the gateway's stream never breaks.
TEST(Drill, TwentyBatchesDroppedBeforeTheRelay) {
  MockFleet fleet(1, {});
  ASSERT_TRUE(fleet.ready());
  RelayProcess relay(fleet.urls(), {});
  ASSERT_TRUE(relay.ready());
  GatewayProcess gw(fleet.urls(), via_relay("127.0.0.1", relay.port()));
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(1, 20));
  Traffic traffic({.port = gw.port(), .max_tokens = 16});
  traffic.start_open(20);
  sleep_s(2);
  const FollowTotals before(gw);
  const double gaps0 = relay.metric_sum("kvgate_relay_engine_gaps_total").value_or(0);
  const double replayed0 =
      relay.metric_sum("kvgate_relay_engine_batches_total", R"(disposition="replayed")")
          .value_or(0);
  ASSERT_TRUE(fleet.post(0, "/admin/fault/drop_batches", R"({"count":20})"));
  sleep_s(5);
  traffic.stop(30);
  std::vector<IndexVsEngine> v;
  const bool exact = wait_index_exact(gw, fleet, 5, &v);
  const FollowTotals after(gw);
  const double gaps = relay.metric_sum("kvgate_relay_engine_gaps_total").value_or(0) - gaps0;
  const double replayed =
      relay.metric_sum("kvgate_relay_engine_batches_total", R"(disposition="replayed")")
          .value_or(0) -
      replayed0;
  const double broken = (after.streams - before.streams) + (after.snapshots - before.snapshots) +
                        (after.restarts - before.restarts);
  const TrafficSummary s = summarize(traffic.records());
  char measured[300];
  std::snprintf(measured, sizeof measured,
                "relay: %.0f gap(s), %.0f batches replayed; gateway: %.0f batches applied, %.0f "
                "new streams, snapshots or restarts; %s, %s; %s",
                gaps, replayed, after.batches - before.batches, broken,
                exact ? "equal" : "NOT equal", describe(v).c_str(), s.describe().c_str());
  const bool passed = gaps >= 1 && replayed >= 20 && broken == 0 && exact && s.failures == 0;
  report("20 batches dropped between engine and relay",
         "refilled inside the relay; the gateway's stream sees no gap, no resync", measured,
         passed);
  EXPECT_GE(gaps, 1);
  EXPECT_GE(replayed, 20);
  EXPECT_EQ(broken, 0) << measured;
  EXPECT_TRUE(exact) << measured;
  EXPECT_EQ(s.failures, 0u) << s.describe();
}

// Engine a's publisher is slow (1.5 s), then restarts with its cache kept: the gateway's apply lag
// through the relay shows the delay, the restart reaches it as a new epoch (its holder for a
// starts over, emptied: what survived the restart is unknown), and the warm-up rule routes to a
// again. b, untouched but for the delay, ends exact.
TEST(Drill, PublisherDelayedAndRestartedBehindTheRelay) {
  MockFleet a(1, {}), b(1, {});
  ASSERT_TRUE(a.ready() && b.ready());
  RelayProcess relay({a.url(0), b.url(0)}, {});
  ASSERT_TRUE(relay.ready());
  GatewayProcess gw({a.url(0), b.url(0)}, via_relay("127.0.0.1", relay.port()));
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(2, 20));
  ASSERT_TRUE(a.post(0, "/admin/fault/delay_publisher", R"({"delay_ms":1500})"));
  ASSERT_TRUE(b.post(0, "/admin/fault/delay_publisher", R"({"delay_ms":1500})"));
  const double sum0 = gw.metric_sum("kvgate_relay_follow_apply_lag_seconds_sum").value_or(0);
  const double count0 = gw.metric_sum("kvgate_relay_follow_apply_lag_seconds_count").value_or(0);
  {
    Traffic traffic({.port = gw.port(), .max_tokens = 16});
    traffic.start_open(10);
    sleep_s(6);
    traffic.stop(30);
  }
  sleep_s(2);  // the last delayed batches arrive
  const double n =
      gw.metric_sum("kvgate_relay_follow_apply_lag_seconds_count").value_or(0) - count0;
  const double lag =
      n > 0 ? (gw.metric_sum("kvgate_relay_follow_apply_lag_seconds_sum").value_or(0) - sum0) / n
            : 0;
  ASSERT_TRUE(a.post(0, "/admin/fault/delay_publisher", R"({"delay_ms":0})"));
  ASSERT_TRUE(b.post(0, "/admin/fault/delay_publisher", R"({"delay_ms":0})"));

  const FollowTotals before(gw);
  const double restarts0 =
      relay.metric_sum("kvgate_relay_engine_publisher_restarts_total").value_or(0);
  ASSERT_TRUE(a.post(0, "/admin/fault/restart_publisher", R"({"clear_cache":false})"));
  // The new publisher's first batches tell the relay: requests sent to the engine directly.
  std::string words;
  for (int w = 0; w < 80; ++w) words += " unheard" + std::to_string(w);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(a.post(0, "/v1/completions",
                       R"({"model":"mock-8b","max_tokens":2,"prompt":"prompt )" +
                           std::to_string(i) + words + "\"}"));
    sleep_s(0.1);
  }
  sleep_s(1);
  const FollowTotals after(gw);
  const double restarts =
      relay.metric_sum("kvgate_relay_engine_publisher_restarts_total").value_or(0) - restarts0;
  const double resyncs = (after.snapshots - before.snapshots) + (after.restarts - before.restarts);
  const auto requests_of = [&gw](const std::string& url) {
    auto w = gw.worker(url);
    return w ? w->requests : 0;
  };
  const uint64_t a0 = requests_of(a.url(0));
  {
    Traffic trickle({.port = gw.port(), .max_tokens = 8, .prompt_words = 60});
    trickle.start_open(4);
    sleep_s(8);
    trickle.stop(30);
  }
  const uint64_t routed = requests_of(a.url(0)) - a0;
  std::vector<IndexVsEngine> vb;
  const bool exact = wait_index_exact(gw, b, 5, &vb);
  const std::vector<IndexVsEngine> va = index_vs_engines(gw, a);
  char measured[400];
  std::snprintf(measured, sizeof measured,
                "mean apply lag %.2f s over %.0f batches; relay saw %.0f publisher restart(s), "
                "the gateway resynced a %.0f time(s); a routed to %llu times in 8 s after; a %s, "
                "b %s (%s)",
                lag, n, restarts, resyncs, static_cast<unsigned long long>(routed),
                describe(va).c_str(), describe(vb).c_str(), exact ? "equal" : "NOT equal");
  const bool passed = n > 0 && lag >= 0.75 && restarts >= 1 && resyncs >= 1 && routed > 0 && exact;
  report("publisher delayed 1.5 s, then restarted, behind the relay",
         "lag seen (mean >= 0.75 s); restart counted and resynced; worker routed to again",
         measured, passed);
  EXPECT_GT(n, 0);
  EXPECT_GE(lag, 0.75);
  EXPECT_GE(restarts, 1);
  EXPECT_GE(resyncs, 1);
  EXPECT_GT(routed, 0u);
  EXPECT_TRUE(exact) << measured;
}

}  // namespace
}  // namespace kvgate::drills
