// A worker whose engine stops generating while its port still answers (the mock's pause fault:
// /health keeps answering, no step runs). The gateway vetoes it as wedged within
// --worker-wedge-secs: streams waiting there for a first token move to the other worker, streams
// underway end with an error event, new requests avoid it, and once it generates again (the
// gateway's one-token probe gets its token) it is routed to as before.
#include <atomic>
#include <mutex>
#include <thread>

#include "app/gateway_fixture.h"
#include "support/sanitizer.h"

namespace kvgate::app {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

struct StreamRecord {
  SteadyClock::time_point start;
  std::chrono::milliseconds longest_wait{0};  // before the first piece, or between two
  bool done = false;                          // ended with [DONE]
  bool error_event = false;                   // ended with an error event
  std::string worker;
  std::string failure;  // transport or status failure
};

StreamRecord one_stream(uint16_t port, const std::string& prompt, int max_tokens) {
  StreamRecord rec;
  http::SyncClient c("127.0.0.1", port,
                     http::ClientOptions{.request_timeout = 60s, .idle_timeout = 60s});
  http::ClientRequest req;
  req.method = http::Verb::post;
  req.target = "/v1/completions";
  req.body = R"({"model":"mock-8b","stream":true,"max_tokens":)" + std::to_string(max_tokens) +
             R"(,"prompt":")" + prompt + "\"}";
  std::string body;
  rec.start = SteadyClock::now();
  auto last = rec.start;
  auto r = c.stream(req, [&](std::string_view piece) {
    const auto now = SteadyClock::now();
    rec.longest_wait = std::max(rec.longest_wait,
                                std::chrono::duration_cast<std::chrono::milliseconds>(now - last));
    last = now;
    body.append(piece);
    return Status();
  });
  if (!r.ok()) {
    rec.failure = std::string(message_of(r.status()));
    return rec;
  }
  if (r->status != 200) {
    rec.failure = "status " + std::to_string(r->status);
    return rec;
  }
  rec.worker = std::string(r->header("x-kvgate-worker"));
  rec.done = body.find("[DONE]") != std::string::npos;
  rec.error_event = body.find("\"error\"") != std::string::npos;
  return rec;
}

TEST_F(GatewayTest, WedgedWorkerIsVetoedAndItsStreamsMoveOrEnd) {
  const std::string a = start_worker(/*speedup=*/2);
  const std::string b = start_worker(/*speedup=*/2);
  GatewayConfig cfg = base_config();
  cfg.worker_urls = {a, b};
  cfg.liveness.wedge = 1s;
  cfg.load_poll_interval = 0ms;  // spread by in-flight counts only
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(2));
  const auto fleet = gateway_->registry().snapshot();
  workers::Worker& wa = *fleet->workers[0];

  // Streams run on both workers (long outputs: about 6 s at 2x speed).
  std::mutex mu;
  std::vector<StreamRecord> records;
  std::vector<std::thread> clients;
  std::atomic<bool> stop{false};
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        StreamRecord r = one_stream(gateway_->port(),
                                    "client " + std::to_string(t) + " turn " + std::to_string(i),
                                    /*max_tokens=*/300);
        std::lock_guard<std::mutex> l(mu);
        records.push_back(std::move(r));
      }
    });
  }
  // Streams underway on worker a: running, and past their first token (a stream that has sent
  // its client nothing would move to the other worker instead of ending with an error event).
  ASSERT_TRUE(wait_until(
      [&] { return wa.in_flight() > 0 && wa.liveness().last_progress().has_value(); }, 5s));
  // Worker a stops generating; its /health keeps answering.
  http::SyncClient admin("127.0.0.1", worker_port(0));
  ASSERT_TRUE(admin.post("/admin/fault/pause", R"({"paused":true,"duration_ms":6000})").ok());
  const auto paused_at = SteadyClock::now();
  ASSERT_TRUE(wait_until([&] { return wa.liveness().state() == workers::Liveness::kWedged; }, 3s));
  const auto vetoed_after = SteadyClock::now() - paused_at;
  EXPECT_LT(vetoed_after, 1500ms * testing_support::kSlowdown)
      << "wedge 1 s plus the evaluator's tick";
  std::this_thread::sleep_for(200ms);
  const uint64_t dispatched_at_veto = wa.dispatched();
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(wa.dispatched(), dispatched_at_veto) << "no request is routed to a vetoed worker";
  // The pause ends by itself; the probe's token ends the veto.
  ASSERT_TRUE(wait_until([&] { return wa.liveness().state() == workers::Liveness::kLive; }, 8s));
  const uint64_t dispatched_at_return = wa.dispatched();
  ASSERT_TRUE(wait_until([&] { return wa.dispatched() > dispatched_at_return; }, 5s))
      << "a live worker is routed to again";
  stop = true;
  for (auto& c : clients) c.join();

  int done = 0, errored = 0;
  for (const auto& r : records) {
    EXPECT_TRUE(r.failure.empty()) << r.failure;
    EXPECT_TRUE(r.done || r.error_event) << "every stream finishes or ends with an error event";
    // wedge (1 s) + 1 s: the longest any stream waited for a piece.
    EXPECT_LT(r.longest_wait, 2000ms * testing_support::kSlowdown)
        << "a stream on " << r.worker << " waited " << r.longest_wait.count() << " ms";
    done += r.done ? 1 : 0;
    errored += r.error_event ? 1 : 0;
  }
  EXPECT_GT(errored, 0) << "streams underway on the paused worker end with an error event";
  EXPECT_GT(done, errored);
  const std::string m = gateway_->metrics_text();
  EXPECT_NE(
      m.find(R"(kvgate_worker_liveness_transitions_total{reason="no_progress",to="wedged"} 1)"),
      std::string::npos)
      << m.substr(m.find("kvgate_worker_liveness_transitions_total"), 400);
}

TEST_F(GatewayTest, WhenEveryWorkerIsWedgedTheVetoSteersButNeverRefuses) {
  const std::string a = start_worker(/*speedup=*/2);
  GatewayConfig cfg = base_config();
  cfg.worker_urls = {a};
  cfg.liveness.wedge = 500ms;
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1));
  const auto fleet = gateway_->registry().snapshot();
  workers::Worker& wa = *fleet->workers[0];
  std::thread first([&] { (void)one_stream(gateway_->port(), "held", 200); });
  ASSERT_TRUE(wait_until([&] { return wa.in_flight() > 0; }, 2s));
  http::SyncClient admin("127.0.0.1", worker_port(0));
  ASSERT_TRUE(admin.post("/admin/fault/pause", R"({"paused":true,"duration_ms":1500})").ok());
  ASSERT_TRUE(wait_until([&] { return wa.vetoed(); }, 2s));
  // The only worker is vetoed: a request still goes to it (and completes once it resumes).
  const StreamRecord r = one_stream(gateway_->port(), "while vetoed", 4);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.worker, a);
  first.join();
}

// A long prompt sends nothing until its first token: a worker busy with its prefill for longer
// than --worker-wedge-secs is not wedged, and the stream is neither cut nor sent elsewhere.
TEST_F(GatewayTest, ALongPrefillIsNotTakenForAWedge) {
  const std::string a = start_worker(/*speedup=*/1);  // prefill at 20,000 tokens per second
  const std::string b = start_worker(/*speedup=*/1);
  GatewayConfig cfg = base_config();
  cfg.worker_urls = {a, b};
  cfg.liveness.wedge = 500ms;
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(2));
  std::string prompt;
  for (int i = 0; i < 16'000; ++i) prompt += "w" + std::to_string(i) + " ";
  const StreamRecord r = one_stream(gateway_->port(), prompt, /*max_tokens=*/4);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_TRUE(r.done);
  EXPECT_FALSE(r.error_event);
  EXPECT_GT(r.longest_wait, 1000ms) << "the prefill outlasts the wedge time twice over";
  const auto fleet = gateway_->registry().snapshot();
  EXPECT_EQ(fleet->workers[0]->dispatched() + fleet->workers[1]->dispatched(), 1u)
      << "the request went to one worker and stayed there";
  const std::string m = gateway_->metrics_text();
  EXPECT_EQ(m.find(R"(reason="no_progress",to="wedged"} 1)"), std::string::npos)
      << m.substr(m.find("kvgate_worker_liveness_transitions_total"), 400);
}

}  // namespace
}  // namespace kvgate::app
