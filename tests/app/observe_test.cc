// What an operator is shown: why a request went where it did (x-kvgate-decision, GET
// /debug/route, the access log), the engine's usage asked for on a client's behalf and kept
// from it, and the dashboard's JSON.
#include <atomic>
#include <mutex>
#include <thread>

#include "app/decision_report.h"
#include "gateway_fixture.h"

namespace kvgate::app {
namespace {

class Observe : public GatewayTest {
 protected:
  // Two workers behind a gateway; true once both are routable.
  bool start_two() {
    start_worker();
    start_worker();
    auto cfg = base_config();
    cfg.worker_urls = {url_of(0), url_of(1)};
    start_gateway(cfg);
    return wait_routable(2);
  }
  // Waits until the index holds a block of either worker (a first answer's KV events applied).
  bool wait_indexed() {
    const auto fleet = gateway_->registry().snapshot();
    return wait_until(
        [&] { return fleet->workers[0]->index_blocks() + fleet->workers[1]->index_blocks() > 0; },
        std::chrono::milliseconds(3000));
  }
};

std::string words(const std::string& tag, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += tag + std::to_string(k) + " ";
  return out;
}

// The value of `field` in a decision text ("k=v; k=v; ..."), "" when absent.
std::string field_of(std::string_view text, std::string_view field) {
  const std::string key = std::string(field) + "=";
  size_t at = text.find(key);
  while (at != std::string_view::npos && at > 0 && text[at - 1] != ' ') at = text.find(key, at + 1);
  if (at == std::string_view::npos) return "";
  const size_t from = at + key.size();
  const size_t end = text.find(';', from);
  return std::string(text.substr(from, end == std::string_view::npos ? end : end - from));
}

TEST(DecisionHeaders, ModesAndTheRequestsAsk) {
  EXPECT_EQ(*parse_decision_headers("request"), DecisionHeaders::kRequest);
  EXPECT_FALSE(parse_decision_headers("sometimes").ok());
  EXPECT_TRUE(wants_decision(DecisionHeaders::kRequest, "1"));
  EXPECT_TRUE(wants_decision(DecisionHeaders::kRequest, "true"));
  EXPECT_FALSE(wants_decision(DecisionHeaders::kRequest, ""));
  EXPECT_FALSE(wants_decision(DecisionHeaders::kOff, "1"));
  EXPECT_TRUE(wants_decision(DecisionHeaders::kAlways, ""));
}

TEST_F(Observe, TheAnswerSaysWhyItWentThereWhenAsked) {
  ASSERT_TRUE(start_two());
  auto c = client();
  const std::string prompt = words("why", 200);
  ASSERT_TRUE(c.post("/v1/completions", completion(prompt)).ok());
  // The KV events of the first answer reach the index before the second decision.
  ASSERT_TRUE(wait_indexed());

  // Not asked: no header.
  auto plain = c.post("/v1/completions", completion(prompt));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->header(kDecisionHeader), "");

  for (const bool stream : {false, true}) {
    http::ClientRequest asked{.method = http::Verb::post,
                              .target = "/v1/completions",
                              .body = completion(prompt, 4, stream)};
    asked.headers.emplace_back(std::string(kExplainRequestHeader), "1");
    auto r = c.request(asked);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u);
    const std::string text(r->header(kDecisionHeader));
    ASSERT_FALSE(text.empty()) << "stream " << stream;
    EXPECT_EQ(field_of(text, "policy"), "cache_aware");
    EXPECT_EQ(field_of(text, "branch"), "affinity") << text;
    EXPECT_EQ(field_of(text, "worker"), std::string(r->header("x-kvgate-worker"))) << text;
    EXPECT_EQ(field_of(text, "candidates"), "2");
    EXPECT_EQ(field_of(text, "overloaded"), "0");
    // 200 words: about 400 tokens, 25 blocks of 16, every one held by the chosen worker.
    const std::string matched = field_of(text, "matched");
    const size_t slash = matched.find('/');
    ASSERT_NE(slash, std::string::npos) << text;
    EXPECT_GE(std::stoi(matched.substr(0, slash)), 20) << text;
    // The chosen worker first, with its expected wait; the other holds nothing.
    const std::string top = text.substr(text.find("top=") + 4);
    EXPECT_EQ(top.rfind(std::string(r->header("x-kvgate-worker")) + " matched=", 0), 0u) << top;
    EXPECT_NE(top.find(" wait_us="), std::string::npos) << top;
    EXPECT_NE(top.find(", "), std::string::npos) << top;
    EXPECT_NE(top.find(" matched=0 "), std::string::npos) << top;
  }
}

TEST_F(Observe, DecisionHeadersAlwaysOrNever) {
  for (const char* mode : {"always", "off"}) {
    ASSERT_TRUE(start(1, [&](GatewayConfig& c) { c.decision_headers = mode; })) << mode;
    auto c = client();
    http::ClientRequest asked{
        .method = http::Verb::post, .target = "/v1/completions", .body = completion("hello")};
    asked.headers.emplace_back(std::string(kExplainRequestHeader), "1");
    auto r = c.request(asked);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->header(kDecisionHeader).empty(), std::string(mode) == "off") << mode;
    auto unasked = c.post("/v1/completions", completion("hello"));
    ASSERT_TRUE(unasked.ok());
    EXPECT_EQ(unasked->header(kDecisionHeader).empty(), std::string(mode) == "off") << mode;
    TearDown();
    fleets_.clear();
  }
  GatewayConfig bad = base_config();
  bad.decision_headers = "sometimes";
  auto g = Gateway::create(bad);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("--decision-headers"), std::string_view::npos);
}

TEST_F(Observe, DebugRouteAnswersTheDecisionWithoutSendingIt) {
  ASSERT_TRUE(start_two());
  auto c = client();
  const std::string prompt = words("debug", 200);
  auto sent = c.post("/v1/completions", completion(prompt));
  ASSERT_TRUE(sent.ok());
  const std::string holder(sent->header("x-kvgate-worker"));
  ASSERT_TRUE(wait_indexed());
  const auto fleet = gateway_->registry().snapshot();
  const uint64_t dispatched = fleet->workers[0]->dispatched() + fleet->workers[1]->dispatched();

  auto r = c.post("/debug/route", completion(prompt));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200u) << r->body;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(r->body).get(doc), simdjson::SUCCESS) << r->body;
  EXPECT_EQ(doc["api"].get_string().value(), "completions");
  EXPECT_GT(doc["prompt_tokens"].get_uint64().value(), 300u);
  EXPECT_GT(doc["predicted_cached_tokens"].get_uint64().value(), 300u);
  const auto d = doc["decision"];
  EXPECT_EQ(d["branch"].get_string().value(), "affinity");
  EXPECT_EQ(d["worker"].get_string().value(), holder);
  EXPECT_EQ(d["candidates"].get_uint64().value(), 2u);
  EXPECT_EQ(d["gates"]["vetoed"].get_uint64().value(), 0u);
  simdjson::dom::array top;
  ASSERT_EQ(d["top"].get_array().get(top), simdjson::SUCCESS);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_TRUE(top.at(0)["chosen"].get_bool().value());
  EXPECT_EQ(top.at(0)["worker"].get_string().value(), holder);
  EXPECT_LT(top.at(0)["expected_wait_us"].get_double().value(),
            top.at(1)["expected_wait_us"].get_double().value());
  EXPECT_EQ(std::string(doc["header"].get_string().value()).rfind("policy=cache_aware;", 0), 0u);
  // Nothing went to a worker.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(fleet->workers[0]->dispatched() + fleet->workers[1]->dispatched(), dispatched);

  // A chat body is routed as a chat completion; GET takes a body too.
  http::ClientRequest chat{
      .method = http::Verb::get,
      .target = "/debug/route",
      .body = R"({"model":"mock-8b","messages":[{"role":"user","content":"hi"}]})"};
  auto rc = c.request(chat);
  ASSERT_TRUE(rc.ok());
  ASSERT_EQ(rc->status, 200u) << rc->body;
  EXPECT_NE(rc->body.find(R"("api":"chat_completions")"), std::string::npos) << rc->body;

  // Bad input is refused as a generation would be.
  auto bad = c.post("/debug/route", "{not json");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400u);
  auto unknown = c.post("/debug/route", R"({"model":"nope","prompt":"x"})");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 404u);
}

// Worker URLs are the fleet's internal addresses: an answer names its worker only when its
// decision is told (or with --expose-worker-header), streamed or whole.
TEST_F(Observe, AnAnswerNamesItsWorkerOnlyWhenAskedOrExposed) {
  for (const bool exposed : {false, true}) {
    ASSERT_TRUE(start(1, [&](GatewayConfig& c) { c.expose_worker_header = exposed; }));
    auto c = client();
    for (const bool stream : {false, true}) {
      auto plain = c.post("/v1/completions", completion("where did it go", 2, stream));
      ASSERT_TRUE(plain.ok());
      ASSERT_EQ(plain->status, 200u) << plain->body;
      EXPECT_EQ(plain->header("x-kvgate-worker"), exposed ? url_of(0) : "") << stream;
      http::ClientRequest asked{.method = http::Verb::post,
                                .target = "/v1/completions",
                                .body = completion("where did it go, say", 2, stream)};
      asked.headers.emplace_back("x-kvgate-explain", "1");
      auto told = c.request(asked);
      ASSERT_TRUE(told.ok());
      EXPECT_EQ(told->header("x-kvgate-worker"), url_of(0)) << stream;
    }
    auto info = c.get("/get_model_info");
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->header("x-kvgate-worker"), exposed ? url_of(0) : "");
    gateway_->stop(std::chrono::milliseconds(2000));
    gateway_.reset();  // (the next round starts a worker it does not use)
  }
}

// A prompt still being computed counts as cached on its worker (pending, before any KV event),
// so a request sharing its prefix goes there; once the events confirm it, none of it is pending.
TEST_F(Observe, APromptInFlightIsCreditedToItsWorkerUntilItsEventsConfirmIt) {
  ASSERT_TRUE(start_two());
  const std::string prompt = words("in flight", 300);
  // Both engines frozen: the first request waits on its worker, with no event yet.
  for (size_t i = 0; i < 2; ++i) {
    http::SyncClient admin("127.0.0.1", worker_port(i));
    ASSERT_TRUE(admin.post("/admin/fault/pause", R"({"paused":true,"duration_ms":20000})").ok());
  }
  std::atomic<unsigned> status{0};
  std::thread first([&] {
    http::SyncClient c("127.0.0.1", gateway_->port());
    auto r = c.post("/v1/completions", completion(prompt));
    status = r.ok() ? r->status : 1;
  });
  const auto fleet = gateway_->registry().snapshot();
  ASSERT_TRUE(wait_until(
      [&] { return fleet->workers[0]->in_flight() + fleet->workers[1]->in_flight() == 1; },
      std::chrono::milliseconds(3000)));
  const std::string holder = fleet->workers[0]->in_flight() == 1 ? url_of(0) : url_of(1);

  const auto route = [&](simdjson::dom::parser& p, simdjson::dom::element& doc) {
    auto c = client();
    auto r = c.post("/debug/route", completion(prompt + "and a question of its own"));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u) << r->body;
    ASSERT_EQ(p.parse(r->body).get(doc), simdjson::SUCCESS) << r->body;
  };
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  route(p, doc);
  EXPECT_EQ(doc["decision"]["worker"].get_string().value(), holder);
  EXPECT_EQ(doc["decision"]["branch"].get_string().value(), "affinity");
  const uint64_t matched = doc["decision"]["matched_blocks"].get_uint64().value();
  EXPECT_GT(matched, 30u);
  EXPECT_EQ(doc["decision"]["pending_blocks"].get_uint64().value(), matched);
  EXPECT_NE(std::string(doc["header"].get_string().value()).find("; pending="), std::string::npos);
  EXPECT_EQ(doc["decision"]["top"].at(0)["pending_blocks"].get_uint64().value(), matched);

  for (size_t i = 0; i < 2; ++i) {
    http::SyncClient admin("127.0.0.1", worker_port(i));
    ASSERT_TRUE(admin.post("/admin/fault/pause", R"({"paused":false})").ok());
  }
  first.join();
  ASSERT_EQ(status.load(), 200u);
  ASSERT_TRUE(wait_indexed());
  ASSERT_TRUE(wait_until(
      [&] {
        simdjson::dom::parser q;
        simdjson::dom::element d;
        route(q, d);
        return d["decision"]["pending_blocks"].get_uint64().value() == 0 &&
               d["decision"]["matched_blocks"].get_uint64().value() == matched;
      },
      std::chrono::milliseconds(3000)))
      << "the events confirm every block the credit gave";
  const std::string m = gateway_->metrics_text();
  EXPECT_EQ(metric_value(m, R"(kvgate_completion_tokens_total{model="mock-8b"})"), 4)
      << "the answer's max_tokens, under its model";
  EXPECT_NE(m.find(R"(kvgate_router_pending_credits_total{event="credited"} 1)"), std::string::npos)
      << m.substr(m.find("kvgate_router_pending"), 600);
}

// A prefix one worker keeps only on its host tier (its device evicted it) and another on its
// device: both match as deep, the host's copy must be loaded first, so the device's wins and the
// decision shows the other's match as offloaded.
TEST_F(Observe, AMatchOnTheHostTierIsShownAndLosesToTheSameOnTheDevice) {
  for (int i = 0; i < 2; ++i) {
    start_worker_with([](mock::FleetOptions& o) {
      o.engine.num_blocks = 64;  // 1,024 tokens of 16
      o.engine.host_blocks = 2048;
    });
  }
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0), url_of(1)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(2));
  const std::string prompt = words("tiered", 150);
  for (size_t i = 0; i < 2; ++i) {
    http::SyncClient direct("127.0.0.1", worker_port(i));
    ASSERT_EQ(direct.post("/v1/completions", completion(prompt))->status, 200u);
  }
  // Worker 0's device fills with other prompts: the shared one is left on its host tier only.
  http::SyncClient w0("127.0.0.1", worker_port(0));
  for (int k = 0; k < 6; ++k) {
    ASSERT_EQ(
        w0.post("/v1/completions", completion(words("filler" + std::to_string(k), 150)))->status,
        200u);
  }
  const std::string asked = prompt + "and a question of its own";
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  std::string body;
  ASSERT_TRUE(wait_until(
      [&] {
        auto r = client().post("/debug/route", completion(asked));
        if (!r.ok() || r->status != 200) return false;
        body = r->body;
        if (p.parse(body).get(doc) != simdjson::SUCCESS) return false;
        uint64_t offloaded = 0;
        simdjson::dom::array top;
        if (doc["decision"]["top"].get(top) != simdjson::SUCCESS) return false;
        for (auto c : top) {
          if (c["worker"].get_string().value() == url_of(0)) {
            offloaded = c["offloaded_blocks"].get_uint64().value();
          }
        }
        return offloaded > 10;
      },
      std::chrono::milliseconds(5000)))
      << body;
  EXPECT_EQ(doc["decision"]["worker"].get_string().value(), url_of(1)) << body;
  EXPECT_EQ(doc["decision"]["branch"].get_string().value(), "affinity") << body;
  simdjson::dom::array top;
  ASSERT_EQ(doc["decision"]["top"].get(top), simdjson::SUCCESS) << body;
  EXPECT_EQ(top.at(0)["matched_blocks"].get_uint64().value(),
            top.at(1)["matched_blocks"].get_uint64().value())
      << body;
  EXPECT_LT(top.at(0)["expected_wait_us"].get_double().value(),
            top.at(1)["expected_wait_us"].get_double().value())
      << body;
  EXPECT_NE(std::string(doc["header"].get_string().value()).find(" offloaded="), std::string::npos)
      << body;
}

// Each worker's prefill rate is learned from its streams' first tokens: a worker at half the
// speed shows a rate well under the other's (round_robin, so both get the same prompts).
TEST_F(Observe, EachWorkersPrefillRateIsLearnedFromItsStreamsFirstTokens) {
  start_worker(/*speedup=*/4);
  start_worker(/*speedup=*/2);
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0), url_of(1)};
  cfg.policy = policy::PolicyKind::kRoundRobin;
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(2));
  auto c = client();
  for (int i = 0; i < 8; ++i) {  // about 12,000 tokens each: 150 ms of prefill, or 300
    auto r =
        c.post("/v1/completions", completion(words("rate" + std::to_string(i), 6000), 1, true));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u) << r->body;
  }
  const auto fleet = gateway_->registry().snapshot();
  const auto rate_of = [&](const std::string& url) {
    for (const auto& w : fleet->workers) {
      if (w->url() == url) return static_cast<double>(w->prefill_rate());
    }
    return 0.0;
  };
  const double fast = rate_of(url_of(0)), slow = rate_of(url_of(1));
  EXPECT_GT(slow, 0);
  std::printf("learned prefill rates: %.0f and %.0f tokens/s\n", fast, slow);
  EXPECT_GT(fast, 1.25 * slow) << fast << " vs " << slow;
  EXPECT_LT(fast, 2.5 * slow) << fast << " vs " << slow;
  EXPECT_GT(metric_value(gateway_->metrics_text(),
                         "kvgate_worker_prefill_tokens_per_second{worker=\"" + url_of(1) + "\"}"),
            0);
}

// The access log carries the decision's fields on every line, and its explanation (what
// x-kvgate-decision says) when the request asked for it: explaining costs, so only then.
TEST_F(Observe, TheAccessLogCarriesTheDecisionAndItsTextWhenAsked) {
  std::mutex mu;
  std::vector<std::string> lines;
  ASSERT_TRUE(start(1, [&](GatewayConfig& c) {
    c.access_log = "text";
    c.access_log_sink = [&](std::string_view line) {
      std::lock_guard<std::mutex> l(mu);
      lines.emplace_back(line);
    };
  }));
  auto c = client();
  ASSERT_TRUE(c.post("/v1/completions", completion("log why")).ok());
  http::ClientRequest asked{.method = http::Verb::post,
                            .target = "/v1/completions",
                            .body = completion("log why, and say")};
  asked.headers.emplace_back("x-kvgate-explain", "1");
  ASSERT_TRUE(c.request(asked).ok());
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return lines.size() == 2;
      },
      std::chrono::milliseconds(2000)));
  std::lock_guard<std::mutex> l(mu);
  for (const std::string& line : lines) {
    EXPECT_NE(line.find(" branch=fresh_prefix"), std::string::npos) << line;
    EXPECT_NE(line.find(" matched=0 decision_us="), std::string::npos) << line;
  }
  EXPECT_EQ(lines[0].find(" decision=\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(
                " decision=\"policy=cache_aware; branch=fresh_prefix; worker=" + url_of(0) + ";"),
            std::string::npos)
      << lines[1];
}

TEST_F(Observe, AStreamsUsageIsAskedForAndKeptFromAClientThatDidNotAsk) {
  ASSERT_TRUE(start(1));
  auto c = client();
  const std::string prompt = words("usage", 200);
  ASSERT_TRUE(c.post("/v1/completions", completion(prompt)).ok());
  const auto fleet = gateway_->registry().snapshot();
  workers::Worker& w = *fleet->workers[0];
  ASSERT_TRUE(wait_until([&] { return w.index_blocks() > 0; }, std::chrono::milliseconds(3000)));
  const uint64_t reported = w.cache_agreement().reported_total();

  auto r = c.post("/v1/completions", completion(prompt, 4, /*stream=*/true));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200u);
  EXPECT_EQ(r->body.find("\"usage\""), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("data: [DONE]\n\n"), std::string::npos) << r->body;
  EXPECT_GE(r->body.find("\"finish_reason\":\"length\""), 0u);
  // The engine's usage reached the gateway all the same.
  EXPECT_GT(w.cache_agreement().reported_total(), reported);

  // A client that asked gets its usage.
  std::string body = completion(prompt, 4, /*stream=*/true);
  body.insert(body.size() - 1, R"(,"stream_options":{"include_usage":true})");
  auto asked = c.post("/v1/completions", body);
  ASSERT_TRUE(asked.ok());
  EXPECT_NE(asked->body.find("\"usage\""), std::string::npos) << asked->body;
}

// A streamed answer's bytes are copied at most once on their way through, and with whole events
// next to never: the counter of copied bytes stays far below the relayed ones.
TEST_F(Observe, AStreamedPieceIsCopiedAtMostOnce) {
  ASSERT_TRUE(start(1));
  auto c = client();
  uint64_t received = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = c.post("/v1/completions",
                    completion(words("copies" + std::to_string(i), 100), 200, /*stream=*/true));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u);
    received += r->body.size();
  }
  // A stream is counted as its handler ends, a moment after its client has the last byte.
  double relayed = 0, copied = 0;
  EXPECT_TRUE(wait_until([&] {
    const std::string text = gateway_->metrics_text();
    relayed = metric_value(text, "kvgate_stream_bytes_total{kind=\"relayed\"}");
    copied = metric_value(text, "kvgate_stream_bytes_total{kind=\"copied\"}");
    return relayed >= static_cast<double>(received);
  })) << "relayed "
      << relayed << " of the " << received << " bytes received";
  EXPECT_LE(copied, relayed);
  EXPECT_LT(copied, 0.05 * relayed) << "only the usage and its last piece";
}

TEST_F(Observe, TheDashboardStateShowsTheFleetAndItsRecentPast) {
  ASSERT_TRUE(start_two());
  auto c = client();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        c.post("/v1/completions", completion(words("dash" + std::to_string(i % 4), 100))).ok());
  }
  // Until the pulse's samples (one a second) hold the traffic and the events it made.
  const auto holds_traffic = [&] {
    auto state = c.get("/dashboard/state");
    simdjson::dom::parser p;
    simdjson::dom::element d;
    if (!state.ok() || p.parse(state->body).get(d) != simdjson::SUCCESS) return false;
    const auto f = d["fleet"];
    return d["series"]["t"].get_array().size() >= 2 &&
           f["requests_per_second"].get_double().value() > 0 &&
           f["decision_p99_us"].get_double().value() > 0 &&
           f["hit_ratio"].get_double().value() > 0.5 &&
           f["events"]["apply_lag_p99_ms"].get_double().value() > 0;
  };
  EXPECT_TRUE(wait_until(holds_traffic, std::chrono::seconds(10), std::chrono::milliseconds(50)));
  auto r = c.get("/dashboard/state");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200u);
  EXPECT_EQ(r->header("content-type"), "application/json");
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(r->body).get(doc), simdjson::SUCCESS) << r->body;
  EXPECT_EQ(doc["policy"].get_string().value(), "cache_aware");
  EXPECT_TRUE(doc["ready"].get_bool().value());
  const auto f = doc["fleet"];
  EXPECT_EQ(f["workers"].get_uint64().value(), 2u);
  EXPECT_EQ(f["routable"].get_uint64().value(), 2u);
  EXPECT_GT(f["requests_per_second"].get_double().value(), 0.0) << r->body;
  EXPECT_GT(f["decision_p99_us"].get_double().value(), 0.0) << r->body;
  // 20 requests over 4 prompts: 16 found their prefix.
  EXPECT_GT(f["hit_ratio"].get_double().value(), 0.5) << r->body;
  EXPECT_EQ(f["events"]["gaps_total"].get_uint64().value(), 0u);
  EXPECT_GT(f["events"]["apply_lag_p99_ms"].get_double().value(), 0.0) << r->body;
  const auto s = doc["series"];
  const size_t points = s["t"].get_array().size();
  EXPECT_GE(points, 2u);
  EXPECT_EQ(s["requests_per_second"].get_array().size(), points);
  EXPECT_EQ(s["hit_ratio"].get_array().size(), points);
  EXPECT_EQ(s["decision_p99_us"].get_array().size(), points);
  simdjson::dom::array ws;
  ASSERT_EQ(doc["workers"].get_array().get(ws), simdjson::SUCCESS);
  ASSERT_EQ(ws.size(), 2u);
  double share = 0;
  uint64_t requests = 0;
  for (auto w : ws) {
    EXPECT_TRUE(w["routable"].get_bool().value());
    EXPECT_EQ(w["health"].get_string().value(), "healthy");
    EXPECT_EQ(w["liveness"].get_string().value(), "live");
    EXPECT_EQ(w["circuit_breaker"].get_string().value(), "closed");
    share += w["decision_share"].get_double().value();
    requests += w["requests"].get_uint64().value();
    // A figure in [0, 1], or none with its reason (a worker no cached prompt reached).
    const auto agreement = w["cached_tokens"]["agreement"];
    if (agreement.is_null()) {
      EXPECT_FALSE(w["cached_tokens"]["agreement_missing_reason"].get_string().value().empty());
    } else {
      EXPECT_GE(agreement.get_double().value(), 0.0);
      EXPECT_LE(agreement.get_double().value(), 1.0);
    }
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  EXPECT_EQ(requests, 20u);
  EXPECT_EQ(std::string(ws.at(0)["url"].get_string().value()), url_of(0));

  // The page: one self-contained document.
  auto page = c.get("/dashboard");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->status, 200u);
  EXPECT_EQ(page->header("content-type").rfind("text/html", 0), 0u);
  EXPECT_NE(page->body.find("dashboard/state"), std::string::npos);
  for (const char* external : {"src=\"http", "href=\"http", "@import", "src='http"}) {
    EXPECT_EQ(page->body.find(external), std::string::npos) << external;
  }
}

TEST_F(Observe, TheDashboardStateIsBehindTheClientKeyAndThePageIsNot) {
  ASSERT_TRUE(start(1, [](GatewayConfig& c) { c.api_key = "sekret"; }));
  auto c = client();
  auto state = c.get("/dashboard/state");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->status, 401u);
  http::ClientRequest keyed{.method = http::Verb::get, .target = "/dashboard/state"};
  keyed.headers.emplace_back("authorization", "Bearer sekret");
  auto ok = c.request(keyed);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200u);
  auto page = c.get("/dashboard");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->status, 200u);
}

}  // namespace
}  // namespace kvgate::app
