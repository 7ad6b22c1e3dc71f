// The control routes cannot be turned against the gateway: a worker URL that leads back to it is
// refused, a request that comes round again is refused, the same engine under another name is
// one worker, the fleet has a size limit, and credentials in a worker URL are used, never shown.
// A gateway whose listener cannot open fails its start and ends cleanly.
#include <gmock/gmock.h>

#include <atomic>
#include <mutex>

#include "app/gateway_fixture.h"
#include "kvgate/http/server.h"
#include "support/ports.h"
#include "support/sanitizer.h"

namespace kvgate::app {
namespace {

using namespace std::chrono_literals;
namespace net = boost::asio;

std::string worker_body(const std::string& url) { return R"({"url":")" + url + "\"}"; }

TEST_F(GatewayTest, AWorkerUrlLeadingBackToTheGatewayIsRefusedUnderEveryName) {
  GatewayConfig cfg = base_config();
  cfg.prometheus_port = kvgate::testing::free_port();
  // The OS picks the gRPC port (no gRPC under ThreadSanitizer: support/sanitizer.h).
  cfg.grpc_port = testing_support::kUnderThreadSanitizer ? -1 : 0;
  start_gateway(cfg);
  auto c = client();
  std::vector<std::string> aliases;
  std::vector<uint16_t> ports = {gateway_->port(), gateway_->metrics_port()};
  if (cfg.grpc_port >= 0) ports.push_back(gateway_->grpc_port());
  for (const uint16_t p : ports) {
    ASSERT_NE(p, 0);
    const std::string port = std::to_string(p);
    for (const char* host :
         {"127.0.0.1", "localhost", "0.0.0.0", "[::]", "[::ffff:127.0.0.1]", "[::ffff:0.0.0.0]"}) {
      aliases.push_back(std::string("http://") + host + ":" + port);
    }
  }
  for (const std::string& self : aliases) {
    auto r = c.post("/workers", worker_body(self));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400u) << self << ": " << r->body;
    EXPECT_NE(r->body.find("this gateway's own"), std::string::npos) << r->body;
  }
  EXPECT_TRUE(gateway_->registry().snapshot()->workers.empty());
  // Another loopback address is another host as far as the listener on 127.0.0.1 knows.
  auto other =
      c.post("/workers", worker_body("http://127.0.0.2:" + std::to_string(gateway_->port())));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 201u) << other->body;
}

TEST_F(GatewayTest, ARequestThatComesRoundAgainIsRefused) {
  // Two gateways, each the other's worker: the loop is found at the first gateway it re-enters.
  GatewayConfig cfg = base_config();
  cfg.health_check_interval = 0ms;
  cfg.load_poll_interval = 0ms;
  cfg.kv_events = false;
  start_gateway(cfg);
  auto other = Gateway::create(cfg);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->start().ok());
  ASSERT_TRUE(gateway_->add_worker("http://127.0.0.1:" + std::to_string((*other)->port())).ok());
  ASSERT_TRUE((*other)->add_worker("http://127.0.0.1:" + std::to_string(gateway_->port())).ok());
  auto c = client();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.post("/v1/completions", completion("round and round", 4));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s * testing_support::kSlowdown);
  EXPECT_EQ(r->status, 508u) << r->body;
  EXPECT_NE(r->body.find("request loop"), std::string::npos) << r->body;
  // A request that already passed eight gateways is refused as well.
  http::ClientRequest req;
  req.method = http::Verb::post;
  req.target = "/v1/completions";
  req.body = completion("far travelled", 4);
  req.headers = {{"x-kvgate-hops", "a,b,c,d,e,f,g,h"}};
  auto far = c.request(req);
  ASSERT_TRUE(far.ok());
  EXPECT_EQ(far->status, 508u);
  (*other)->stop(1000ms);
}

TEST_F(GatewayTest, TheSameEngineUnderAnotherNameIsOneWorker) {
  const std::string url = start_worker();
  GatewayConfig cfg = base_config();
  cfg.worker_urls = {url};
  start_gateway(cfg);
  auto c = client();
  auto r = c.post("/workers", worker_body("http://localhost:" + std::to_string(worker_port(0))));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 409u) << r->body;
  EXPECT_NE(r->body.find("same engine as " + url), std::string::npos) << r->body;
  EXPECT_EQ(gateway_->registry().snapshot()->workers.size(), 1u);
}

TEST_F(GatewayTest, AListenerThatCannotOpenFailsTheStartAndTheGatewayEndsCleanly) {
  // Ports in use: the HTTP one, then (with a free HTTP port) the metrics one. Each start fails
  // with the listener named, and the gateway is destroyed without ending the process.
  net::io_context ctx;
  net::ip::tcp::acceptor taken(ctx, {net::ip::make_address("127.0.0.1"), 0});  // listening
  const uint16_t port = taken.local_endpoint().port();
  for (const bool metrics : {false, true}) {
    GatewayConfig c = base_config();
    if (metrics) {
      c.prometheus_port = port;
    } else {
      c.port = port;
    }
    auto gw = Gateway::create(c);
    ASSERT_TRUE(gw.ok()) << gw.status();
    const Status s = (*gw)->start();
    ASSERT_FALSE(s.ok()) << "started on a port in use";
    EXPECT_THAT(
        std::string(message_of(s)),
        ::testing::HasSubstr(metrics ? "--prometheus-port: cannot listen on"
                                     : "cannot listen on 127.0.0.1:" + std::to_string(port)));
    gw->reset();  // must not terminate: nothing of the failed start is left running
  }
}

TEST_F(GatewayTest, TheFleetStopsAtMaxWorkers) {
  GatewayConfig cfg = base_config();
  cfg.max_workers = 2;
  start_gateway(cfg);
  auto c = client();
  for (int i = 0; i < 3; ++i) {
    auto r = c.post("/workers", worker_body("http://127.0.0.1:" + std::to_string(1 + i)));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, i < 2 ? 201u : 409u) << r->body;
  }
  EXPECT_EQ(gateway_->registry().snapshot()->workers.size(), 2u);
}

TEST_F(GatewayTest, CredentialsInAWorkerUrlAreUsedButNeverShown) {
  // A worker that records the Authorization header of what the gateway sends it.
  http::IoPool io(1);
  io.start();
  http::Server engine(io, {});
  std::mutex mu;
  std::vector<std::string> seen;
  const auto record = [&](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
    {
      std::lock_guard<std::mutex> l(mu);
      seen.emplace_back(req.header("authorization"));
    }
    http::Response ok = http::Response::json(200, R"({"data":[]})");
    (void)co_await res.send(std::move(ok));
  };
  engine.route(http::Verb::get, "/health", record);
  engine.route(http::Verb::get, "/v1/models", record);
  ASSERT_TRUE(engine.start().ok());
  GatewayConfig cfg = base_config();
  cfg.kv_events = false;
  start_gateway(cfg);
  auto c = client();
  const std::string secret_url =
      "http://operator:s3cret@127.0.0.1:" + std::to_string(engine.port());
  auto r = c.post("/workers", worker_body(secret_url));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 201u) << r->body;
  ASSERT_TRUE(wait_routable(1));
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen.back(), "Basic b3BlcmF0b3I6czNjcmV0");  // base64("operator:s3cret")
  }
  const auto workers = c.get("/workers");
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->body.find("s3cret"), std::string::npos) << workers->body;
  EXPECT_NE(workers->body.find("http://127.0.0.1:" + std::to_string(engine.port())),
            std::string::npos);
  EXPECT_EQ(gateway_->metrics_text().find("s3cret"), std::string::npos);
  // A URL that fails to parse is echoed without its credentials.
  auto bad = c.post("/workers", worker_body("http://operator:s3cret@127.0.0.1:notaport"));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400u);
  EXPECT_EQ(bad->body.find("s3cret"), std::string::npos) << bad->body;
  gateway_->stop(1000ms);
  engine.stop();
  io.stop();
}

}  // namespace
}  // namespace kvgate::app
