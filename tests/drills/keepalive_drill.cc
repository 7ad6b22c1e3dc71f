// Drill: engines close idle keep-alive connections. A burst of 512 concurrent streams fills the
// gateway's upstream pool, the fleet idles past the engines' keep-alive timeout, then 64 clients
// send for 8 s. Every request of both bursts must succeed and no worker's breaker may open, with
// engines that close after 5 s (uvicorn's default) and after 60 s.
#include <gtest/gtest.h>

#include "drills/harness.h"

namespace kvgate::drills {
namespace {

void keepalive_drill(int engine_keep_alive_s) {
  MockFleet fleet(
      4, {"--keep-alive-timeout-secs", std::to_string(engine_keep_alive_s), "--speedup", "4"});
  ASSERT_TRUE(fleet.ready());
  GatewayProcess gw(fleet.urls(), {"--log-level", "warn"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(4, 20));
  Watcher watcher(gw);
  Traffic traffic({.port = gw.port(), .max_tokens = 16});

  traffic.start_closed(512);
  sleep_s(3);
  traffic.stop();
  const size_t first_burst = traffic.records().size();
  const double idle = engine_keep_alive_s + 6;
  sleep_s(idle);
  traffic.start_closed(64);
  sleep_s(8);
  traffic.stop();

  const auto records = traffic.records();
  const std::vector<StreamRecord> second(records.begin() + static_cast<long>(first_burst),
                                         records.end());
  const TrafficSummary s1 =
      summarize({records.begin(), records.begin() + static_cast<long>(first_burst)});
  const TrafficSummary s2 = summarize(second);
  bool breaker_opened = false;
  for (const auto& url : fleet.urls()) {
    breaker_opened |= watcher.ever(url, [](const WorkerView& v) { return v.breaker != "closed"; });
  }
  const bool passed =
      s1.total > 0 && s1.ok == s1.total && s2.total > 0 && s2.ok == s2.total && !breaker_opened;
  const std::string name = "engine keep-alive " + std::to_string(engine_keep_alive_s) + " s";
  report(name, "burst, idle past the engines' keep-alive, burst: 100% success, breakers closed",
         "burst " + std::to_string(s1.ok) + "/" + std::to_string(s1.total) + ", idle " +
             std::to_string(static_cast<int>(idle)) + " s, burst " + std::to_string(s2.ok) + "/" +
             std::to_string(s2.total) + ", breaker " + (breaker_opened ? "opened" : "closed"),
         passed);
  EXPECT_EQ(s1.ok, s1.total) << s1.describe();
  EXPECT_EQ(s2.ok, s2.total) << s2.describe();
  EXPECT_GT(s2.total, 64u);
  EXPECT_FALSE(breaker_opened);
}

TEST(Drill, EngineKeepAliveFiveSeconds) { keepalive_drill(5); }
TEST(Drill, EngineKeepAliveSixtySeconds) { keepalive_drill(60); }

}  // namespace
}  // namespace kvgate::drills
