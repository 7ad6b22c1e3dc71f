// What reaches an engine of the client's credentials and the gateway's: with --api-key the key
// that guards the gateway never leaves it; engines get their own credential (--worker-api-key, or
// a worker's own from its URL or POST /workers, never shown back) on every request the gateway
// sends them; --forward-client-authorization passes a client's own header on where an engine
// checks per-user keys. Each worker here records every request it receives.
#include "app/gateway_fixture.h"
#include "support/recording_worker.h"

namespace kvgate::app {
namespace {

using testing::RecordingWorker;
constexpr char kGatewayKey[] = "sk-gateway-secret";

// Every Authorization value the worker received, and whether it received a generation at all.
std::vector<std::string> authorizations(const RecordingWorker& w, bool* generated) {
  std::vector<std::string> out;
  *generated = false;
  for (const auto& r : w.requests()) {
    out.push_back(r.field("authorization"));
    *generated |= r.method == http::Verb::post;
  }
  return out;
}

class CredentialsTest : public GatewayTest {
 protected:
  static http::ClientRequest completion_with_key(const std::string& key, bool stream = false) {
    http::ClientRequest r{.method = http::Verb::post,
                          .target = "/v1/completions",
                          .body = completion("hello", 1, stream)};
    r.headers.emplace_back("authorization", "Bearer " + key);
    return r;
  }

  // Starts a gateway (`tweak` applied) on `workers`, waits until all are routable, and sends one
  // whole and one streamed completion with the gateway's key.
  void serve_two(const std::vector<std::string>& workers,
                 const std::function<void(GatewayConfig&)>& tweak) {
    GatewayConfig c = base_config();
    c.kv_events = false;
    c.api_key = kGatewayKey;
    c.worker_urls = workers;
    tweak(c);
    start_gateway(c);
    ASSERT_TRUE(wait_routable(workers.size()));
    auto http = client();
    for (const bool stream : {false, true}) {
      auto r = http.request(completion_with_key(kGatewayKey, stream));
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->status, 200u) << r->body;
    }
  }
};

TEST_F(CredentialsTest, TheGatewaysKeyReachesNoEngine) {
  RecordingWorker w;
  serve_two({w.url()}, [](GatewayConfig&) {});
  bool generated = false;
  for (const std::string& a : authorizations(w, &generated)) EXPECT_EQ(a, "") << a;
  EXPECT_TRUE(generated);
}

TEST_F(CredentialsTest, EnginesGetTheirOwnKeyOnEveryRequest) {
  RecordingWorker w;
  serve_two({w.url()}, [](GatewayConfig& c) { c.worker_api_key = "sk-engines"; });
  bool generated = false;
  const auto seen = authorizations(w, &generated);
  EXPECT_TRUE(generated);
  ASSERT_GE(seen.size(), 4u) << "health, models, two generations at least";
  for (const std::string& a : seen) EXPECT_EQ(a, "Bearer sk-engines");
}

TEST_F(CredentialsTest, AWorkersOwnKeyIsUsedAndNeverShown) {
  RecordingWorker fleet_keyed;
  RecordingWorker own_keyed;
  serve_two({fleet_keyed.url()}, [](GatewayConfig& c) { c.worker_api_key = "sk-fleet"; });
  auto c = client();
  const std::string body = R"({"url":")" + own_keyed.url() + R"(","api_key":"sk-own-worker"})";
  auto added = c.post("/workers", body);
  ASSERT_TRUE(added.ok());
  ASSERT_EQ(added->status, 201u) << added->body;
  EXPECT_EQ(added->body.find("sk-own"), std::string::npos) << added->body;
  ASSERT_TRUE(wait_routable(2));
  http::ClientRequest list{.method = http::Verb::get, .target = "/workers"};
  list.headers.emplace_back("authorization", std::string("Bearer ") + kGatewayKey);
  auto shown = c.request(list);
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->body.find("sk-own"), std::string::npos) << shown->body;
  EXPECT_EQ(shown->body.find("sk-fleet"), std::string::npos) << shown->body;
  bool generated = false;
  for (const std::string& a : authorizations(own_keyed, &generated)) {
    EXPECT_EQ(a, "Bearer sk-own-worker");
  }
  for (const std::string& a : authorizations(fleet_keyed, &generated)) {
    EXPECT_EQ(a, "Bearer sk-fleet");
  }
  // A key that cannot be a header value is refused.
  RecordingWorker bad;
  auto refused = c.post("/workers", R"({"url":")" + bad.url() + R"(","api_key":"a\r\nx: y"})");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 400u) << refused->body;
}

// The generations `w` received each carried the client's own header.
void expect_client_header_forwarded(const RecordingWorker& w) {
  size_t forwarded = 0;
  for (const auto& r : w.requests()) {
    if (r.method != http::Verb::post) continue;
    EXPECT_EQ(r.field("authorization"), std::string("Bearer ") + kGatewayKey);
    ++forwarded;
  }
  EXPECT_EQ(forwarded, 2u);
}

TEST_F(CredentialsTest, ForwardingTheClientsHeaderIsTheOperatorsChoice) {
  RecordingWorker w;
  serve_two({w.url()}, [](GatewayConfig& c) { c.forward_client_authorization = true; });
  expect_client_header_forwarded(w);
}

TEST_F(CredentialsTest, WithoutAGatewayKeyTheClientsHeaderIsTheEnginesToCheck) {
  RecordingWorker w;
  serve_two({w.url()}, [](GatewayConfig& c) { c.api_key.clear(); });
  expect_client_header_forwarded(w);
}

// Trace context goes along by default; --forward-headers names what else does (and replaces the
// default); anything else a client sends stays with the gateway.
TEST_F(CredentialsTest, OnlyTheHeadersNamedToBeForwardedReachTheEngine) {
  const std::vector<std::string> sent = {"traceparent", "x-trace-id", "openai-beta",
                                         "x-internal-note"};
  struct Case {
    std::vector<std::string> forward;  // empty: the default
    std::vector<std::string> reach;
  };
  for (const Case& c : {Case{{}, {"traceparent"}},
                        Case{{"x-trace-id", "openai-beta"}, {"x-trace-id", "openai-beta"}}}) {
    RecordingWorker w;
    serve_two({w.url()}, [&](GatewayConfig& g) {
      if (!c.forward.empty()) g.forward_headers = c.forward;
    });
    http::ClientRequest r = completion_with_key(kGatewayKey);
    for (const std::string& h : sent) r.headers.emplace_back(h, "value of " + h);
    auto http = client();
    auto answer = http.request(r);
    ASSERT_TRUE(answer.ok());
    ASSERT_EQ(answer->status, 200u) << answer->body;
    ASSERT_FALSE(w.requests().empty());
    const RecordingWorker::Received got = w.requests().back();
    for (const std::string& h : sent) {
      const bool reaches = std::find(c.reach.begin(), c.reach.end(), h) != c.reach.end();
      EXPECT_EQ(got.field(h), reaches ? "value of " + h : "") << h;
    }
    EXPECT_FALSE(got.field("x-request-id").empty());
    gateway_->stop(std::chrono::milliseconds(2000));
    gateway_.reset();
  }
}

}  // namespace
}  // namespace kvgate::app
