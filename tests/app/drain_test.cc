// Graceful shutdown of the kvgate process: SIGTERM with requests in flight. Within the grace
// period every request finishes; at its end what still runs ends with the documented error (an
// SSE error event in a stream, a 503 otherwise). Meanwhile /readiness answers 503 and a new
// request is refused with 503; the process exits 0. A second signal ends the drain at once, with
// the documented status; SIGHUP never stops the process (it reloads the configuration).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "drills/harness.h"
#include "kvgate/http/client.h"
#include "support/sanitizer.h"
#include "support/wait.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;

struct Answer {
  unsigned status = 0;
  std::string body;
};

Answer get(uint16_t port, const std::string& target) {
  http::SyncClient c("127.0.0.1", port, http::ClientOptions{.request_timeout = 5000ms});
  auto r = c.get(target);
  return r.ok() ? Answer{r->status, r->body} : Answer{};
}

Answer post_completion(uint16_t port) {
  http::SyncClient c("127.0.0.1", port, http::ClientOptions{.request_timeout = 5000ms});
  auto r =
      c.post("/v1/completions", R"({"model":"mock-8b","prompt":"hello there","max_tokens":4})");
  return r.ok() ? Answer{r->status, r->body} : Answer{};
}

TEST(Drain, SigtermLetsEveryRequestInFlightFinish) {
  MockFleet fleet(2, {"--speedup", "2"});
  ASSERT_TRUE(fleet.ready());
  GatewayProcess gw(fleet.urls(), {"--log-level", "warn", "--shutdown-grace-period-secs", "60"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(2, 20));
  Traffic streams({.port = gw.port(), .max_tokens = 400});
  Traffic whole({.port = gw.port(), .max_tokens = 400, .stream = false});
  streams.start_burst(200);
  whole.start_burst(200);
  // Every request at a worker before the signal (a slow build takes a while to take 400).
  const auto at_workers = [&] {
    uint64_t n = 0;
    for (const auto& w : gw.workers()) n += w.in_flight;
    return n;
  };
  const auto finished = [&] { return streams.records().size() + whole.records().size(); };
  testing::wait_until([&] { return at_workers() + finished() >= 400; }, 30s, 50ms);
  const uint64_t in_flight_at_signal = at_workers();
  const size_t finished_before = finished();
  ASSERT_EQ(in_flight_at_signal + finished_before, 400u) << "every request reached the gateway";
  ASSERT_TRUE(gw.process().signal(SIGTERM));
  Answer ready;
  testing::wait_until(
      [&] {
        ready = get(gw.port(), "/readiness");
        return ready.status == 503;
      },
      5s, 20ms);
  const Answer refused = post_completion(gw.port());
  const auto code = gw.process().wait(60s);
  streams.stop(10);
  whole.stop(10);

  EXPECT_GE(in_flight_at_signal, 200u) << "most requests were in flight at SIGTERM";
  EXPECT_EQ(ready.status, 503u) << ready.body;
  EXPECT_NE(ready.body.find("draining"), std::string::npos) << ready.body;
  EXPECT_EQ(refused.status, 503u) << refused.body;
  EXPECT_NE(refused.body.find("shutting down"), std::string::npos) << refused.body;
  ASSERT_TRUE(code.has_value()) << "kvgate did not exit";
  EXPECT_EQ(*code, 0);
  const TrafficSummary s = summarize(streams.records());
  const TrafficSummary w = summarize(whole.records());
  EXPECT_EQ(s.total, 200u);
  EXPECT_EQ(s.ok, 200u) << s.describe();
  EXPECT_EQ(w.total, 200u);
  EXPECT_EQ(w.ok, 200u) << w.describe();
}

TEST(Drain, AtTheEndOfTheGracePeriodWhatStillRunsEndsWithTheDocumentedError) {
  MockFleet fleet(2, {});
  ASSERT_TRUE(fleet.ready());
  GatewayProcess gw(fleet.urls(), {"--log-level", "warn", "--shutdown-grace-period-secs", "1"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(2, 20));
  Traffic streams({.port = gw.port(), .max_tokens = 4000});
  Traffic whole({.port = gw.port(), .max_tokens = 4000, .stream = false});
  streams.start_burst(20);
  whole.start_burst(20);
  sleep_s(1.5);
  const double term_at = now_s();
  ASSERT_TRUE(gw.process().signal(SIGTERM));
  const auto code = gw.process().wait(30s);
  const double exited_at = now_s();
  streams.stop(10);
  whole.stop(10);

  ASSERT_TRUE(code.has_value()) << "kvgate did not exit";
  EXPECT_EQ(*code, 0);
  EXPECT_LT(exited_at - term_at, (1 + 5.0) * testing_support::kSlowdown)
      << "the grace period, then a few seconds at most";
  const auto stream_records = streams.records();
  ASSERT_EQ(stream_records.size(), 20u);
  for (const StreamRecord& r : stream_records) {
    EXPECT_EQ(r.status, 200u) << r.failure;
    EXPECT_TRUE(r.error_event) << "a stream cut at the grace period ends with an error event";
    EXPECT_TRUE(r.ended_cleanly()) << r.failure;
  }
  const auto whole_records = whole.records();
  ASSERT_EQ(whole_records.size(), 20u);
  for (const StreamRecord& r : whole_records) {
    EXPECT_EQ(r.status, 503u) << r.failure;
    EXPECT_NE(r.failure.find("shutting down"), std::string::npos) << r.failure;
  }
}

// A second signal does not wait for the grace period.
TEST(Drain, ASecondSignalExitsAtOnce) {
  MockFleet fleet(1, {});
  ASSERT_TRUE(fleet.ready());
  GatewayProcess gw(fleet.urls(), {"--log-level", "warn", "--shutdown-grace-period-secs", "120"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(1, 20));
  Traffic streams({.port = gw.port(), .max_tokens = 4000});
  streams.start_burst(4);
  sleep_s(1.0);
  ASSERT_TRUE(gw.process().signal(SIGTERM));
  sleep_s(0.5);
  EXPECT_FALSE(gw.process().wait(0ms).has_value()) << "exited before its grace period";
  const double second_at = now_s();
  ASSERT_TRUE(gw.process().signal(SIGINT));
  const auto code = gw.process().wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1) << "the documented status, not a death by the signal";
  EXPECT_NE(gw.process().errors().find("exiting at once"), std::string::npos)
      << gw.process().errors();
  EXPECT_LT(now_s() - second_at, 3 * testing_support::kSlowdown);
  streams.stop(10);
}

// Every thread of the process but the main one, the libraries' included, blocks the stop signals:
// only the main thread's wait takes them, whatever phase the process is in. SIGHUP reloads the
// configuration and stops nothing.
TEST(Signals, EveryThreadBlocksThemAndSighupKeepsServing) {
  MockFleet fleet(1, {});
  ASSERT_TRUE(fleet.ready());
  // With gRPC's threads too, but not under ThreadSanitizer (support/sanitizer.h).
  GatewayProcess gw(fleet.urls(), {"--log-level", "warn", "--grpc-port",
                                   testing_support::kUnderThreadSanitizer ? "-1" : "0"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(1, 20));
  const std::string tasks = "/proc/" + std::to_string(gw.process().pid()) + "/task";
  size_t threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    // The main thread waits for them in sigwait(), which unblocks them for the wait's length.
    if (task.path().filename() == std::to_string(gw.process().pid())) continue;
    std::ifstream status(task.path() / "status");
    std::string line;
    uint64_t blocked = 0;
    bool found = false;
    while (std::getline(status, line)) {
      if (line.rfind("SigBlk:", 0) != 0) continue;
      blocked = std::stoull(line.substr(7), nullptr, 16);
      found = true;
    }
    if (!found) continue;  // the thread ended meanwhile
    ++threads;
    for (const int sig : {SIGHUP, SIGINT, SIGTERM}) {
      EXPECT_TRUE(blocked & (uint64_t{1} << (sig - 1)))
          << "thread " << task.path().filename() << " takes signal " << sig;
    }
  }
  EXPECT_GE(threads, 5u) << "the gateway's own threads, the log writer's, ZMQ's, gRPC's";
  ASSERT_TRUE(gw.process().signal(SIGHUP));
  // SIGHUP reads the configuration again (the same line: nothing changes).
  ASSERT_TRUE(testing::wait_until(
      [&] { return gw.metric_sum("kvgate_config_reloads_total", "applied") == 1; }, 10s));
  EXPECT_FALSE(gw.process().wait(0ms).has_value()) << "SIGHUP ended it";
  http::SyncClient c("127.0.0.1", gw.port());
  auto r = c.post("/v1/completions", R"({"model":"mock-8b","prompt":"still here","max_tokens":2})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  ASSERT_TRUE(gw.process().signal(SIGTERM));
  const auto code = gw.process().wait(30s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << "a drain after a SIGHUP is a drain";
}

}  // namespace
}  // namespace kvgate::drills
