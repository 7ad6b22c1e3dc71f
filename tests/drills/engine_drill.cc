// Drills: one engine of two fails in the ways engines fail (killed, listener closed, paused with
// its health route still answering, restarted with an empty cache, starved of CPU) under
// open-loop streamed traffic. Each worker is its own kvgate-mock process so a signal hits one.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>

#include "drills/harness.h"
#include "support/wait.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;

// Streams on a worker that dies end with an error event, never as a hung or cut connection.
TEST(Drill, EngineKilled) {
  TwoEngines f;
  ASSERT_TRUE(f.ready());
  const std::string url = f.a->url(0);
  Watcher watcher(f.gw);
  Traffic traffic({.port = f.gw.port(), .max_tokens = 200});
  traffic.start_open(20);
  sleep_s(4);
  const double killed_at = now_s();
  ASSERT_TRUE(f.a->process().signal(SIGKILL));
  sleep_s(6);
  traffic.stop(30);
  const size_t hung = traffic.in_flight();
  const auto out = watcher.first(url, killed_at, out_of_routing);
  const TrafficSummary s = summarize(traffic.records());
  const bool passed = out && *out - killed_at <= 2.5 && hung == 0 && s.failures == 0;
  report("engine killed (SIGKILL)",
         "out of routing <= 2.5 s; no hung stream; failed streams end with an SSE error event",
         "out " + seconds_after(out, killed_at) + " after SIGKILL; " + std::to_string(hung) +
             " hung; " + s.describe(),
         passed);
  ASSERT_TRUE(out.has_value()) << "never out of routing";
  EXPECT_LE(*out - killed_at, 2.5);
  EXPECT_EQ(hung, 0u);
  EXPECT_EQ(s.failures, 0u) << s.describe();
}

TEST(Drill, EngineListenerClosed) {
  TwoEngines f;
  ASSERT_TRUE(f.ready());
  const std::string url = f.a->url(0);
  Watcher watcher(f.gw);
  Traffic traffic({.port = f.gw.port(), .max_tokens = 100});
  traffic.start_open(20);
  sleep_s(3);
  const double closed_at = now_s();
  constexpr double kClosedFor = 5;
  ASSERT_TRUE(f.a->post(0, "/admin/fault/close_listener",
                        R"({"duration_ms":)" + std::to_string(int(kClosedFor * 1000)) + "}"));
  sleep_s(kClosedFor + 6);
  traffic.stop(30);
  const auto out = watcher.first(url, closed_at, out_of_routing);
  const auto back = watcher.first(url, closed_at + kClosedFor, in_routing);
  const TrafficSummary s = summarize(traffic.records());
  const bool passed = out && *out - closed_at <= 2.5 && back && s.failures == 0;
  report("engine listener closed 5 s", "out of routing <= 2.5 s, back after it returns",
         "out " + seconds_after(out, closed_at) + " after closing; back " +
             seconds_after(back, closed_at + kClosedFor) + " after reopening; " + s.describe(),
         passed);
  ASSERT_TRUE(out.has_value());
  EXPECT_LE(*out - closed_at, 2.5);
  EXPECT_TRUE(back.has_value()) << "never routable again";
  EXPECT_EQ(s.failures, 0u) << s.describe();
}

// The engine stops generating but its /health keeps answering: only liveness can see it.
TEST(Drill, EnginePausedWithHealthAnswering) {
  TwoEngines f;
  ASSERT_TRUE(f.ready());
  const std::string url = f.a->url(0);
  Watcher watcher(f.gw);
  Traffic traffic({.port = f.gw.port(), .max_tokens = 200});
  traffic.start_open(20);
  sleep_s(4);
  const double paused_at = now_s();
  constexpr double kPause = 8;
  ASSERT_TRUE(f.a->post(0, "/admin/fault/pause", R"({"paused":true,"duration_ms":8000})"));
  sleep_s(kPause);
  const uint64_t before_resume = f.requests_of(url);
  sleep_s(5);
  traffic.stop(30);
  const auto vetoed = watcher.first(url, paused_at, out_of_routing);
  const auto back = watcher.first(url, paused_at + kPause, in_routing);
  const bool routed_again = f.requests_of(url) > before_resume;
  const TrafficSummary s = summarize(traffic.records());
  const bool passed =
      vetoed && *vetoed < paused_at + kPause && back && routed_again && s.failures == 0;
  report("engine paused 8 s, health answering", "vetoed within the pause, routable after resume",
         "vetoed " + seconds_after(vetoed, paused_at) + " into the pause; routable " +
             seconds_after(back, paused_at + kPause) + " after resume; " + s.describe(),
         passed);
  ASSERT_TRUE(vetoed.has_value());
  EXPECT_LT(*vetoed, paused_at + kPause);
  EXPECT_TRUE(back.has_value());
  EXPECT_TRUE(routed_again);
  EXPECT_EQ(s.failures, 0u) << s.describe();
}

// The engine comes back on the same ports with nothing cached: the gateway must re-admit it,
// subscribe to its new publisher, forget what the old process held, and send it work again
// even though its peer holds every hot prefix.
TEST(Drill, EngineRestartedWithEmptyCache) {
  TwoEngines f;
  ASSERT_TRUE(f.ready());
  const std::string url = f.a->url(0);
  const std::vector<std::string> same_ports = f.a->same_ports_args(0);
  Watcher watcher(f.gw);
  Traffic traffic({.port = f.gw.port(), .max_tokens = 32});
  traffic.start_open(20);
  sleep_s(5);
  traffic.stop(30);
  const double killed_at = now_s();
  ASSERT_TRUE(f.a->process().signal(SIGKILL));
  (void)f.a->process().wait(std::chrono::milliseconds(2000));
  sleep_s(3);
  f.a = std::make_unique<MockFleet>(1, same_ports);
  ASSERT_TRUE(f.a->ready());
  const double up_at = now_s();
  const auto back_at = [&] { return watcher.first(url, up_at, in_routing); };
  testing::wait_until([&] { return back_at().has_value(); }, 10s, 50ms);
  const uint64_t before_trickle = f.requests_of(url);
  const double trickle_at = now_s();
  Traffic trickle({.port = f.gw.port(), .max_tokens = 32});
  trickle.start_open(2);
  std::optional<double> first_request;
  while (now_s() < trickle_at + 15) {
    if (!first_request && f.requests_of(url) > before_trickle) first_request = now_s();
    if (first_request && now_s() > *first_request + 2) break;
    sleep_s(0.05);
  }
  trickle.stop(30);
  sleep_s(0.5);
  const auto view = f.gw.worker(url);
  const auto truth = f.a->resident_blocks(0);
  const auto out = watcher.first(url, killed_at, out_of_routing);
  const auto back = back_at();
  const bool exact = view && truth && view->index_blocks == *truth;
  const bool passed = out && *out - killed_at <= 2.5 && back && *back - up_at <= 2.5 &&
                      first_request && *first_request - trickle_at <= 10 && exact;
  report("engine restarted with an empty cache",
         "out <= 2.5 s; re-admitted and resubscribed <= 2.5 s after its port answers; first "
         "request <= 10 s into a trickle",
         "out " + seconds_after(out, killed_at) + "; re-admitted " + seconds_after(back, up_at) +
             " after its port answered; first request " + seconds_after(first_request, trickle_at) +
             " into a 2/s trickle; index " + std::to_string(view ? view->index_blocks : 0) +
             " blocks, engine " + std::to_string(truth.value_or(0)),
         passed);
  ASSERT_TRUE(out.has_value());
  EXPECT_LE(*out - killed_at, 2.5);
  ASSERT_TRUE(back.has_value()) << "never re-admitted";
  EXPECT_LE(*back - up_at, 2.5);
  ASSERT_TRUE(first_request.has_value()) << "never routed to again";
  EXPECT_LE(*first_request - trickle_at, 10);
  EXPECT_TRUE(exact) << "index " << (view ? view->index_blocks : 0) << " engine "
                     << truth.value_or(0);
}

// Busy processes pinned to the engine's core for 15 s: it slows down, nothing may be lost, and it
// must be healthy once they stop. The gateway is pinned to the other core.
TEST(Drill, EngineStarvedOfCpu) {
  TwoEngines f;
  ASSERT_TRUE(f.ready());
  const std::string url = f.a->url(0);
  ASSERT_TRUE(pin_process(f.a->process().pid(), 1));
  ASSERT_TRUE(pin_process(f.gw.process().pid(), 0));
  Watcher watcher(f.gw);
  Traffic traffic({.port = f.gw.port(), .max_tokens = 64});
  traffic.start_open(10);
  sleep_s(3);
  const double starved_at = now_s();
  std::vector<std::unique_ptr<Child>> hogs;
  for (int i = 0; i < 4; ++i) {
    hogs.push_back(
        std::make_unique<Child>(std::vector<std::string>{"/bin/sh", "-c", "while :; do :; done"}));
    ASSERT_TRUE(pin_process(hogs.back()->pid(), 1));
  }
  sleep_s(15);
  hogs.clear();
  const double fed_at = now_s();
  sleep_s(6);
  traffic.stop(60);
  const size_t hung = traffic.in_flight();
  const auto healthy = [&] {
    auto v = f.gw.worker(url);
    return v && in_routing(*v);
  }();
  const TrafficSummary s = summarize(traffic.records());
  const bool went_out = watcher.first(url, starved_at, out_of_routing).has_value();
  const bool passed = healthy && hung == 0 && s.failures == 0 && s.error_events == 0;
  report("engine CPU-starved 15 s", "healthy after the hogs, no request lost",
         std::string(healthy ? "routable" : "NOT routable") + " " +
             std::to_string(static_cast<int>(now_s() - fed_at)) + " s after the hogs (" +
             (went_out ? "out of routing meanwhile" : "never out of routing") + "); " +
             std::to_string(hung) + " hung; " + s.describe(),
         passed);
  EXPECT_TRUE(healthy);
  EXPECT_EQ(hung, 0u);
  EXPECT_EQ(s.failures, 0u) << s.describe();
  EXPECT_EQ(s.error_events, 0u) << s.describe();
}

}  // namespace
}  // namespace kvgate::drills
