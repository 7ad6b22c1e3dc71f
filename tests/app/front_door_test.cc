// What every client-facing answer carries: a request id (the client's own, or one made here) on
// every answer, and on streamed answers the headers that keep proxies in front from buffering.
#include "app/gateway_fixture.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/string.hpp"
#include "support/test_certs.h"

namespace kvgate::app {
namespace {

namespace net = boost::asio;

using FrontDoorTest = GatewayTest;

// One HTTP/1.1 request from a socket bound to `source` (127.0.0.2 stands in for a remote peer);
// the response's status, 0 when none came.
unsigned status_from(const std::string& source, uint16_t port, const std::string& method,
                     const std::string& target, const std::string& body,
                     const std::string& authorization = {}, std::string* whole = nullptr) {
  net::io_context ctx;
  net::ip::tcp::socket s(ctx);
  boost::system::error_code ec;
  s.open(net::ip::tcp::v4(), ec);
  s.bind({net::ip::make_address(source), 0}, ec);
  if (ec) return 0;
  s.connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return 0;
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  if (!authorization.empty()) req += "Authorization: " + authorization + "\r\n";
  req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
  net::write(s, net::buffer(req), ec);
  std::string answer;
  char buf[4096];
  for (;;) {
    const size_t n = s.read_some(net::buffer(buf), ec);
    answer.append(buf, n);
    if (ec) break;
  }
  if (whole != nullptr) *whole = answer;
  if (answer.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return static_cast<unsigned>(std::stoi(answer.substr(9, 3)));
}

// Load balancers and uptime checks probe with HEAD: the probes answer it as GET, without a body;
// a method a route does not take gets 405 with the methods it does in Allow.
TEST_F(FrontDoorTest, ProbesAnswerHeadAndA405SaysWhatIsAllowed) {
  ASSERT_TRUE(start(1));
  for (const char* path : {"/health", "/readiness", "/liveness", "/metrics"}) {
    std::string answer;
    EXPECT_EQ(status_from("127.0.0.1", gateway_->port(), "HEAD", path, "", {}, &answer), 200u)
        << path << ": " << answer;
    const size_t head_end = answer.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << path;
    EXPECT_EQ(answer.size(), head_end + 4) << path << ": a body came: " << answer;
    EXPECT_NE(answer.find("Content-Length: "), std::string::npos) << path << ": " << answer;
  }
  std::string answer;
  EXPECT_EQ(status_from("127.0.0.1", gateway_->port(), "DELETE", "/health", "", {}, &answer), 405u);
  EXPECT_NE(answer.find("Allow: GET, HEAD\r\n"), std::string::npos) << answer;
}

TEST_F(FrontDoorTest, ClientsNeedTheApiKeyWhenOneIsSet) {
  ASSERT_TRUE(start(1, [](GatewayConfig& c) { c.api_key = "sk-test-key"; }));
  http::SyncClient c("127.0.0.1", gateway_->port());
  auto none = c.post("/v1/completions", completion("hello", 4));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->status, 401u);
  EXPECT_NE(none->body.find("\"error\""), std::string::npos) << none->body;
  http::ClientRequest wrong{
      .method = http::Verb::post, .target = "/v1/completions", .body = completion("hello", 4)};
  wrong.headers.emplace_back("x-request-id", "refused-1");
  wrong.headers.emplace_back("authorization", "Bearer sk-wrong");
  auto w = c.request(wrong);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->status, 401u);
  EXPECT_EQ(w->header("x-request-id"), "refused-1") << "a refusal carries the request's id";
  http::ClientRequest right = wrong;
  right.headers.back().second = "Bearer sk-test-key";
  auto r = c.request(right);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u) << r->body;
  // Probes need no key.
  auto h = c.get("/health");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status, 200u);
}

TEST_F(FrontDoorTest, ControlRoutesRefuseARemotePeerWithoutTheAdminKey) {
  ASSERT_TRUE(start(2));
  const uint16_t port = gateway_->port();
  const std::string add = R"({"url":")" + url_of(1) + R"("})";
  EXPECT_EQ(status_from("127.0.0.2", port, "POST", "/workers", add), 403u);
  EXPECT_EQ(status_from("127.0.0.2", port, "DELETE", "/workers?url=" + url_of(0), ""), 403u);
  EXPECT_EQ(status_from("127.0.0.2", port, "GET", "/workers", ""), 200u) << "reading is a client's";
  EXPECT_EQ(gateway_->registry().snapshot()->workers.size(), 1u);
  EXPECT_EQ(status_from("127.0.0.1", port, "POST", "/workers", add), 201u);
}

TEST_F(FrontDoorTest, ControlRoutesWithAnAdminKeyTakeItFromAnyPeer) {
  ASSERT_TRUE(start(2, [](GatewayConfig& c) { c.admin_api_key = "admin-key"; }));
  const uint16_t port = gateway_->port();
  const std::string add = R"({"url":")" + url_of(1) + R"("})";
  EXPECT_EQ(status_from("127.0.0.1", port, "POST", "/workers", add), 401u);
  EXPECT_EQ(status_from("127.0.0.2", port, "POST", "/workers", add, "Bearer wrong"), 401u);
  EXPECT_EQ(status_from("127.0.0.2", port, "POST", "/workers", add, "Bearer admin-key"), 201u);
}

TEST_F(FrontDoorTest, StreamedAnswersTellProxiesNotToBuffer) {
  ASSERT_TRUE(start());
  http::SyncClient c("127.0.0.1", gateway_->port());
  auto r = c.stream({.method = http::Verb::post,
                     .target = "/v1/completions",
                     .body = completion("tell me a story", 8, /*stream=*/true)},
                    [](std::string_view) { return Status(); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->header("cache-control"), "no-cache");
  EXPECT_EQ(r->header("x-accel-buffering"), "no");
  EXPECT_NE(r->header("content-type").find("text/event-stream"), std::string_view::npos);
}

TEST_F(FrontDoorTest, RequestIdIsTheClientsOrMadeHereAndComesBackOnEveryAnswer) {
  ASSERT_TRUE(start());
  http::SyncClient c("127.0.0.1", gateway_->port());
  http::ClientRequest given{
      .method = http::Verb::post, .target = "/v1/completions", .body = completion("hello", 4)};
  given.headers.emplace_back("x-request-id", "client-chosen-42");
  auto r = c.request(given);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->header("x-request-id"), "client-chosen-42");

  // None given: 32 hex digits, different per request.
  auto a = c.post("/v1/completions", completion("hello", 4));
  auto b = c.post("/v1/completions", completion("hello", 4));
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string ida(a->header("x-request-id")), idb(b->header("x-request-id"));
  EXPECT_EQ(ida.size(), 32u) << ida;
  EXPECT_EQ(ida.find_first_not_of("0123456789abcdef"), std::string::npos) << ida;
  EXPECT_NE(ida, idb);

  // Error answers carry it too.
  http::ClientRequest bad{.method = http::Verb::post, .target = "/v1/completions", .body = "{"};
  bad.headers.emplace_back("x-request-id", "bad-one");
  auto e = c.request(bad);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->status, 400u);
  EXPECT_EQ(e->header("x-request-id"), "bad-one");

  // Every other answer too: probes, models, the fleet, an unknown route, a wrong method; and one
  // id only, the worker's own never beside it. An id with a space is replaced by a made one.
  const std::vector<std::pair<http::Verb, std::string>> others = {
      {http::Verb::get, "/health"},  {http::Verb::get, "/v1/models"},
      {http::Verb::get, "/workers"}, {http::Verb::get, "/no/such/route"},
      {http::Verb::put, "/health"},  {http::Verb::get, "/metrics"}};
  for (const auto& [verb, target] : others) {
    http::ClientRequest q{.method = verb, .target = target};
    q.headers.emplace_back("x-request-id", "probe-7");
    auto res = c.request(q);
    ASSERT_TRUE(res.ok()) << target;
    EXPECT_EQ(res->header("x-request-id"), "probe-7") << target << " " << res->status;
    size_t ids = 0;
    for (size_t i = 0; i < res->headers.size(); ++i)
      ids += boost::beast::iequals(res->headers[i].name, "x-request-id") ? 1 : 0;
    EXPECT_EQ(ids, 1u) << target;
  }
  http::ClientRequest spaced{.method = http::Verb::get, .target = "/health"};
  spaced.headers.emplace_back("x-request-id", "has a space");
  auto made = c.request(spaced);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made->header("x-request-id").size(), 32u);
}

TEST_F(FrontDoorTest, OneModelAndTheVersionAnswerAsClientsExpect) {
  ASSERT_TRUE(start());
  auto c = client();
  auto m = c.get("/v1/models/mock-8b");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->status, 200u);
  EXPECT_NE(m->body.find(R"("id":"mock-8b")"), std::string::npos) << m->body;
  auto missing = c.get("/v1/models/no-such-model");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404u);
  EXPECT_NE(missing->body.find("no-such-model"), std::string::npos) << missing->body;
  auto v = c.get("/version");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->status, 200u);
  EXPECT_NE(v->body.find(kVersion), std::string::npos) << v->body;
}

// curl -d sends application/x-www-form-urlencoded; engines refuse it (422). The gateway has parsed
// the body as JSON and says so upstream.
TEST_F(FrontDoorTest, AJsonBodySentAsAFormReachesTheWorkerAsJson) {
  ASSERT_TRUE(start());
  http::ClientRequest form{.method = http::Verb::post,
                           .target = "/v1/completions",
                           .body = completion("hello", 4),
                           .content_type = "application/x-www-form-urlencoded"};
  http::SyncClient direct("127.0.0.1", worker_port(0));
  auto refused = direct.request(form);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 422u) << "the mock refuses a form body as the engines do";
  auto c = client();
  auto r = c.request(form);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u) << r->body;
}

}  // namespace
}  // namespace kvgate::app

namespace kvgate::app {
namespace {

// Every answered request leaves one access-log line: generation with what the decision knew,
// other routes with method, path, status and duration.
TEST_F(FrontDoorTest, EachRequestLeavesOneAccessLogLine) {
  std::mutex mu;
  std::vector<std::string> lines;
  ASSERT_TRUE(start(1, [&](GatewayConfig& c) {
    c.access_log = "json";
    c.access_log_sink = [&](std::string_view line) {
      std::lock_guard<std::mutex> l(mu);
      lines.emplace_back(line);
    };
  }));
  auto c = client();
  http::ClientRequest gen{.method = http::Verb::post,
                          .target = "/v1/completions",
                          .body = completion("log me", 4, /*stream=*/true)};
  gen.headers.emplace_back("x-request-id", "logged-1");
  ASSERT_TRUE(c.request(gen).ok());
  ASSERT_TRUE(c.get("/v1/models").ok());
  // A line is written once its answer has gone out, so it may trail the client a little.
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return lines.size() >= 2;
      },
      std::chrono::milliseconds(2000)));
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(lines.size(), 2u);
  std::sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return a.find("/v1/completions") != std::string::npos &&
           b.find("/v1/completions") == std::string::npos;
  });
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(lines[0]).get(doc), simdjson::SUCCESS) << lines[0];
  EXPECT_EQ(doc["path"].get_string().value(), "/v1/completions");
  EXPECT_EQ(doc["status"].get_uint64().value(), 200u);
  EXPECT_EQ(doc["model"].get_string().value(), "mock-8b");
  EXPECT_EQ(doc["worker"].get_string().value(), url_of(0));
  EXPECT_EQ(doc["request_id"].get_string().value(), "logged-1");
  EXPECT_EQ(doc["attempts"].get_uint64().value(), 1u);
  EXPECT_GE(doc["decision_us"].get_double().value(), 0.0);
  EXPECT_GT(doc["ttft_ms"].get_double().value(), 0.0);
  EXPECT_GE(doc["duration_ms"].get_double().value(), doc["ttft_ms"].get_double().value());
  EXPECT_EQ(doc["client"].get_string().value(), "127.0.0.1");
  EXPECT_GT(doc["prompt_tokens"].get_int64().value(), 0);
  EXPECT_EQ(doc["completion_tokens"].get_int64().value(), 4);
  EXPECT_EQ(doc["time"].get_string().value().size(), 24u);
  ASSERT_EQ(p.parse(lines[1]).get(doc), simdjson::SUCCESS) << lines[1];
  EXPECT_EQ(doc["method"].get_string().value(), "GET");
  EXPECT_EQ(doc["path"].get_string().value(), "/v1/models");
  EXPECT_EQ(doc["status"].get_uint64().value(), 200u);
  EXPECT_EQ(doc["client"].get_string().value(), "127.0.0.1");
  EXPECT_EQ(doc["request_id"].get_string().value().size(), 32u) << "made here";
}

}  // namespace
}  // namespace kvgate::app

namespace kvgate::app {
namespace {

// HTTPS on both sides of the gateway, with certificates the test makes.
class TlsGatewayTest : public GatewayTest {
 protected:
  void SetUp() override { certs_ = kvgate::testing::make_test_certs(); }
  http::ClientOptions trusting(const std::string& ca) {
    auto tls = http::make_client_tls(ca);
    EXPECT_TRUE(tls.ok()) << tls.status();
    return http::ClientOptions{.tls = *tls};
  }
  // A mock worker serving HTTPS; its https:// URL.
  std::string start_https_worker() {
    start_worker_with([&](mock::FleetOptions& o) {
      o.tls_cert_path = certs_.server_cert;
      o.tls_key_path = certs_.server_key;
    });
    return "https://127.0.0.1:" + std::to_string(worker_port(fleets_.size() - 1));
  }
  // A whole completion of `prompt` and a streamed one through `c`, each answered 200, the stream
  // ending with [DONE]; the stream's head for the caller's own checks.
  static void expect_served(http::SyncClient& c, const std::string& prompt,
                            http::ClientResponse* head) {
    auto whole = c.post("/v1/completions", completion(prompt, 4));
    EXPECT_TRUE(whole.ok()) << whole.status();
    if (whole.ok()) {
      EXPECT_EQ(whole->status, 200u) << whole->body;
    }
    std::string body;
    auto r = c.stream({.method = http::Verb::post,
                       .target = "/v1/completions",
                       .body = completion(prompt, 8, /*stream=*/true)},
                      [&](std::string_view piece) {
                        body += piece;
                        return Status();
                      });
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) *head = std::move(*r);
    EXPECT_EQ(head->status, 200u);
    EXPECT_NE(body.find("data: [DONE]"), std::string::npos) << body;
  }
  kvgate::testing::TestCerts certs_;
};

TEST_F(TlsGatewayTest, TheFrontEndServesHttpsWithStreamsAndProbes) {
  ASSERT_TRUE(start(1, [&](GatewayConfig& c) {
    c.tls_cert_path = certs_.server_cert;
    c.tls_key_path = certs_.server_key;
  }));
  http::SyncClient c("127.0.0.1", gateway_->port(), trusting(certs_.ca_cert));
  http::ClientResponse head;
  expect_served(c, "hello over tls", &head);
  EXPECT_EQ(head.header("cache-control"), "no-cache");
  EXPECT_EQ(head.header("x-accel-buffering"), "no");
  auto health = c.get("/health");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200u);
  // An answer larger than one TLS record (16 KiB) arrives whole.
  auto metrics = c.get("/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GT(metrics->body.size(), 16u << 10);
  EXPECT_NE(metrics->body.find("kvgate_requests_total"), std::string::npos);
  // Plain HTTP to the TLS port gets no answer.
  http::SyncClient plain("127.0.0.1", gateway_->port());
  auto p = plain.get("/health");
  EXPECT_FALSE(p.ok() && p->status == 200u);
  // ... and an operator sees it.
  EXPECT_TRUE(wait_until(
      [&] {
        auto m = c.get("/metrics");
        return m.ok() &&
               metric_value(m->body,
                            "kvgate_http_connections_total{event=\"tls_handshake_failed\"}") >= 1;
      },
      std::chrono::seconds(3)));
}

TEST_F(TlsGatewayTest, AnHttpsWorkerIsVerifiedAndServes) {
  const std::string url = start_https_worker();
  auto cfg = base_config();
  cfg.worker_urls = {url};
  cfg.worker_ca_path = certs_.ca_cert;
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1)) << "discovery, probes and load polls over TLS";
  EXPECT_EQ(gateway_->registry().snapshot()->workers.front()->url(), url);
  auto c = client();
  http::ClientResponse head;
  expect_served(c, "hello to an https worker", &head);
  // A request body and an answer each larger than one TLS record (16 KiB) cross both TLS legs
  // whole: the client's and, through the gateway, the worker's.
  std::string words;
  for (int i = 0; i < 6000; ++i) words += "w" + std::to_string(i) + " ";
  auto big = c.post("/v1/completions", completion(words, 4));
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->status, 200u) << big->body.substr(0, 300);
}

TEST_F(TlsGatewayTest, AnHttpsWorkerWithAnUntrustedCertificateIsNeverRouted) {
  const std::string url = start_https_worker();
  auto cfg = base_config();
  cfg.worker_urls = {url};
  cfg.worker_ca_path = certs_.other_ca_cert;
  start_gateway(cfg);
  EXPECT_FALSE(wait_routable(1, std::chrono::milliseconds(1500)));
  auto c = client();
  auto r = c.post("/v1/completions", completion("hello", 4));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 503u) << r->body;
}

}  // namespace
}  // namespace kvgate::app
