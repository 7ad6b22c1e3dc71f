// Prefill/decode disaggregation seen from the workers. SGLang's protocol: each generation goes to
// one prefill and one decode worker at once, both bodies naming the prefill's bootstrap host and
// port and the same fresh room; the client gets the decode's answer; a prefill that fails cuts its
// decode and the client gets one clean error. vLLM's: the prefill first, then the decode with the
// prefill's kv_transfer_params. Roles come from the command line or POST /workers and show in
// /workers and /metrics.
#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "app/gateway_fixture.h"
#include "support/faulty_worker.h"
#include "support/recording_worker.h"
#include "support/sanitizer.h"
#include "support/wait.h"

namespace kvgate::app {
namespace {

using testing::FaultyWorker;
using testing::RecordingWorker;
constexpr uint16_t kBootstrapPort = 9001;

// The generations a worker received, as parsed bodies' bootstrap fields.
struct Bootstrap {
  std::string host;
  uint64_t port = 0;
  uint64_t room = 0;
};
std::vector<Bootstrap> bootstraps(const RecordingWorker& w) {
  std::vector<Bootstrap> out;
  for (const auto& r : w.requests()) {
    if (r.method != http::Verb::post) continue;
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    Bootstrap b;
    std::string_view host;
    EXPECT_EQ(p.parse(r.body).get(doc), simdjson::SUCCESS) << r.body;
    EXPECT_EQ(doc["bootstrap_host"].get_string().get(host), simdjson::SUCCESS) << r.body;
    EXPECT_EQ(doc["bootstrap_port"].get_uint64().get(b.port), simdjson::SUCCESS) << r.body;
    EXPECT_EQ(doc["bootstrap_room"].get_uint64().get(b.room), simdjson::SUCCESS) << r.body;
    b.host = std::string(host);
    out.push_back(b);
  }
  return out;
}

// Waits until `w` has received `n` generations: the client has the decode's answer as soon as
// the decode sends it, which may be before the prefill's request (sent at the same time) lands.
bool received(const RecordingWorker& w, size_t n) {
  return testing::wait_until([&] {
    size_t posts = 0;
    for (const auto& r : w.requests()) posts += r.method == http::Verb::post ? 1 : 0;
    return posts >= n;
  });
}

// A client's request on its own thread, joined at the end of the scope after `release` (which
// lets any held worker answer), so a failed assertion never leaves it running.
class Background {
 public:
  Background(std::function<Result<http::ClientResponse>()> send, std::function<void()> release)
      : release_(std::move(release)), thread_([this, send = std::move(send)] {
          answer = send();
          done = true;
        }) {}
  ~Background() { join(); }
  void join() {
    if (!thread_.joinable()) return;
    release_();
    thread_.join();
  }
  std::optional<Result<http::ClientResponse>> answer;  // once done
  std::atomic<bool> done{false};

 private:
  std::function<void()> release_;
  std::thread thread_;
};

class PdTest : public GatewayTest {
 protected:
  void start_pd(const std::string& prefill, const std::string& decode, uint32_t retries = 2,
                GatewayConfig::PdProtocol protocol = GatewayConfig::PdProtocol::kSglang,
                uint16_t bootstrap_port = kBootstrapPort, double local_wait_ratio = 0) {
    GatewayConfig c = base_config();
    c.kv_events = false;
    c.pd_disaggregation = true;
    c.pd_protocol = protocol;
    c.pd_local_prefill_wait_ratio = local_wait_ratio;
    c.prefill_workers = {{.url = prefill, .bootstrap_port = bootstrap_port}};
    c.decode_workers = {decode};
    c.max_retries = retries;
    start_gateway(c);
    ASSERT_TRUE(wait_routable(2));
  }
  void serve_regular(const std::string& worker) {
    GatewayConfig c = base_config();
    c.kv_events = false;
    c.worker_urls = {worker};
    start_gateway(c);
    ASSERT_TRUE(wait_routable(1));
  }
};

TEST_F(PdTest, BothWorkersGetTheRequestWithOneFreshRoom) {
  RecordingWorker prefill, decode;
  start_pd(prefill.url(), decode.url());
  auto http = client();
  std::vector<std::string> ids;
  for (const bool stream : {false, true}) {
    auto r = http.post("/v1/completions", completion("hello", 1, stream));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 200u) << r->body;
    EXPECT_EQ(r->header("x-kvgate-worker"), decode.url()) << "the client gets the decode's answer";
    EXPECT_EQ(r->header("x-kvgate-prefill-worker"), prefill.url()) << "and is told the prefill";
    ids.emplace_back(r->header("x-request-id"));
  }
  ASSERT_TRUE(received(prefill, 2));
  // Both sides of a pair get the request's id: what joins their records.
  for (const RecordingWorker* w : {&prefill, &decode}) {
    std::vector<std::string> got;
    for (const auto& q : w->requests()) {
      if (q.method == http::Verb::post) got.push_back(q.field("x-request-id"));
    }
    EXPECT_EQ(got, ids);
  }
  const auto p = bootstraps(prefill);
  const auto d = bootstraps(decode);
  ASSERT_EQ(p.size(), 2u);
  ASSERT_EQ(d.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(p[i].host, "127.0.0.1");
    EXPECT_EQ(p[i].port, kBootstrapPort);
    EXPECT_EQ(d[i].host, "127.0.0.1");
    EXPECT_EQ(d[i].port, kBootstrapPort);
    EXPECT_EQ(p[i].room, d[i].room) << "one room joins the pair";
  }
  EXPECT_NE(p[0].room, p[1].room) << "each request gets a fresh room";
  // Asked, the decision names both workers.
  http::ClientRequest explained{
      .method = http::Verb::post, .target = "/v1/completions", .body = completion("hello", 1)};
  explained.headers.emplace_back("x-kvgate-explain", "1");
  auto told = http.request(explained);
  ASSERT_TRUE(told.ok());
  const std::string decision(told->header("x-kvgate-decision"));
  EXPECT_NE(decision.find(prefill.url()), std::string::npos) << decision;
  EXPECT_NE(decision.find("decode: " + decode.url()), std::string::npos) << decision;
  // (The last prefill may still be ending: the client had the decode's answer first.)
  std::string text;
  EXPECT_TRUE(testing::wait_until([&] {
    auto m = http.get("/metrics");
    text = m.ok() ? m->body : "";
    return metric_value(text, "kvgate_pd_prefill_seconds_count") == 3;
  })) << "three prefill exchanges timed";
  EXPECT_EQ(metric_value(text, "kvgate_pd_pairs_total"), 3);
  EXPECT_EQ(metric_value(text, "kvgate_pd_transfer_seconds_count"), 1) << "the streamed pair";
  EXPECT_EQ(metric_value(text, "kvgate_pd_decode_seconds_count"), 1);
  EXPECT_GE(metric_value(text, R"(kvgate_role_in_flight{role="prefill"})"), 0);
  EXPECT_EQ(metric_value(text, R"(kvgate_role_in_flight{role="decode"})"), 0) << "all answered";
  // kvgate_worker_state{breaker=...,health=...,liveness=...,role=...,worker=...} 1
  const auto role_shown = [&](const std::string& role, const std::string& url) {
    const std::string labels = "role=\"" + role + "\",worker=\"" + url + "\"} 1";
    for (size_t at = text.find("\nkvgate_worker_state{"); at != std::string::npos;
         at = text.find("\nkvgate_worker_state{", at + 1)) {
      if (text.substr(at, text.find('\n', at + 1) - at).find(labels) != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(role_shown("prefill", prefill.url())) << text;
  EXPECT_TRUE(role_shown("decode", decode.url())) << text;
  auto listed = http.get("/workers");
  ASSERT_TRUE(listed.ok());
  EXPECT_NE(listed->body.find(R"("role":"prefill","bootstrap_port":9001)"), std::string::npos)
      << listed->body;
  EXPECT_NE(listed->body.find(R"("role":"decode")"), std::string::npos) << listed->body;
}

// A batch of prompts: one room each, the same lists to both workers.
TEST_F(PdTest, ABatchGetsARoomPerPrompt) {
  RecordingWorker prefill, decode;
  start_pd(prefill.url(), decode.url());
  auto http = client();
  auto r = http.post("/v1/completions",
                     R"({"model":"mock-8b","max_tokens":1,"prompt":["one","two","three"]})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200u) << r->body;
  const auto rooms_of = [](const RecordingWorker& w) {
    std::vector<uint64_t> rooms;
    for (const auto& q : w.requests()) {
      if (q.method != http::Verb::post) continue;
      simdjson::dom::parser p;
      const simdjson::dom::element doc = p.parse(q.body).value();
      EXPECT_EQ(doc["bootstrap_host"].get_array().size(), 3u) << q.body;
      EXPECT_EQ(doc["bootstrap_port"].get_array().size(), 3u) << q.body;
      for (auto room : doc["bootstrap_room"].get_array()) rooms.push_back(room.get_uint64());
    }
    return rooms;
  };
  ASSERT_TRUE(received(prefill, 1));
  const auto p = rooms_of(prefill);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p, rooms_of(decode));
  EXPECT_NE(p[0], p[1]);
  EXPECT_NE(p[1], p[2]);
}

// The decode waits for a room its prefill will never fill (here: a worker that trickles its
// answer for minutes); the prefill's failure cuts it, and the client hears one error at once.
TEST_F(PdTest, AFailedPrefillCutsItsDecodeAndTheClientGetsOneError) {
  RecordingWorker prefill;
  prefill.set_generation_status(500);
  using Ms = std::chrono::milliseconds;
  const auto scaled = [](int ms) {
    return Ms(static_cast<int64_t>(ms * testing_support::kSlowdown));
  };
  FaultyWorker decode(FaultyWorker::Mode::kTrickle, scaled(3000));
  start_pd(prefill.url(), decode.url(), /*retries=*/0);
  auto http = client();
  const auto started = std::chrono::steady_clock::now();
  auto r = http.post("/v1/completions", completion("hello", 1, false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 502u) << r->body;
  EXPECT_NE(r->body.find("prefill worker answered 500"), std::string::npos) << r->body;
  EXPECT_LT(std::chrono::steady_clock::now() - started, scaled(2000))
      << "the decode was cut, not waited for";
  auto metrics = http.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metric_value(metrics->body, "kvgate_pd_prefill_failures_total"), 1);
}

// A decode that fails is the decode's failure: the prefill is not blamed (nor counted failed).
TEST_F(PdTest, AFailedDecodeIsNotHeldAgainstItsPrefill) {
  RecordingWorker prefill, decode;
  decode.set_generation_status(500);
  start_pd(prefill.url(), decode.url(), /*retries=*/0);
  auto http = client();
  auto r = http.post("/v1/completions", completion("hello", 1, false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 500u) << r->body;
  EXPECT_EQ(r->header("x-kvgate-worker"), decode.url());
  auto metrics = http.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metric_value(metrics->body, "kvgate_pd_prefill_failures_total"), 0);
}

// A decode that timed out waiting for its room (504) may have been failed by its prefill, even
// when the prefill's answer came in just before the decode's: a prefill queue longer than the
// decode's transfer timeout. The retry takes another prefill as well as another decode, never the
// same late prefill again (which the prompt's predicted cache would choose).
TEST_F(PdTest, ADecodeThatTimedOutWaitingForItsRoomSendsTheRetryToAnotherPrefill) {
  RecordingWorker prefill_a, prefill_b, decode_a, decode_b;
  for (RecordingWorker* d : {&decode_a, &decode_b}) {
    d->set_generation_status(504);
    // Long after the prefills' immediate answers.
    d->set_error_delay(
        std::chrono::milliseconds(static_cast<int64_t>(200 * testing_support::kSlowdown)));
  }
  GatewayConfig c = base_config();
  c.kv_events = false;
  c.pd_disaggregation = true;
  c.prefill_workers = {{.url = prefill_a.url(), .bootstrap_port = kBootstrapPort},
                       {.url = prefill_b.url(), .bootstrap_port = kBootstrapPort}};
  c.decode_workers = {decode_a.url(), decode_b.url()};
  c.max_retries = 1;
  start_gateway(c);
  ASSERT_TRUE(wait_routable(4));
  auto http = client();
  auto r = http.post("/v1/completions", completion("a prompt the retry must not follow", 1, false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 504u) << r->body;
  ASSERT_TRUE(received(prefill_a, 1) && received(prefill_b, 1))
      << "generations at prefill a: " << bootstraps(prefill_a).size()
      << ", at prefill b: " << bootstraps(prefill_b).size();
  EXPECT_EQ(bootstraps(prefill_a).size(), 1u);
  EXPECT_EQ(bootstraps(prefill_b).size(), 1u);
  EXPECT_EQ(bootstraps(decode_a).size(), 1u);
  EXPECT_EQ(bootstraps(decode_b).size(), 1u);
  auto metrics = http.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metric_value(metrics->body, "kvgate_pd_prefill_failures_total"), 0);
}

// A pair's decode that answers 504 gave up waiting for its room: the prefill may be the late one,
// so the decode's breaker does not hear of it, however many rooms come late. Another error from
// the decode is its own, and counts.
class PdBreakerTest : public PdTest {
 protected:
  // Three requests to a pair whose decode answers `status`, through breakers that open at the
  // second consecutive failure; how often the decode's breaker opened.
  uint64_t decode_breaker_opened(unsigned status) {
    RecordingWorker prefill, decode;
    decode.set_generation_status(status);
    GatewayConfig c = base_config();
    c.kv_events = false;
    c.pd_disaggregation = true;
    c.prefill_workers = {{.url = prefill.url(), .bootstrap_port = kBootstrapPort}};
    c.decode_workers = {decode.url()};
    c.max_retries = 0;
    c.breaker.consecutive_failures = 2;
    c.breaker.open_for = std::chrono::seconds(60);
    start_gateway(c);
    EXPECT_TRUE(wait_routable(2));
    auto http = client();
    for (int i = 0; i < 3; ++i) {
      auto r = http.post("/v1/completions", completion("a prompt " + std::to_string(i), 1, false));
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) {
        EXPECT_EQ(r->status, status) << r->body;
      }
    }
    const auto fleet = gateway_->registry().snapshot();
    for (const auto& w : fleet->workers) {
      if (w->url() == decode.url()) return w->breaker().opened_total();
    }
    ADD_FAILURE() << "no decode worker";
    return 0;
  }
};

TEST_F(PdBreakerTest, RoomsThatComeLateNeverOpenTheDecodesBreaker) {
  EXPECT_EQ(decode_breaker_opened(504), 0u);
}

TEST_F(PdBreakerTest, TheDecodesOwnErrorsOpenItsBreaker) {
  EXPECT_EQ(decode_breaker_opened(503), 1u);
}

// vLLM's NixlConnector pattern: the prefill first (one token, whole, asked to keep the KV for a
// remote decode), then the decode with the client's own request and what the prefill answered.
TEST_F(PdTest, AVllmPairGoesPrefillFirstThenDecodeWithItsTransferParams) {
  RecordingWorker prefill, decode;
  constexpr std::string_view kParams =
      R"({"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"engine-p",)"
      R"("remote_block_ids":[3,4,5],"remote_host":"127.0.0.1","remote_port":5600,"tp_size":1})";
  prefill.set_whole_answer(
      R"({"id":"cmpl-p","object":"text_completion","choices":[{"index":0,"text":"x",)"
      R"("finish_reason":"length"}],"kv_transfer_params":)" +
      std::string(kParams) + "}");
  start_pd(prefill.url(), decode.url(), 2, GatewayConfig::PdProtocol::kVllm);
  auto http = client();
  const std::string asked = R"({"model":"mock-8b","prompt":"hello","max_tokens":5,"stream":true,)"
                            R"("stream_options":{"include_usage":true},"temperature":0.25})";
  auto r = http.post("/v1/completions", asked);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200u) << r->body;
  EXPECT_EQ(r->header("x-kvgate-worker"), decode.url());

  const auto posts = [](const RecordingWorker& w) {
    std::vector<std::string> bodies;
    for (const auto& q : w.requests()) {
      if (q.method == http::Verb::post) bodies.push_back(q.body);
    }
    return bodies;
  };
  const auto p = posts(prefill);
  const auto d = posts(decode);
  ASSERT_EQ(p.size(), 1u);
  ASSERT_EQ(d.size(), 1u);
  simdjson::dom::parser parser;
  simdjson::dom::element to_prefill = parser.parse(p[0]).value();
  EXPECT_TRUE(to_prefill["kv_transfer_params"]["do_remote_decode"].get_bool().value()) << p[0];
  EXPECT_TRUE(to_prefill["kv_transfer_params"]["remote_engine_id"].is_null()) << p[0];
  EXPECT_FALSE(to_prefill["stream"].get_bool().value()) << p[0];
  EXPECT_EQ(to_prefill["max_tokens"].get_uint64().value(), 1u) << p[0];
  EXPECT_EQ(to_prefill["stream_options"].error(), simdjson::NO_SUCH_FIELD) << p[0];
  EXPECT_EQ(to_prefill["temperature"].get_double().value(), 0.25) << p[0];
  EXPECT_NE(p[0].find(R"("prompt":"hello")"), std::string::npos) << p[0];

  simdjson::dom::parser parser2;
  simdjson::dom::element to_decode = parser2.parse(d[0]).value();
  EXPECT_TRUE(to_decode["stream"].get_bool().value()) << d[0];
  EXPECT_EQ(to_decode["max_tokens"].get_uint64().value(), 5u) << d[0];
  EXPECT_EQ(simdjson::minify(to_decode["kv_transfer_params"].value()),
            simdjson::minify(parser.parse(kParams).value()))
      << "the decode gets exactly what the prefill answered: " << d[0];
}

TEST_F(PdTest, AVllmPrefillWithoutTransferParamsFailsThePairAndTheDecodeIsNotAsked) {
  RecordingWorker prefill, decode;
  start_pd(prefill.url(), decode.url(), 0, GatewayConfig::PdProtocol::kVllm);
  auto http = client();
  auto r = http.post("/v1/completions", completion("hello", 3, false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 502u) << r->body;
  EXPECT_NE(r->body.find("kv_transfer_params"), std::string::npos) << r->body;
  for (const auto& q : decode.requests()) EXPECT_NE(q.method, http::Verb::post) << q.body;
}

// The decider by load (--pd-local-prefill-wait-ratio 1): on an idle fleet a request goes as a
// pair (a tie keeps the pair); with the prefill worker busy on another prompt, the idle decode
// worker would start sooner, so the next request goes to it alone and nothing is transferred.
TEST_F(PdTest, ARequestGoesToItsDecodeAloneWhenThePrefillsQueueWouldMakeItWait) {
  RecordingWorker prefill, decode;
  prefill.set_whole_answer(
      R"({"id":"cmpl-p","object":"text_completion","choices":[{"index":0,"text":"x",)"
      R"("finish_reason":"length"}],"kv_transfer_params":{"remote_engine_id":"engine-p"}})");
  start_pd(prefill.url(), decode.url(), 2, GatewayConfig::PdProtocol::kVllm, kBootstrapPort,
           /*local_wait_ratio=*/1);
  const auto posts = [](const RecordingWorker& w) {
    std::vector<std::string> bodies;
    for (const auto& q : w.requests()) {
      if (q.method == http::Verb::post) bodies.push_back(q.body);
    }
    return bodies;
  };
  prefill.hold_generations(true);
  Background first(
      [&] {
        return client().post("/v1/completions",
                             completion("the first prompt of several words", 3, false));
      },
      [&] { prefill.hold_generations(false); });
  ASSERT_TRUE(received(prefill, 1)) << "an idle fleet's first request goes as a pair";

  auto http = client();
  http::ClientRequest explained{.method = http::Verb::post,
                                .target = "/v1/completions",
                                .body = completion("a second prompt", 3, false)};
  explained.headers.emplace_back("x-kvgate-explain", "1");
  auto alone = http.request(explained);
  first.join();
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->status, 200u) << alone->body;
  const std::string decision(alone->header("x-kvgate-decision"));
  EXPECT_NE(decision.find("local prefill: sooner on the decode worker"), std::string::npos)
      << decision;
  ASSERT_TRUE(first.answer && first.answer->ok());
  EXPECT_EQ((*first.answer)->status, 200u) << (*first.answer)->body;

  const auto p = posts(prefill);
  const auto d = posts(decode);
  ASSERT_EQ(p.size(), 1u) << "the second request never reached the prefill worker";
  ASSERT_EQ(d.size(), 2u);
  const auto to_decode = [&](std::string_view prompt) {
    for (const auto& b : d) {
      if (b.find(prompt) != std::string::npos) return b;
    }
    return std::string();
  };
  EXPECT_EQ(to_decode("a second prompt").find("kv_transfer_params"), std::string::npos)
      << "served whole by the decode: " << to_decode("a second prompt");
  EXPECT_NE(to_decode("the first prompt").find("engine-p"), std::string::npos)
      << "the pair's decode got the prefill's params: " << to_decode("the first prompt");
  auto metrics = http.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metric_value(metrics->body, R"(kvgate_pd_local_prefills_total{reason="sooner"})"), 1);
  EXPECT_EQ(metric_value(metrics->body, R"(kvgate_pd_local_prefills_total{reason="held"})"), 0);
  EXPECT_EQ(metric_value(metrics->body, "kvgate_pd_pairs_total"), 1);
}

// A decode worker at the overload thresholds (here its KV pool 95% used, as its engine reports)
// takes no prompt alone for the wait: the second request goes as a pair too, though the prefill
// worker is busy.
TEST_F(PdTest, ADecodeWorkerWithAFullKvPoolTakesNoPromptAloneForTheWait) {
  RecordingWorker prefill, decode;
  prefill.set_whole_answer(
      R"({"id":"cmpl-p","object":"text_completion","choices":[{"index":0,"text":"x",)"
      R"("finish_reason":"length"}],"kv_transfer_params":{"remote_engine_id":"engine-p"}})");
  decode.set_metrics(
      "vllm:num_requests_running{engine=\"0\",model_name=\"mock-8b\"} 3.0\n"
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"mock-8b\"} 0.0\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"mock-8b\"} 0.95\n");
  start_pd(prefill.url(), decode.url(), 2, GatewayConfig::PdProtocol::kVllm, kBootstrapPort,
           /*local_wait_ratio=*/1);
  auto http = client();
  ASSERT_TRUE(testing::wait_until([&] {
    auto listed = http.get("/workers");
    return listed.ok() && listed->body.find(R"("kv_usage":0.9)") != std::string::npos;
  })) << "the decode worker's load was never read";
  prefill.hold_generations(true);
  Background first(
      [&] { return client().post("/v1/completions", completion("the first prompt", 3, false)); },
      [&] { prefill.hold_generations(false); });
  ASSERT_TRUE(received(prefill, 1));
  Background second(
      [&] { return client().post("/v1/completions", completion("a second prompt", 3, false)); },
      [&] { prefill.hold_generations(false); });
  EXPECT_TRUE(received(prefill, 2)) << "the second request went to the full decode worker alone";
  first.join();
  second.join();
  for (const Background* b : {&first, &second}) {
    ASSERT_TRUE(b->answer && b->answer->ok());
    EXPECT_EQ((*b->answer)->status, 200u) << (*b->answer)->body;
  }
  auto metrics = http.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metric_value(metrics->body, R"(kvgate_pd_local_prefills_total{reason="sooner"})"), 0);
  EXPECT_EQ(metric_value(metrics->body, "kvgate_pd_pairs_total"), 2);
}

// A pair whose decode failed is tried again; when the retry goes to a decode worker alone, it
// carries the client's body, not the failed pair's transfer params (blocks already pulled).
TEST_F(PdTest, ARetryOnADecodeAloneCarriesNoParamsOfTheFailedPair) {
  RecordingWorker prefill, decode_a, decode_b;
  prefill.set_whole_answer(
      R"({"id":"cmpl-p","object":"text_completion","choices":[{"index":0,"text":"x",)"
      R"("finish_reason":"length"}],"kv_transfer_params":{"remote_engine_id":"engine-p"}})");
  GatewayConfig c = base_config();
  c.kv_events = false;
  c.pd_disaggregation = true;
  c.pd_protocol = GatewayConfig::PdProtocol::kVllm;
  c.pd_local_prefill_wait_ratio = 1;
  c.prefill_workers = {{.url = prefill.url()}};
  c.decode_workers = {decode_a.url(), decode_b.url()};
  c.max_retries = 2;
  start_gateway(c);
  ASSERT_TRUE(wait_routable(3));
  const auto holds = [](const RecordingWorker& w, std::string_view prompt) {
    for (const auto& q : w.requests()) {
      if (q.method == http::Verb::post && q.body.find(prompt) != std::string::npos) return true;
    }
    return false;
  };
  // The pair's decode is held where it landed.
  const auto release_all = [&] {
    for (RecordingWorker* w : {&prefill, &decode_a, &decode_b}) w->hold_generations(false);
  };
  decode_a.hold_generations(true);
  decode_b.hold_generations(true);
  Background bravo(
      [&] { return client().post("/v1/completions", completion("bravo prompt", 3, false)); },
      release_all);
  ASSERT_TRUE(testing::wait_until(
      [&] { return holds(decode_a, "bravo prompt") || holds(decode_b, "bravo prompt"); }));
  RecordingWorker& failing = holds(decode_a, "bravo prompt") ? decode_a : decode_b;
  RecordingWorker& serving = &failing == &decode_a ? decode_b : decode_a;
  // Another prompt keeps the prefill worker busy, so the retry is sooner on a decode alone.
  prefill.hold_generations(true);
  Background xray(
      [&] { return client().post("/v1/completions", completion("xray prompt", 3, false)); },
      release_all);
  ASSERT_TRUE(testing::wait_until([&] { return holds(prefill, "xray prompt"); }));
  serving.hold_generations(false);
  failing.set_generation_status(503);
  failing.hold_generations(false);
  // The retry needs no prefill: it is answered while the prefill worker still holds the other.
  EXPECT_TRUE(testing::wait_until([&] { return bravo.done.load(); }));
  bravo.join();
  xray.join();
  const auto& retried = bravo.answer;

  ASSERT_TRUE(retried && retried->ok());
  EXPECT_EQ((*retried)->status, 200u) << (*retried)->body;
  EXPECT_EQ((*retried)->header("x-kvgate-worker"), serving.url());
  for (const auto& q : serving.requests()) {
    if (q.method != http::Verb::post || q.body.find("bravo prompt") == std::string::npos) continue;
    EXPECT_EQ(q.body.find("kv_transfer_params"), std::string::npos) << q.body;
  }
  auto http = client();
  auto metrics = http.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_GE(metric_value(metrics->body, R"(kvgate_pd_local_prefills_total{reason="sooner"})"), 1);
}

// An engine that says which protocol it speaks is spoken to in it, whatever the fleet's flag: a
// vLLM NixlConnector prefill on a fleet started for SGLang gets vLLM's sequence.
TEST_F(PdTest, ThePrefillEnginesOwnProtocolWinsOverTheFlag) {
  RecordingWorker prefill, decode;
  prefill.set_server_info(
      R"({"vllm_config":{"kv_transfer_config":{"kv_connector":"NixlConnector","kv_role":"kv_both"}}})");
  prefill.set_whole_answer(
      R"({"id":"cmpl-p","object":"text_completion","choices":[{"index":0,"text":"x",)"
      R"("finish_reason":"length"}],"kv_transfer_params":{"remote_engine_id":"e"}})");
  start_pd(prefill.url(), decode.url(), 2, GatewayConfig::PdProtocol::kSglang);
  auto http = client();
  auto r = http.post("/v1/completions", completion("hello", 3, false));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200u) << r->body;
  for (const auto& w : {&prefill, &decode}) {
    for (const auto& q : w->requests()) {
      if (q.method != http::Verb::post) continue;
      EXPECT_NE(q.body.find("kv_transfer_params"), std::string::npos) << q.body;
      EXPECT_EQ(q.body.find("bootstrap_room"), std::string::npos) << q.body;
    }
  }
}

// A prefill given without its bootstrap port gets the one its SGLang engine says; an engine whose
// role is not the one it was given is still routed as given (and logged).
TEST_F(PdTest, APrefillWithoutItsBootstrapPortGetsTheEnginesOwn) {
  RecordingWorker prefill, decode;
  prefill.set_server_info(
      R"({"disaggregation_mode":"prefill","disaggregation_bootstrap_port":9123})");
  decode.set_server_info(R"({"disaggregation_mode":"prefill"})");
  start_pd(prefill.url(), decode.url(), 2, GatewayConfig::PdProtocol::kSglang,
           /*bootstrap_port=*/0);
  auto http = client();
  auto r = http.post("/v1/completions", completion("hello", 1, false));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200u) << r->body;
  ASSERT_TRUE(received(prefill, 1));
  const auto p = bootstraps(prefill);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].port, 9123u);
  EXPECT_EQ(r->header("x-kvgate-worker"), decode.url());
}

TEST_F(PdTest, PostWorkersTakesRolesThatFitTheFleet) {
  RecordingWorker prefill, decode, added;
  start_pd(prefill.url(), decode.url());
  auto http = client();
  auto regular = http.post("/workers", R"({"url":")" + added.url() + R"("})");
  ASSERT_TRUE(regular.ok());
  EXPECT_EQ(regular->status, 400u) << "a disaggregated fleet takes prefill or decode workers";
  auto wrong_port = http.post(
      "/workers", R"({"url":")" + added.url() + R"(","role":"decode","bootstrap_port":9002})");
  ASSERT_TRUE(wrong_port.ok());
  EXPECT_EQ(wrong_port->status, 400u) << "a bootstrap port is a prefill's";
  auto ok = http.post("/workers",
                      R"({"url":")" + added.url() + R"(","role":"prefill","bootstrap_port":9002})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 201u) << ok->body;
  ASSERT_TRUE(wait_routable(3));
  auto listed = http.get("/workers");
  ASSERT_TRUE(listed.ok());
  EXPECT_NE(listed->body.find(R"("role":"prefill","bootstrap_port":9002,"source":"api")"),
            std::string::npos)
      << listed->body;
  EXPECT_NE(listed->body.find(R"("role":"decode","source":"flags")"), std::string::npos)
      << listed->body;
}

TEST_F(PdTest, ARegularFleetRefusesPrefillAndDecodeWorkers) {
  RecordingWorker w, added;
  serve_regular(w.url());
  auto http = client();
  auto r = http.post("/workers", R"({"url":")" + added.url() + R"(","role":"prefill"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400u) << r->body;
  EXPECT_NE(r->body.find("--pd-disaggregation"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace kvgate::app
