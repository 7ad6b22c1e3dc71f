// Drill: an engine frozen by SIGSTOP for 8 s under open-loop streamed traffic. Its port still
// accepts connections (the kernel's backlog), so only the liveness tracker sees it: no request may
// wait more than --worker-wedge-secs + 2 s for a first byte or between two pieces, no request may
// be routed to it while it is vetoed, and it must be routed to again after SIGCONT.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>

#include "drills/harness.h"
#include "support/wait.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;

TEST(Drill, EngineFrozenBySigstop) {
  TwoEngines f;
  ASSERT_TRUE(f.ready());
  MockFleet& a = *f.a;
  GatewayProcess& gw = f.gw;
  Watcher watcher(gw);
  Traffic traffic({.port = gw.port(), .max_tokens = 200});
  traffic.start_open(20);
  sleep_s(4);

  const auto requests_of_a = [&] { return f.requests_of(a.url(0)); };
  const double frozen_at = now_s();
  ASSERT_TRUE(a.process().signal(SIGSTOP));
  const auto vetoed = [](const WorkerView& v) { return v.liveness != "live"; };
  double vetoed_at = -1;
  testing::wait_until(
      [&] {
        const auto t = watcher.first(a.url(0), frozen_at, vetoed);
        if (t) vetoed_at = *t;
        return t.has_value();
      },
      8s, 20ms);
  sleep_s(0.2);
  const uint64_t a_requests_after_veto = requests_of_a();
  sleep_s(std::max(0.0, frozen_at + 8 - now_s() - 0.1));
  const uint64_t a_requests_before_thaw = requests_of_a();
  const auto veto_lasted = watcher.first(a.url(0), vetoed_at, vetoed);  // still vetoed: same
  ASSERT_TRUE(a.process().signal(SIGCONT));
  const double thawed_at = now_s();
  sleep_s(6);
  traffic.stop();

  const auto live_again =
      watcher.first(a.url(0), thawed_at, [](const WorkerView& v) { return v.liveness == "live"; });
  const uint64_t a_requests_at_end = requests_of_a();
  const auto records = traffic.records();
  const TrafficSummary s = summarize(records);
  size_t on_a_while_vetoed = 0;
  for (const auto& r : records) {
    if (vetoed_at > 0 && r.start >= vetoed_at + 0.2 && r.start < thawed_at && r.worker == a.url(0))
      ++on_a_while_vetoed;
  }
  const uint64_t routed_while_vetoed = a_requests_before_thaw - a_requests_after_veto;
  const bool passed = vetoed_at > 0 && veto_lasted && s.failures == 0 &&
                      s.longest_wait <= kWedgeSecs + 2 && routed_while_vetoed == 0 &&
                      on_a_while_vetoed == 0 && live_again &&
                      a_requests_at_end > a_requests_before_thaw;
  char measured[400];
  std::snprintf(measured, sizeof measured,
                "vetoed %.1f s after SIGSTOP; longest wait for a piece %.2f s; %llu requests "
                "routed to it while vetoed; %zu of %zu streams ok, %zu ended with an error event, "
                "%zu failed; live %.1f s after SIGCONT",
                vetoed_at - frozen_at, s.longest_wait,
                static_cast<unsigned long long>(routed_while_vetoed), s.ok, s.total, s.error_events,
                s.failures, live_again ? *live_again - thawed_at : -1.0);
  report("engine frozen 8 s (SIGSTOP)",
         "no wait over wedge + 2 s for a first byte or between pieces; nothing routed to it "
         "while vetoed; routed to again after SIGCONT",
         measured, passed);
  EXPECT_GT(vetoed_at, 0) << "never vetoed";
  EXPECT_LE(vetoed_at - frozen_at, kWedgeSecs + 1);
  EXPECT_EQ(s.failures, 0u) << s.describe();
  EXPECT_LE(s.longest_wait, kWedgeSecs + 2);
  EXPECT_EQ(routed_while_vetoed, 0u);
  EXPECT_EQ(on_a_while_vetoed, 0u);
  EXPECT_TRUE(live_again.has_value());
  EXPECT_GT(a_requests_at_end, a_requests_before_thaw) << "routed to again after SIGCONT";
}

}  // namespace
}  // namespace kvgate::drills
