// The bounds of a relayed answer against workers that never fail outright: one that trickles a
// byte at a time, one that sends junk without end, one that answers a stream as JSON, one whose
// stream never ends. Each stream ends with an error event within its bound, a trickling worker
// is taken out of routing, and a junk answer goes to another worker before the client sees it.
#include "app/gateway_fixture.h"
#include "support/faulty_worker.h"
#include "support/sanitizer.h"

namespace kvgate::app {
namespace {

using namespace std::chrono_literals;
using testing::FaultyWorker;

class StreamBoundsTest : public GatewayTest {
 protected:
  // A gateway on `urls` with KV events off and `tweak` applied; true once all are routable.
  bool serve(const std::vector<std::string>& urls,
             const std::function<void(GatewayConfig&)>& tweak) {
    GatewayConfig c = base_config();
    c.kv_events = false;
    c.worker_urls = urls;
    tweak(c);
    start_gateway(c);
    return wait_routable(urls.size());
  }

  struct Streamed {
    unsigned status = 0;
    std::string body;
    double seconds = 0;
  };
  Streamed stream_once() {
    http::ClientRequest req{.method = http::Verb::post,
                            .target = "/v1/completions",
                            .body = completion("bounded", 64, /*stream=*/true)};
    Streamed out;
    auto c = client();
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.stream(req, [&](std::string_view piece) {
      out.body.append(piece);
      return Status();
    });
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.status = r.ok() ? r->status : 0;
    return out;
  }
  double errors(const std::string& reason) {
    auto m = client().get("/metrics");
    return m.ok() ? metric_value(m->body, "kvgate_request_errors_total{reason=\"" + reason + "\"}")
                  : -1;
  }
};

TEST_F(StreamBoundsTest, ATrickleIsNoProgressAndEndsAtTheIdleBound) {
  FaultyWorker trickle(FaultyWorker::Mode::kTrickle, 20ms);  // an event every 3 s or so
  ASSERT_TRUE(serve({trickle.url()}, [](GatewayConfig& c) {
    c.stream_idle_timeout = 600ms;
    c.liveness.wedge = 0ms;  // this test is the idle bound's alone
  }));
  const Streamed s = stream_once();
  EXPECT_EQ(s.status, 200u);
  EXPECT_NE(s.body.find("--stream-idle-timeout-secs"), std::string::npos) << s.body;
  EXPECT_LT(s.seconds, 2.5 * testing_support::kSlowdown)
      << "each trickled byte would have kept it open";
  EXPECT_EQ(errors("stream_silent"), 1);
}

TEST_F(StreamBoundsTest, ATricklingWorkerIsVetoedAndSteeredAround) {
  const std::string healthy = start_worker();
  FaultyWorker trickle(FaultyWorker::Mode::kTrickle, 20ms);
  ASSERT_TRUE(serve({trickle.url(), healthy}, [](GatewayConfig& c) {
    c.policy = policy::PolicyKind::kRoundRobin;
    c.liveness.wedge = 500ms;
  }));
  // Streams alternate until the trickling worker's silence vetoes it; the one there ends with an
  // error event (the veto's), the rest are served by the healthy worker.
  Streamed on_trickle;
  for (int i = 0; i < 2; ++i) {
    Streamed s = stream_once();
    if (s.body.find("[DONE]") == std::string::npos) on_trickle = std::move(s);
  }
  EXPECT_NE(on_trickle.body.find("\"error\""), std::string::npos) << on_trickle.body;
  EXPECT_LT(on_trickle.seconds, 5 * testing_support::kSlowdown);
  const auto fleet = gateway_->registry().snapshot();
  const workers::Worker* w = fleet->find(trickle.url());
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(wait_until([&] { return w->liveness().state() == workers::Liveness::kWedged; }, 5s));
  const uint64_t routed = w->dispatched();
  for (int i = 0; i < 6; ++i) {
    const Streamed s = stream_once();
    EXPECT_NE(s.body.find("[DONE]"), std::string::npos) << s.body;
  }
  // Only the veto's one-token probes reach it now, and their trickle is no token: the veto holds.
  EXPECT_EQ(w->dispatched(), routed);
  EXPECT_EQ(w->liveness().state(), workers::Liveness::kWedged);
}

TEST_F(StreamBoundsTest, AStreamAnsweredAsJsonGoesToAnotherWorker) {
  const std::string healthy = start_worker();
  FaultyWorker json(FaultyWorker::Mode::kWrongType);
  ASSERT_TRUE(serve({json.url(), healthy},
                    [](GatewayConfig& c) { c.policy = policy::PolicyKind::kRoundRobin; }));
  for (int i = 0; i < 4; ++i) {
    const Streamed s = stream_once();
    EXPECT_EQ(s.status, 200u);
    EXPECT_NE(s.body.find("[DONE]"), std::string::npos) << s.body;
  }
  EXPECT_GE(json.generations(), 1);
  EXPECT_EQ(errors("not_event_stream"), json.generations());
}

TEST_F(StreamBoundsTest, JunkWithoutEventsEndsAtTheIdleBound) {
  FaultyWorker junk(FaultyWorker::Mode::kJunk);
  ASSERT_TRUE(serve({junk.url()}, [](GatewayConfig& c) {
    c.stream_idle_timeout = 500ms;
    c.liveness.wedge = 0ms;
  }));
  const Streamed s = stream_once();
  EXPECT_NE(s.body.find("--stream-idle-timeout-secs"), std::string::npos)
      << s.body.substr(s.body.size() - std::min<size_t>(s.body.size(), 300));
  EXPECT_LT(s.seconds, 3 * testing_support::kSlowdown);
}

TEST_F(StreamBoundsTest, AnAnswerPastItsSizeEnds) {
  FaultyWorker endless(FaultyWorker::Mode::kEndless, 0ms);
  ASSERT_TRUE(serve({endless.url()}, [](GatewayConfig& c) { c.max_answer_bytes = 64 << 10; }));
  const Streamed s = stream_once();
  EXPECT_NE(s.body.find("--max-answer-bytes"), std::string::npos);
  EXPECT_LT(s.body.size(), (64u << 10) + (32u << 10)) << "at most a piece past the bound";
  EXPECT_EQ(errors("answer_too_large"), 1);
}

TEST_F(StreamBoundsTest, AStreamEndsAtItsDeadline) {
  FaultyWorker endless(FaultyWorker::Mode::kEndless, 20ms);
  ASSERT_TRUE(serve({endless.url()}, [](GatewayConfig& c) { c.request_timeout = 1s; }));
  const Streamed s = stream_once();
  EXPECT_NE(s.body.find("--request-timeout-secs"), std::string::npos);
  EXPECT_GE(s.seconds, 0.9);
  EXPECT_LT(s.seconds, 3 * testing_support::kSlowdown);
  EXPECT_EQ(errors("stream_deadline"), 1);
}

TEST_F(StreamBoundsTest, AWholeAnswerTrickledFailsAtTheIdleBound) {
  FaultyWorker trickle(FaultyWorker::Mode::kTrickle, 20ms);
  ASSERT_TRUE(serve({trickle.url()}, [](GatewayConfig& c) {
    c.stream_idle_timeout = 500ms;
    c.max_retries = 0;
  }));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = client().post("/v1/completions", completion("whole", 4));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 504u) << r->body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s * testing_support::kSlowdown)
      << "not the 600 s request timeout";
}

}  // namespace
}  // namespace kvgate::app
