// The server's bounds: a connection limit that sheds the longest-idle connection first and keeps
// a few reserved for the always-available routes, and a budget for request bodies in flight.
#include <atomic>
#include <future>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "http/test_util.h"
#include "kvgate/http/client.h"
#include "kvgate/http/server.h"

namespace kvgate::http {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using testing::co_wait_until;
using testing::wait_until;

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { pool_.start(); }
  void TearDown() override {
    release_ = true;
    if (server_) server_->stop();
    pool_.stop();
  }
  void start(ServerOptions o) {
    server_ = std::make_unique<Server>(pool_, std::move(o));
    const auto ok = [](const Request&, Responder& r) -> net::awaitable<void> {
      Response out = Response::json(200, R"({"status":"ok"})");
      (void)co_await r.send(std::move(out));
    };
    server_->route(Verb::get, "/health", ok);
    server_->route(Verb::get, "/hello", ok);
    server_->always_available("/health");
    // Holds its request (and its body) until the test releases it.
    server_->route(Verb::post, "/hold",
                   [this](const Request& req, Responder& r) -> net::awaitable<void> {
                     ++held_;
                     (void)co_await co_wait_until([this] { return release_.load(); }, 20s);
                     Response out = Response::json(200, std::to_string(req.body().size()));
                     (void)co_await r.send(std::move(out));
                   });
    ASSERT_TRUE(server_->start().ok());
  }
  // A request on its own connection in the background (its client lives in the thread).
  std::future<unsigned> post_async(std::string target, size_t body_bytes) {
    return std::async(std::launch::async, [this, target, body_bytes] {
      SyncClient c("127.0.0.1", server_->port(), ClientOptions{.request_timeout = 30s});
      auto r = c.post(target, std::string(body_bytes, 'x'));
      return r.ok() ? r->status : 0u;
    });
  }

  IoPool pool_{2};
  std::unique_ptr<Server> server_;
  std::atomic<int> held_{0};
  std::atomic<bool> release_{false};
};

TEST_F(LimitsTest, AtTheConnectionLimitTheLongestIdleConnectionMakesRoom) {
  start({.max_connections = 3});
  std::vector<std::unique_ptr<SyncClient>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<SyncClient>("127.0.0.1", server_->port()));
    ASSERT_EQ(idle.back()->get("/hello")->status, 200u);  // then rests, kept alive
    std::this_thread::sleep_for(20ms);
  }
  SyncClient fourth("127.0.0.1", server_->port());
  auto r = fourth.get("/hello");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(server_->stats().idle_shed, 1u);
  ASSERT_TRUE(wait_until([&] { return server_->stats().open_connections <= 3; }));
  // The shed one was the oldest: its client reconnects; the others still hold theirs.
  ASSERT_EQ(idle[0]->get("/hello")->status, 200u);
  EXPECT_EQ(idle[0]->connects(), 2u);
}

TEST_F(LimitsTest, WithEveryConnectionBusyHealthIsStillAnswered) {
  start({.max_connections = 2, .reserved_connections = 2});
  auto a = post_async("/hold", 10);
  auto b = post_async("/hold", 10);
  ASSERT_TRUE(wait_until([&] { return held_ == 2; }));
  // Both connections are in a handler (not idle): a reserved connection serves /health only.
  SyncClient probe("127.0.0.1", server_->port());
  auto h = probe.get("/health");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->status, 200u);
  SyncClient other("127.0.0.1", server_->port());
  auto r = other.get("/hello");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 503u);
  EXPECT_GE(server_->stats().restricted_refusals, 1u);
  release_ = true;
  EXPECT_EQ(a.get(), 200u);
  EXPECT_EQ(b.get(), 200u);
}

TEST_F(LimitsTest, RequestBodiesInFlightStayWithinTheBudget) {
  start({.body_limit = 1 << 20, .max_inflight_body_bytes = 1000});
  auto first = post_async("/hold", 600);
  ASSERT_TRUE(wait_until([&] { return held_ == 1; }));
  EXPECT_EQ(server_->stats().inflight_body_bytes, 600u);
  SyncClient c("127.0.0.1", server_->port());
  auto busy = c.post("/hold", std::string(600, 'y'));
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_EQ(busy->status, 429u) << busy->body;
  SyncClient d("127.0.0.1", server_->port());
  auto huge = d.post("/hold", std::string(5000, 'z'));
  ASSERT_TRUE(huge.ok()) << huge.status();
  EXPECT_EQ(huge->status, 413u) << huge->body;
  EXPECT_EQ(server_->stats().body_budget_refusals, 2u);
  release_ = true;
  EXPECT_EQ(first.get(), 200u);
  ASSERT_TRUE(wait_until([&] { return server_->stats().inflight_body_bytes == 0; }));
  SyncClient e("127.0.0.1", server_->port());
  auto later = e.post("/hold", std::string(600, 'w'));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->status, 200u);
}

// A client that trickles its request is cut off at the read timeout and counted; one that sends
// nothing more on a kept-alive connection is closed at the idle timeout and counted apart.
TEST_F(LimitsTest, ATricklingRequestAndAnIdleConnectionAreClosedAndCounted) {
  start({.idle_timeout = 300ms, .read_timeout = 300ms});
  net::io_context ctx;
  net::ip::tcp::socket trickler(ctx);
  trickler.connect({net::ip::make_address("127.0.0.1"), server_->port()});
  for (const char* part : {"GET /hel", "lo HTTP/1.1\r\n", "Host: x\r\n"}) {
    net::write(trickler, net::buffer(std::string_view(part)));
  }
  char buf[256];
  boost::system::error_code ec;
  const size_t n = trickler.read_some(net::buffer(buf), ec);  // waits for the close
  EXPECT_EQ(n, 0u) << "closed unanswered";
  EXPECT_TRUE(ec);
  EXPECT_TRUE(wait_until([&] { return server_->stats().read_timeouts == 1; }, 5s));
  SyncClient c("127.0.0.1", server_->port());
  ASSERT_TRUE(c.get("/hello").ok());
  EXPECT_TRUE(wait_until([&] { return server_->stats().idle_timeouts >= 1; }, 5s));
  EXPECT_EQ(server_->stats().read_timeouts, 1u);
}

}  // namespace
}  // namespace kvgate::http
