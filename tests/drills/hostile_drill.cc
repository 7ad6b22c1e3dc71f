// Drills: workers that never fail outright. Three of them beside a healthy kvgate-mock worker,
// under open-loop streamed traffic with default flags: one trickles its stream a byte a second,
// one sends a chunked body of junk without end, one answers streams as JSON. Every stream that
// reached a client from one of them ends with an error event within the wedge rule's bound, each
// is out of routing within 5 s of its first request and gets at most a breaker trial after, and
// no client sees a transport failure.
#include <gtest/gtest.h>

#include <cstdio>

#include "drills/harness.h"
#include "support/faulty_worker.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;
using testing::FaultyWorker;

constexpr double kBreakerOpenSecs = 5;  // the gateway's default --circuit-breaker-open-secs
constexpr double kOutWithinSecs = 5;    // the pass rule: out of routing this soon

double at(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// When each of `w`'s requests (probes aside) arrived, seconds on the drill's clock.
std::vector<double> arrivals_of(const FaultyWorker& w) {
  const double offset = at(std::chrono::steady_clock::now()) - now_s();
  std::vector<double> out;
  for (auto t : w.arrivals()) out.push_back(at(t) - offset);
  return out;
}

TEST(Drill, WorkersThatTrickleSendJunkOrAnswerStreamsAsJson) {
  MockFleet healthy(1, {});
  ASSERT_TRUE(healthy.ready());
  FaultyWorker trickle(FaultyWorker::Mode::kTrickle, 1000ms);
  FaultyWorker junk(FaultyWorker::Mode::kJunk, 1ms);
  FaultyWorker json(FaultyWorker::Mode::kWrongType);
  const std::vector<const FaultyWorker*> faulty = {&trickle, &junk, &json};
  const std::vector<std::string> names = {"trickle", "junk", "json"};
  GatewayProcess gw({healthy.url(0), trickle.url(), junk.url(), json.url()},
                    {"--log-level", "error"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(4, 20));
  Traffic traffic({.port = gw.port(), .max_tokens = 32});
  const double start = now_s();
  traffic.start_open(10);
  sleep_s(15);
  traffic.stop();
  const auto records = traffic.records();
  const TrafficSummary s = summarize(records);

  // Streams a faulty worker started for a client: each must end with an error event in time.
  size_t on_faulty = 0, unclean = 0;
  double longest = 0;
  for (const auto& r : records) {
    const bool faulty_one = r.worker == trickle.url() || r.worker == junk.url();
    if (!faulty_one) continue;
    ++on_faulty;
    unclean += r.ended_cleanly() && r.error_event ? 0 : 1;
    longest = std::max(longest, r.end - r.start);
  }
  // Each faulty worker: out of routing within kOutWithinSecs of its first request, then at most
  // one request per breaker cool-down (its trial), none for a vetoed one.
  bool all_out = true;
  std::string per_worker;
  for (size_t i = 0; i < faulty.size(); ++i) {
    const std::vector<double> got = arrivals_of(*faulty[i]);
    const double first = got.empty() ? start : got.front();
    size_t late = 0;
    for (double t : got) late += t > first + kOutWithinSecs ? 1 : 0;
    const double window = now_s() - (first + kOutWithinSecs);
    const size_t allowed = static_cast<size_t>(window / kBreakerOpenSecs) + 1;
    all_out = all_out && !got.empty() && late <= allowed;
    char line[160];
    std::snprintf(line, sizeof line, "%s%s: %zu requests, %zu after %.0f s", i ? "; " : "",
                  names[i].c_str(), got.size(), late, kOutWithinSecs);
    per_worker += line;
  }
  const bool passed = all_out && unclean == 0 && longest <= kWedgeSecs + 2 && s.failures == 0;
  char measured[600];
  std::snprintf(measured, sizeof measured,
                "%s; %zu streams reached a client from the trickling or junk worker, %zu not "
                "ended by an error event, longest %.1f s; %zu of %zu streams ok, %zu ended with "
                "an error event, %zu failed",
                per_worker.c_str(), on_faulty, unclean, longest, s.ok, s.total, s.error_events,
                s.failures);
  report("workers that trickle 1 byte/s, send junk without end, answer streams as JSON",
         "streams from them end with an error event <= wedge + 2 s; each out of routing <= 5 s "
         "after its first request (then at most its breaker's trials); no failed stream",
         measured, passed);
  EXPECT_TRUE(all_out) << per_worker;
  EXPECT_EQ(unclean, 0u);
  EXPECT_LE(longest, kWedgeSecs + 2);
  EXPECT_EQ(s.failures, 0u) << s.describe();
}

}  // namespace
}  // namespace kvgate::drills
