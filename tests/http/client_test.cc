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
#include "support/sanitizer.h"

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

// The rest of a streamed body, piece by piece until its end; the first failed piece's status
// instead.
Result<std::string> read_rest(net::io_context& ctx, Connection& conn) {
  std::string body;
  for (;;) {
    auto piece = run(ctx, conn.next_piece());
    if (!piece.ok()) return piece.status();
    if (piece->empty()) return body;
    body.append(*piece);
  }
}

constexpr std::string_view kOk =
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok";

// A scripted peer on loopback: a derived class runs its script on thread_, and the destructor
// stops it (a blocking accept is woken with a connection of our own). Everything the script
// touches lives here, so the join in this destructor never races a destroyed member.
class LoopbackPeer {
 public:
  ~LoopbackPeer() {
    stop_ = true;
    boost::system::error_code ec;
    tcp::socket s(ctx_);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return port_; }
  void release() { released_ = true; }  // the script's cue, where it waits for one

 protected:
  LoopbackPeer() : acceptor_(ctx_, tcp::endpoint(tcp::v4(), 0)) {
    port_ = acceptor_.local_endpoint().port();
  }
  net::io_context ctx_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> released_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Per connection, answers the first `answered` requests and then, on the next request, does
// `then` (close at once, or hold the connection silent).
class RawServer : public LoopbackPeer {
 public:
  enum class Then { kClose, kHold };
  RawServer(int answered, Then then) {
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
  const auto body = read_rest(ctx, **conn);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_NE(body->find("prompt too long"), std::string::npos) << *body;
  EXPECT_TRUE((*conn)->reusable());
  server.stop();
  pool.stop();
}

// A raw server for one streamed answer: on the first request it writes `first`, then, once
// release() is called (or after 5 s), `second`, and holds the connection open.
class ScriptedStream : public LoopbackPeer {
 public:
  ScriptedStream(std::string first, std::string second) {
    thread_ = std::thread([this, first = std::move(first), second = std::move(second)] {
      boost::system::error_code ec;
      tcp::socket sock(ctx_);
      acceptor_.accept(sock, ec);
      if (ec) return;
      net::streambuf buf;
      net::read_until(sock, buf, "\r\n\r\n", ec);
      net::write(sock, net::buffer(first), ec);
      for (int i = 0; i < 1000 && !released_ && !stop_; ++i) std::this_thread::sleep_for(5ms);
      if (!second.empty()) net::write(sock, net::buffer(second), ec);
      while (!stop_) std::this_thread::sleep_for(5ms);
    });
  }
};

constexpr std::string_view kChunkedHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

// A connection to `raw` whose streamed exchange has read its head (null on failure, reported).
std::unique_ptr<Connection> streaming_from(net::io_context& ctx, const ScriptedStream& raw) {
  auto conn = run(ctx, Connection::connect("127.0.0.1", raw.port()));
  EXPECT_TRUE(conn.ok()) << conn.status();
  if (!conn.ok()) return nullptr;
  const ClientRequest req = post_request();
  const auto head = run(ctx, (*conn)->start_streaming(req));
  EXPECT_TRUE(head.ok()) << head.status();
  return head.ok() ? std::move(*conn) : nullptr;
}

TEST(StreamedPiecesTest, ChunksThatArriveTogetherAreOnePieceAndTheEndIsKnownWithThem) {
  ScriptedStream raw(std::string(kChunkedHead) + "5\r\nfirst\r\n6\r\nsecond\r\n0\r\n\r\n", "");
  net::io_context ctx;
  const std::unique_ptr<Connection> conn = streaming_from(ctx, raw);
  ASSERT_NE(conn, nullptr);
  // The head's read may or may not have brought the chunks; either way they are one piece.
  std::string got;
  while (!conn->body_complete()) {
    auto piece = run(ctx, conn->next_piece());
    ASSERT_TRUE(piece.ok()) << piece.status();
    ASSERT_FALSE(piece->empty());
    got.append(*piece);
    if (!conn->body_complete()) {
      EXPECT_EQ(got, "first") << "a read split the two chunks";
    }
  }
  EXPECT_EQ(got, "firstsecond");
  auto end = run(ctx, conn->next_piece());
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_TRUE(end->empty());
  EXPECT_TRUE(conn->reusable());
}

// The head's fields reach the caller, and the connection is kept only if the head allowed it,
// though the whole stream was read (the fields leave the parser with the head).
TEST(StreamedPiecesTest, AStreamWhoseHeadSaysCloseIsNotReused) {
  for (const bool close : {false, true}) {
    SCOPED_TRACE(close ? "Connection: close" : "keep-alive");
    ScriptedStream raw(std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n") +
                           (close ? "Connection: close\r\n" : "") +
                           "Transfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n0\r\n\r\n",
                       "");
    net::io_context ctx;
    auto conn = run(ctx, Connection::connect("127.0.0.1", raw.port()));
    ASSERT_TRUE(conn.ok()) << conn.status();
    const ClientRequest req = post_request();
    const auto head = run(ctx, (*conn)->start_streaming(req));
    ASSERT_TRUE(head.ok()) << head.status();
    EXPECT_EQ(head->header("content-type"), "text/event-stream");
    EXPECT_EQ(head->header("connection"), close ? "close" : "");
    const auto got = read_rest(ctx, **conn);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, "first");
    EXPECT_EQ((*conn)->reusable(), !close);
  }
}

TEST(StreamedPiecesTest, APieceNeverWaitsForTheNext) {
  ScriptedStream raw(std::string(kChunkedHead) + "5\r\nfirst\r\n", "6\r\nsecond\r\n0\r\n\r\n");
  net::io_context ctx;
  const std::unique_ptr<Connection> conn = streaming_from(ctx, raw);
  ASSERT_NE(conn, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto first = run(ctx, conn->next_piece());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "first");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s * testing_support::kSlowdown)
      << "the piece waited for the next one";
  EXPECT_FALSE(conn->body_complete());
  raw.release();
  auto second = run(ctx, conn->next_piece());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, "second");
  EXPECT_TRUE(conn->body_complete());
  auto end = run(ctx, conn->next_piece());
  ASSERT_TRUE(end.ok());
  EXPECT_TRUE(end->empty());
}

TEST(StreamedPiecesTest, ABadChunkAfterAGoodOneFailsTheNextPieceNotThisOne) {
  ScriptedStream raw(std::string(kChunkedHead) + "5\r\nfirst\r\nzz\r\nbad", "");
  net::io_context ctx;
  const std::unique_ptr<Connection> conn = streaming_from(ctx, raw);
  ASSERT_NE(conn, nullptr);
  auto first = run(ctx, conn->next_piece());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "first");
  auto next = run(ctx, conn->next_piece());
  EXPECT_FALSE(next.ok()) << "a chunk size of 'zz' was read as data";
  EXPECT_FALSE(conn->reusable());
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
