// The client's view of a keep-alive connection's life: whether a resting connection is still
// usable, and whether a failed exchange failed because the server closed the connection (safe to
// send again) or for another reason (a timeout: the request may be running).
#include <atomic>
#include <string>
#include <thread>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/read_until.hpp"
#include "boost/asio/streambuf.hpp"
#include "boost/asio/use_future.hpp"
#include "boost/asio/write.hpp"
#include "gtest/gtest.h"
#include "http/test_util.h"
#include "kvgate/http/client.h"
#include "kvgate/http/server.h"

namespace kvgate::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using testing::wait_until;

// Runs a coroutine to completion on its own io_context (until its result, not until the context
// has no work: a connection in the middle of an exchange keeps its deadline's timer waiting).
template <typename T>
T run(net::io_context& ctx, net::awaitable<T> op) {
  auto fut = net::co_spawn(ctx, std::move(op), net::use_future);
  ctx.restart();
  while (fut.wait_for(std::chrono::seconds(0)) != std::future_status::ready) ctx.run_one();
  return fut.get();
}

constexpr std::string_view kOk =
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok";

// A raw server on loopback: per connection, answers the first `answered` requests and then, on
// the next request, does `then` (close at once, or hold the connection silent).
class RawServer {
 public:
  enum class Then { kClose, kHold };
  RawServer(int answered, Then then) : acceptor_(ctx_, tcp::endpoint(tcp::v4(), 0)) {
    acceptor_.set_option(net::socket_base::reuse_address(true));
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, answered, then] {
      boost::system::error_code ec;
      while (!stop_) {
        tcp::socket sock(ctx_);
        acceptor_.accept(sock, ec);
        if (ec || stop_) break;
        net::streambuf buf;
        for (int i = 0;; ++i) {
          net::read_until(sock, buf, "\r\n\r\n", ec);
          if (ec) break;
          buf.consume(buf.size());
          if (i < answered) {
            net::write(sock, net::buffer(kOk), ec);
            continue;
          }
          if (then == Then::kHold) {
            while (!stop_) std::this_thread::sleep_for(5ms);
          }
          break;
        }
        sock.close(ec);
      }
    });
  }
  ~RawServer() {
    stop_ = true;
    boost::system::error_code ec;
    // Wake a blocking accept with a connection of our own.
    tcp::socket s(ctx_);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  net::io_context ctx_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

ClientRequest post_request() {
  ClientRequest r;
  r.method = Verb::post;
  r.target = "/v1/completions";
  r.body = "{}";
  return r;
}

TEST(ConnectionTest, RestingConnectionTheServerClosedIsNotIdleAndOpen) {
  IoPool pool(1);
  pool.start();
  Server server(pool, ServerOptions{.idle_timeout = 50ms});
  server.route(Verb::post, "/v1/completions",
               [](const Request&, Responder& r) -> net::awaitable<void> {
                 Response out = Response::json(200, "{}");
                 (void)co_await r.send(std::move(out));
               });
  ASSERT_TRUE(server.start().ok());
  net::io_context ctx;
  auto conn = run(ctx, Connection::connect("127.0.0.1", server.port()));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const ClientRequest req = post_request();
  auto res = run(ctx, (*conn)->send(req));
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_TRUE((*conn)->idle_and_open()) << "just answered, not yet closed by the server";
  ASSERT_TRUE(wait_until([&] { return server.stats().open_connections == 0; }));
  EXPECT_FALSE((*conn)->idle_and_open()) << "the server's keep-alive timer closed it";
  EXPECT_FALSE((*conn)->reusable());
  server.stop();
  pool.stop();
}

TEST(ConnectionTest, ServerClosingUnderTheRequestIsClosedByPeer) {
  RawServer raw(1, RawServer::Then::kClose);
  net::io_context ctx;
  auto conn = run(ctx, Connection::connect("127.0.0.1", raw.port()));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const ClientRequest req = post_request();
  ASSERT_TRUE(run(ctx, (*conn)->send(req)).ok());
  ASSERT_TRUE((*conn)->idle_and_open());
  // The server reads the second request and closes without a byte of answer: what a keep-alive
  // timer firing just as the request arrives looks like.
  auto res = run(ctx, (*conn)->start_streaming(req));
  ASSERT_FALSE(res.ok());
  EXPECT_TRUE((*conn)->failed_before_response());
  EXPECT_TRUE((*conn)->closed_by_peer()) << res.status();
}

TEST(ConnectionTest, TimeoutIsNeverClosedByPeer) {
  RawServer raw(0, RawServer::Then::kHold);
  net::io_context ctx;
  auto conn = run(
      ctx, Connection::connect("127.0.0.1", raw.port(), ClientOptions{.request_timeout = 100ms}));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const ClientRequest req = post_request();
  auto res = run(ctx, (*conn)->send(req));
  ASSERT_FALSE(res.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(res.status())) << res.status();
  EXPECT_TRUE((*conn)->failed_before_response());
  EXPECT_FALSE((*conn)->closed_by_peer()) << "the request may be running: never send it again";
}

TEST(ConnectionTest, StreamedRequestAnsweredWithALengthIsReadWhole) {
  // An engine refuses a streamed request with a plain JSON error (a Content-Length, no chunks):
  // the head and the body arrive as a stream would.
  IoPool pool(1);
  pool.start();
  Server server(pool, ServerOptions{});
  server.route(Verb::post, "/v1/completions",
               [](const Request&, Responder& r) -> net::awaitable<void> {
                 Response out = Response::error(400, "prompt too long");
                 (void)co_await r.send(std::move(out));
               });
  ASSERT_TRUE(server.start().ok());
  net::io_context ctx;
  auto conn = run(ctx, Connection::connect("127.0.0.1", server.port()));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const ClientRequest req = post_request();
  auto head = run(ctx, (*conn)->start_streaming(req));
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 400u);
  std::string body;
  for (;;) {
    auto piece = run(ctx, (*conn)->next_piece());
    ASSERT_TRUE(piece.ok()) << piece.status();
    if (piece->empty()) break;
    body.append(*piece);
  }
  EXPECT_NE(body.find("prompt too long"), std::string::npos) << body;
  EXPECT_TRUE((*conn)->reusable());
  server.stop();
  pool.stop();
}

TEST(ServerTimeoutsTest, KeepAliveTimeoutDoesNotCutASlowRequestBody) {
  IoPool pool(1);
  pool.start();
  Server server(pool, ServerOptions{.idle_timeout = 100ms, .read_timeout = 5s});
  server.route(Verb::post, "/echo", [](const Request& req, Responder& r) -> net::awaitable<void> {
    Response out = Response::text(200, req.body());
    (void)co_await r.send(std::move(out));
  });
  ASSERT_TRUE(server.start().ok());
  net::io_context ctx;
  tcp::socket sock(ctx);
  sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server.port()));
  const std::string head =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nContent-Type: text/plain\r\n\r\nabc";
  net::write(sock, net::buffer(head));
  std::this_thread::sleep_for(300ms);  // three keep-alive timeouts in the middle of the body
  net::write(sock, net::buffer(std::string("def")));
  net::streambuf buf;
  boost::system::error_code ec;
  net::read_until(sock, buf, "abcdef", ec);
  ASSERT_FALSE(ec) << ec.message();
  server.stop();
  pool.stop();
}

}  // namespace
}  // namespace kvgate::http
