// Drills on the gateway itself: killed and started again under load (it must serve within
// seconds, with its index rebuilt from the engines' replay rather than learned anew), and 512
// concurrent streams (nothing hangs, memory stays flat, the operator's routes keep answering).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "drills/harness.h"
#include "support/wait.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;

// The p99 of the whole-stream latency of the successful requests that started in [from, to).
double p99_latency(const std::vector<StreamRecord>& records, double from, double to) {
  std::vector<double> v;
  for (const auto& r : records) {
    if (r.start >= from && r.start < to && r.ok()) v.push_back(r.end - r.start);
  }
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(v.size())))];
}

uint64_t index_blocks(const GatewayProcess& gw) {
  uint64_t n = 0;
  for (const auto& w : gw.workers()) n += w.index_blocks;
  return n;
}

TEST(Drill, GatewayRestartedUnderLoad) {
  MockFleet fleet(4, {});
  ASSERT_TRUE(fleet.ready());
  const std::vector<std::string> args = {"--log-level", "warn"};
  auto gw = std::make_unique<GatewayProcess>(fleet.urls(), args);
  ASSERT_TRUE(gw->ready());
  ASSERT_TRUE(gw->wait_routable(4, 20));
  const uint16_t port = gw->port();
  Traffic traffic({.port = port, .max_tokens = 32});
  traffic.start_closed(16);
  const double steady_from = now_s();
  sleep_s(6);
  const uint64_t blocks_before = index_blocks(*gw);
  const double killed_at = now_s();
  ASSERT_TRUE(gw->process().signal(SIGKILL));
  (void)gw->process().wait(std::chrono::milliseconds(2000));
  gw = std::make_unique<GatewayProcess>(fleet.urls(), args, port);
  ASSERT_TRUE(gw->ready());
  const double listening_at = now_s();
  // What the index holds before the restarted gateway has routed much: the engines' replay.
  testing::wait_until([&] { return index_blocks(*gw) >= blocks_before; }, 5s, 50ms);
  const uint64_t blocks_rebuilt = index_blocks(*gw);
  const double rebuilt_at = now_s();
  sleep_s(std::max(0.0, killed_at + 12 - now_s()));
  traffic.stop(30);
  const auto records = traffic.records();
  std::optional<double> serving;
  for (const auto& r : records) {
    if (r.start >= killed_at && r.ok() && (!serving || r.end < *serving)) serving = r.end;
  }
  const double steady_p99 = p99_latency(records, steady_from + 2, killed_at);
  const double after_p99 = serving ? p99_latency(records, *serving, killed_at + 12) : 0;
  const double replays = gw->metric_sum("kvgate_events_replays_total").value_or(0);
  char measured[300];
  std::snprintf(measured, sizeof measured,
                "serving %s after SIGKILL (listening after %.1f s); p99 %.2f s steady, %.2f s "
                "after; index %llu of %llu blocks %.1f s after listening, %.0f replays",
                seconds_after(serving, killed_at).c_str(), listening_at - killed_at, steady_p99,
                after_p99, static_cast<unsigned long long>(blocks_rebuilt),
                static_cast<unsigned long long>(blocks_before), rebuilt_at - listening_at, replays);
  const bool passed = serving && *serving - killed_at <= 10 && after_p99 <= 2 * steady_p99 + 0.5 &&
                      blocks_rebuilt >= blocks_before && replays >= 4;
  report("gateway restarted under load",
         "serving <= 10 s; p99 <= 2x steady + 0.5 s; index rebuilt from the engines' replay",
         measured, passed);
  ASSERT_TRUE(serving.has_value());
  EXPECT_LE(*serving - killed_at, 10);
  EXPECT_LE(after_p99, 2 * steady_p99 + 0.5);
  EXPECT_GE(blocks_rebuilt, blocks_before);
  EXPECT_GE(replays, 4);
}

TEST(Drill, Overload512ConcurrentStreams) {
  MockFleet fleet(4, {});
  ASSERT_TRUE(fleet.ready());
  GatewayProcess gw(fleet.urls(), {"--log-level", "warn"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(4, 20));
  {  // warm: the gateway's pools and arenas at their working size before the baseline
    Traffic warm({.port = gw.port(), .max_tokens = 16});
    warm.start_closed(16);
    sleep_s(2);
    warm.stop(30);
  }
  const uint64_t rss0 = gw.process().rss_bytes();
  EndpointProbe probe(gw.port(), {"/health", "/metrics"});
  Traffic traffic({.port = gw.port(), .max_tokens = 64});
  traffic.start_closed(512);
  sleep_s(8);
  traffic.stop(60);
  const size_t hung = traffic.in_flight();
  probe.finish();
  const uint64_t peak = gw.process().peak_rss_bytes();
  const double grew_mb = (static_cast<double>(peak) - static_cast<double>(rss0)) / (1 << 20);
  const TrafficSummary s = summarize(traffic.records());
  char measured[300];
  std::snprintf(measured, sizeof measured,
                "%zu hung; peak RSS +%.0f MB; /health and /metrics: %d probes, %d failed, slowest "
                "%.0f ms; %s",
                hung, grew_mb, probe.probes(), probe.failures(), probe.slowest() * 1000,
                s.describe().c_str());
  const bool passed = hung == 0 && grew_mb < 100 && probe.failures() == 0 && s.total > 512;
  report("overload, 512 concurrent streams",
         "no hung stream; RSS growth < 100 MB; /health and /metrics answer throughout", measured,
         passed);
  EXPECT_EQ(hung, 0u);
  EXPECT_LT(grew_mb, 100);
  EXPECT_EQ(probe.failures(), 0);
  EXPECT_GT(s.total, 512u);
}

}  // namespace
}  // namespace kvgate::drills
