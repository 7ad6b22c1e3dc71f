// Drills: one worker's network path drops everything (a relay on 127.0.0.2 that stops moving
// bytes and accepting connections, for its HTTP port and its KV-event ports alike), then heals.
// Nothing is refused, so only the absence of progress can tell the gateway: it must take the
// worker out of routing within 4.5 s and route to it again after the heal, for a short
// partition and for one longer than any keepalive.
#include <gtest/gtest.h>

#include <cstdio>

#include "drills/harness.h"
#include "support/wait.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;

void partition_drill(double heal_after_exclusion_s, double cut_for_s, const std::string& name) {
  MockFleet a(1, {"--advertise-host", "127.0.0.2"});
  MockFleet b(1, {});
  ASSERT_TRUE(a.ready() && b.ready());
  Partition link(a.ports_of(0));
  ASSERT_TRUE(link.ready());
  GatewayProcess gw({a.url(0), b.url(0)}, {"--log-level", "warn"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(2, 20));
  const std::string url = a.url(0);
  Watcher watcher(gw);
  Traffic traffic({.port = gw.port(), .max_tokens = 200});
  traffic.start_open(20);
  sleep_s(4);
  const double cut_at = now_s();
  link.cut();
  std::optional<double> out;
  testing::wait_until(
      [&] {
        out = watcher.first(url, cut_at, out_of_routing);
        return out.has_value();
      },
      10s, 50ms);
  const double heal_at =
      std::max(cut_at + cut_for_s, out.value_or(now_s()) + heal_after_exclusion_s);
  sleep_s(std::max(0.0, heal_at - now_s()));
  const uint64_t before_heal = gw.worker(url).value_or(WorkerView{}).requests;
  link.heal();
  const double healed_at = now_s();
  std::optional<double> back;
  testing::wait_until(
      [&] {
        back = watcher.first(url, healed_at, in_routing);
        return back.has_value();
      },
      15s, 50ms);
  sleep_s(3);
  traffic.stop(60);
  const size_t hung = traffic.in_flight();
  const bool routed_again = gw.worker(url).value_or(WorkerView{}).requests > before_heal;
  const TrafficSummary s = summarize(traffic.records());
  const bool passed =
      out && *out - cut_at <= 4.5 && back && routed_again && hung == 0 && s.failures == 0;
  report(name, "out <= 4.5 s, back after the heal",
         "out " + seconds_after(out, cut_at) + " after the cut; healed " +
             seconds_after(healed_at, cut_at) + " after it; back " +
             seconds_after(back, healed_at) + " after the heal" +
             (routed_again ? "" : " but never routed to") + "; " + std::to_string(hung) +
             " hung; " + s.describe(),
         passed);
  ASSERT_TRUE(out.has_value()) << "never out of routing";
  EXPECT_LE(*out - cut_at, 4.5);
  EXPECT_TRUE(back.has_value()) << "never back after the heal";
  EXPECT_TRUE(routed_again);
  EXPECT_EQ(hung, 0u);
  EXPECT_EQ(s.failures, 0u) << s.describe();
}

TEST(Drill, WorkerPartitionedThenHealed) {
  partition_drill(3, 0, "worker partitioned, healed 3 s after exclusion");
}

TEST(Drill, WorkerPartitionedPastEveryKeepalive) {
  partition_drill(0, 45, "worker partitioned 45 s");
}

}  // namespace
}  // namespace kvgate::drills
