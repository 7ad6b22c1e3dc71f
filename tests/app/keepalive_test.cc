// Engines close idle keep-alive connections (uvicorn, which vLLM and SGLang serve with, after 5 s).
// A burst fills the gateway's upstream pool; after a lull every pooled connection is dead at the
// engine's end. The gateway must never send a request into one, must send again on a fresh
// connection when an engine closes one under a request, and must never count either against the
// worker: the second burst succeeds in full and every breaker stays closed.
// (An engine keeping connections for 60 s takes the same path as one keeping them for 5 s: the
// pool expires both after --upstream-idle-timeout-secs. The idle minute itself is the drill
// drill_keepalive_60s, against real processes.)
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "app/gateway_fixture.h"
#include "boost/asio/buffers_iterator.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/read_until.hpp"
#include "boost/asio/streambuf.hpp"
#include "boost/asio/write.hpp"
#include "support/recording_worker.h"
#include "support/wait.h"

namespace kvgate::app {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

struct BurstResult {
  int ok = 0;
  std::map<std::string, int> failures;  // what went wrong -> how often
  int total() const {
    int n = ok;
    for (const auto& [k, v] : failures) n += v;
    return n;
  }
};

// `clients` threads, each sending streamed completions back to back for `length`.
BurstResult burst(uint16_t port, int clients, std::chrono::milliseconds length) {
  BurstResult result;
  std::mutex mu;
  const auto deadline = std::chrono::steady_clock::now() + length;
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      http::SyncClient c("127.0.0.1", port);
      for (int i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
        http::ClientRequest req;
        req.method = http::Verb::post;
        req.target = "/v1/completions";
        req.body = R"({"model":"mock-8b","max_tokens":8,"stream":true,"prompt":"client )" +
                   std::to_string(t) + " asks question " + std::to_string(i) + "\"}";
        std::string body;
        auto r = c.stream(req, [&](std::string_view piece) {
          body.append(piece);
          return Status();
        });
        std::string failure;
        if (!r.ok()) {
          failure = "transport: " + std::string(message_of(r.status()));
        } else if (r->status != 200) {
          failure = "status " + std::to_string(r->status);
        } else if (body.find("[DONE]") == std::string::npos ||
                   body.find("\"error\"") != std::string::npos) {
          failure = "stream did not finish cleanly";
        }
        std::lock_guard<std::mutex> l(mu);
        if (failure.empty()) {
          ++result.ok;
        } else {
          ++result.failures[failure];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  return result;
}

std::string describe(const BurstResult& r) {
  std::string s = std::to_string(r.ok) + " of " + std::to_string(r.total()) + " succeeded";
  for (const auto& [k, v] : r.failures) s += "; " + std::to_string(v) + " x " + k;
  return s;
}

// The value of one exposition line, e.g. `kvgate_upstream_connections_total{event="expired"}`.
double metric(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

class KeepAliveTest : public GatewayTest {
 protected:
  // A gateway that never probes its workers (the engine below answers generations only).
  GatewayConfig unprobed_config() {
    GatewayConfig cfg = base_config();
    cfg.health_check_interval = 0ms;
    cfg.load_poll_interval = 0ms;
    cfg.kv_events = false;
    return cfg;
  }
  // Twenty questions through the gateway, each answered.
  void send_twenty_questions() {
    auto c = client();
    for (int i = 0; i < 20; ++i) {
      auto r = c.post("/v1/completions", completion("question " + std::to_string(i)));
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->status, 200u) << r->body;
    }
  }
  // Two workers whose engines close idle connections after `engine_keep_alive`, the gateway with
  // its serving defaults for the upstream pool.
  void start_fleet(std::chrono::milliseconds engine_keep_alive) {
    for (int i = 0; i < 2; ++i) {
      start_worker_with([&](mock::FleetOptions& o) { o.keep_alive_timeout = engine_keep_alive; });
    }
    GatewayConfig cfg = base_config();
    cfg.worker_urls = {url_of(0), url_of(1)};
    start_gateway(cfg);
    ASSERT_TRUE(wait_routable(2));
  }

  void expect_breakers_never_opened() {
    const auto fleet = gateway_->registry().snapshot();
    for (const auto& w : fleet->workers) {
      EXPECT_EQ(w->breaker().opened_total(), 0u) << w->url();
      EXPECT_EQ(w->breaker().state(), workers::BreakerState::kClosed) << w->url();
    }
  }

  // Burst, idle past the engines' keep-alive, burst again: every request of both bursts succeeds.
  void burst_idle_burst(std::chrono::milliseconds idle) {
    const BurstResult first = burst(gateway_->port(), 32, 2s);
    EXPECT_TRUE(first.failures.empty()) << describe(first);
    EXPECT_GT(first.ok, 32);
    std::this_thread::sleep_for(idle);
    const BurstResult second = burst(gateway_->port(), 32, 2s);
    EXPECT_TRUE(second.failures.empty()) << describe(second);
    EXPECT_GT(second.ok, 32);
    expect_breakers_never_opened();
  }
};

TEST_F(KeepAliveTest, BurstIdleBurstAgainstFiveSecondEngineKeepAlive) {
  start_fleet(5s);
  burst_idle_burst(6s);
  const std::string m = gateway_->metrics_text();
  EXPECT_GT(metric(m, R"(kvgate_upstream_connections_total{event="expired"})"), 0)
      << "the pool closes what rested longer than --upstream-idle-timeout-secs";
}

TEST_F(KeepAliveTest, EngineKeepAliveShorterThanThePoolsIsFoundBeforeReuse) {
  // The engine gives up on idle connections long before the gateway's 4 s: the check before reuse
  // catches every one of them.
  start_fleet(300ms);
  burst_idle_burst(1s);
  const std::string m = gateway_->metrics_text();
  EXPECT_GT(metric(m, R"(kvgate_upstream_connections_total{event="closed_by_peer"})"), 0);
}

// An engine that answers the first request on each connection and closes the connection when the
// second arrives, without a byte of answer: its keep-alive timer winning the race with the
// request, every time.
class ClosesUnderSecondRequest {
 public:
  ClosesUnderSecondRequest()
      : acceptor_(ctx_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] {
      for (;;) {
        tcp::socket sock(ctx_);
        boost::system::error_code ec;
        acceptor_.accept(sock, ec);
        if (ec || stop_) return;
        auto s = std::make_shared<tcp::socket>(std::move(sock));
        std::lock_guard<std::mutex> l(mu_);
        descriptors_.push_back(s->native_handle());
        handlers_.emplace_back([this, s] { serve(*s); });
      }
    });
  }
  ~ClosesUnderSecondRequest() {
    stop_ = true;
    boost::system::error_code ec;
    tcp::socket wake(ctx_);
    wake.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
    {
      // Wakes the readers. By descriptor: the socket objects belong to their handler threads.
      std::lock_guard<std::mutex> l(mu_);
      for (int fd : descriptors_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& h : handlers_) h.join();
  }
  uint16_t port() const { return port_; }
  int closed_under_request() const { return closed_.load(); }

 private:
  void serve(tcp::socket& sock) {
    net::streambuf buf;
    boost::system::error_code ec;
    for (int n = 0; !stop_; ++n) {
      const size_t head = net::read_until(sock, buf, "\r\n\r\n", ec);
      if (ec) return;
      std::string h(net::buffers_begin(buf.data()), net::buffers_begin(buf.data()) + head);
      buf.consume(head);
      size_t length = 0;
      for (auto* key : {"Content-Length: ", "content-length: "}) {
        if (auto at = h.find(key); at != std::string::npos) length = std::stoul(h.substr(at + 16));
      }
      if (buf.size() < length) net::read(sock, buf, net::transfer_exactly(length - buf.size()), ec);
      buf.consume(length);
      const bool generation = h.rfind("POST /v1/completions", 0) == 0;
      if (generation && n > 0) {
        ++closed_;
        sock.close(ec);
        return;
      }
      const std::string body = generation ? R"({"choices":[{"text":"ok"}]})" : R"({"data":[]})";
      const std::string answer =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      net::write(sock, net::buffer(answer), ec);
      if (ec) return;
    }
  }

  net::io_context ctx_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> closed_{0};
  std::thread thread_;
  std::mutex mu_;
  std::vector<int> descriptors_;
  std::vector<std::thread> handlers_;
};

TEST_F(KeepAliveTest, EngineClosingAPooledConnectionUnderTheRequestIsSentAgainFresh) {
  ClosesUnderSecondRequest engine;
  GatewayConfig cfg = unprobed_config();
  cfg.worker_urls = {"http://127.0.0.1:" + std::to_string(engine.port())};
  start_gateway(cfg);
  send_twenty_questions();
  EXPECT_GE(engine.closed_under_request(), 10) << "the pooled connection was used and closed";
  const std::string m = gateway_->metrics_text();
  EXPECT_EQ(metric(m, "kvgate_upstream_stale_retries_total"), engine.closed_under_request());
  EXPECT_EQ(metric(m, R"(kvgate_request_errors_total{reason="upstream_connect"})"), 0);
  expect_breakers_never_opened();
  const auto fleet = gateway_->registry().snapshot();
  EXPECT_EQ(fleet->workers[0]->retryable_failures(), 0u);
}

// The prefill side of a disaggregated pair is sent again the same way.
TEST_F(KeepAliveTest, APrefillEngineClosingAPooledConnectionUnderTheRequestIsSentAgainFresh) {
  ClosesUnderSecondRequest prefill;
  testing::RecordingWorker decode;
  GatewayConfig cfg = unprobed_config();
  cfg.pd_disaggregation = true;
  cfg.prefill_workers = {
      {.url = "http://127.0.0.1:" + std::to_string(prefill.port()), .bootstrap_port = 9001}};
  cfg.decode_workers = {decode.url()};
  start_gateway(cfg);
  send_twenty_questions();
  // (The last pair's prefill may end just after its decode answered.)
  std::string m;
  EXPECT_TRUE(testing::wait_until([&] {
    m = gateway_->metrics_text();
    return metric(m, "kvgate_pd_prefill_seconds_count") == 20;
  }));
  EXPECT_GE(prefill.closed_under_request(), 10) << "the pooled connection was used and closed";
  EXPECT_EQ(metric(m, "kvgate_upstream_stale_retries_total"), prefill.closed_under_request());
  EXPECT_EQ(metric(m, "kvgate_pd_prefill_failures_total"), 0);
  expect_breakers_never_opened();
}

}  // namespace
}  // namespace kvgate::app
