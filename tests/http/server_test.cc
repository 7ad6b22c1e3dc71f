// The server and client together on loopback: routing, keep-alive, streaming with backpressure,
// limits, malformed input, listener close/reopen, stop with a stream open, client timeouts,
// watching for a client that goes away while its handler waits.
#include "kvgate/http/server.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "boost/asio/read.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"
#include "gtest/gtest.h"
#include "http/raw_exchange.h"
#include "http/test_util.h"
#include "kvgate/http/client.h"
#include "kvgate/http/sse.h"
#include "support/sanitizer.h"

namespace kvgate::http {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using testing::co_wait_until;
using testing::wait_until;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { pool_.start(); }
  void TearDown() override {
    if (server_) server_->stop();
    pool_.stop();
  }
  void start(ServerOptions options = {}) {
    server_ = std::make_unique<Server>(pool_, std::move(options));
    add_routes();
    ASSERT_TRUE(server_->start().ok());
    ASSERT_NE(server_->port(), 0);
  }
  virtual void add_routes() {
    server_->route(
        Verb::get, "/hello", [](const Request& req, Responder& r) -> net::awaitable<void> {
          Response out =
              Response::text(200, "hello " + std::string(req.query_param("name").value_or("?")));
          (void)co_await r.send(std::move(out));
        });
    server_->route(Verb::post, "/echo",
                   [](const Request& req, Responder& r) -> net::awaitable<void> {
                     Response out = Response::json(200, req.body());
                     (void)co_await r.send(std::move(out));
                   });
    server_->route_prefix(Verb::get, "/files/",
                          [](const Request& req, Responder& r) -> net::awaitable<void> {
                            Response out = Response::text(200, std::string(req.path()));
                            (void)co_await r.send(std::move(out));
                          });
    server_->route(Verb::get, "/silent",
                   [](const Request&, Responder&) -> net::awaitable<void> { co_return; });
  }
  // A raw exchange: writes `bytes`, reads until the server closes; returns what it sent back.
  std::string raw_exchange(std::string_view bytes) {
    return kvgate::testing::raw_exchange(server_->port(), bytes);
  }

  IoPool pool_{2};
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, RoutesNotFoundAndWrongMethod) {
  start();
  SyncClient c("127.0.0.1", server_->port());
  auto r = c.get("/hello?x=1&name=kv");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->body, "hello kv");
  r = c.get("/files/a/b.txt");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "/files/a/b.txt");
  r = c.get("/nope");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404u);
  EXPECT_NE(r->body.find("\"error\""), std::string::npos);
  r = c.post("/hello", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 405u);
  r = c.get("/silent");  // a handler that forgets to answer gets a 500, the connection lives
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500u);
  EXPECT_EQ(c.connects(), 1u);
}

// A method served on every path (CORS preflights) answers wherever no route takes it; other
// methods still get 404 on unknown paths and 405 on known ones. A handler's added headers ride
// on its answer, and the responder reports the status it sent.
TEST_F(ServerTest, EveryPathRouteAndAddedHeaders) {
  server_ = std::make_unique<Server>(pool_, ServerOptions{});
  add_routes();
  server_->route_every_path(Verb::options,
                            [](const Request& req, Responder& r) -> net::awaitable<void> {
                              r.add_header("x-added", "yes");
                              Response out = Response::text(204, "");
                              out.headers.emplace_back("x-path", std::string(req.path()));
                              (void)co_await r.send(std::move(out));
                              EXPECT_EQ(r.status(), 204u);
                            });
  ASSERT_TRUE(server_->start().ok());
  SyncClient c("127.0.0.1", server_->port());
  for (const char* path : {"/hello", "/files/x", "/anything/else"}) {
    auto r = c.request({.method = Verb::options, .target = path});
    ASSERT_TRUE(r.ok()) << path;
    EXPECT_EQ(r->status, 204u) << path;
    EXPECT_EQ(r->header("x-path"), path);
    EXPECT_EQ(r->header("x-added"), "yes");
  }
  auto nope = c.get("/nope");
  ASSERT_TRUE(nope.ok());
  EXPECT_EQ(nope->status, 404u);
  auto wrong = c.post("/hello", "{}");
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 405u);
}

// RFC 9110: HEAD is answered as GET without the body (a HEAD health check works), and a 405 names
// the methods the path takes in Allow.
TEST_F(ServerTest, HeadIsGetWithoutTheBodyAndA405SaysWhatIsAllowed) {
  start();
  const std::string out = raw_exchange(
      "HEAD /hello?name=kv HTTP/1.1\r\nHost: t\r\n\r\n"
      "GET /hello?name=kv HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  const size_t head_end = out.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << out;
  const std::string head = out.substr(0, head_end);
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: 8"), std::string::npos) << head;
  // The next bytes are the GET's answer: the HEAD's carried no body.
  EXPECT_EQ(out.compare(head_end + 4, 12, "HTTP/1.1 200"), 0) << out;
  EXPECT_EQ(out.find("hello kv"), out.rfind("hello kv")) << "one body, the GET's: " << out;
  EXPECT_NE(out.find("hello kv"), std::string::npos) << out;

  SyncClient c("127.0.0.1", server_->port());
  auto wrong = c.post("/hello", "{}");
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 405u);
  EXPECT_EQ(wrong->header("Allow"), "GET, HEAD");
  auto prefixed = c.request({.method = Verb::delete_, .target = "/files/a"});
  ASSERT_TRUE(prefixed.ok());
  EXPECT_EQ(prefixed->status, 405u);
  EXPECT_EQ(prefixed->header("Allow"), "GET, HEAD");
  const std::string unknown =
      raw_exchange("HEAD /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(unknown.rfind("HTTP/1.1 404", 0), 0u) << unknown;
}

// A slash too many after a route's path is that route, its query kept; a prefix route's id with
// a slash stays the prefix route's; a path that is no route stays unknown.
TEST_F(ServerTest, ATrailingSlashAfterARoutesPathIsThatRoute) {
  start();
  SyncClient c("127.0.0.1", server_->port());
  auto hello = c.get("/hello/?name=kv");
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->status, 200u);
  EXPECT_EQ(hello->body, "hello kv");
  auto echo = c.post("/echo/", "{\"i\":1}");
  ASSERT_TRUE(echo.ok());
  EXPECT_EQ(echo->status, 200u);
  EXPECT_EQ(echo->body, "{\"i\":1}");
  auto file = c.get("/files/a/");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->status, 200u);
  auto unknown = c.get("/nope/");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 404u);
}

TEST_F(ServerTest, KeepAliveReusesOneConnection) {
  start();
  SyncClient c("127.0.0.1", server_->port());
  for (int i = 0; i < 20; ++i) {
    auto r = c.post("/echo", "{\"i\":" + std::to_string(i) + "}");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->body, "{\"i\":" + std::to_string(i) + "}");
  }
  EXPECT_EQ(c.connects(), 1u);
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
  EXPECT_EQ(server_->stats().requests, 20u);
}

TEST_F(ServerTest, ConnectionCloseIsHonoured) {
  start();
  SyncClient c("127.0.0.1", server_->port());
  ClientRequest req;
  req.target = "/hello";
  req.headers = {{"Connection", "close"}};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.request(req).ok());
  EXPECT_EQ(c.connects(), 3u);
}

TEST_F(ServerTest, ReusedConnectionClosedByServerIsRetried) {
  ServerOptions o;
  o.idle_timeout = 50ms;
  start(o);
  SyncClient c("127.0.0.1", server_->port());
  ASSERT_TRUE(c.get("/hello").ok());
  ASSERT_TRUE(wait_until([&] { return server_->stats().open_connections == 0; }));
  auto r = c.get("/hello");  // the pooled connection is dead; one retry on a new one
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(c.connects(), 2u);
}

TEST_F(ServerTest, BodyOverLimitGets413) {
  ServerOptions o;
  o.body_limit = 1000;
  start(o);
  SyncClient c("127.0.0.1", server_->port());
  auto ok = c.post("/echo", std::string(1000, 'x'));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200u);
  auto r = c.post("/echo", std::string(1001, 'x'));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 413u);
  // A body far over the limit: the answer still reaches the client (no reset on close).
  SyncClient big("127.0.0.1", server_->port());
  auto huge = big.post("/echo", std::string(4 << 20, 'x'));
  ASSERT_TRUE(huge.ok()) << huge.status();
  EXPECT_EQ(huge->status, 413u);
  EXPECT_EQ(server_->stats().bad_requests, 2u);
}

TEST_F(ServerTest, MalformedRequestGets400AndClose) {
  start();
  std::string out = raw_exchange("GARBAGE NOT HTTP\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  out = raw_exchange("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  out = raw_exchange("GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70000, 'a') +
                     "\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 431", 0), 0u) << out.substr(0, 100);
  out = raw_exchange("GET /hello?q=" + std::string(70000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 414", 0), 0u) << out.substr(0, 100);
  EXPECT_NE(out.find("invalid_request_error"), std::string::npos) << out.substr(0, 300);
  EXPECT_EQ(server_->stats().bad_requests, 3u);
  EXPECT_EQ(server_->stats().framing_refusals, 1u) << "the length that is not a number";
  // The server still serves.
  SyncClient c("127.0.0.1", server_->port());
  EXPECT_TRUE(c.get("/hello").ok());
}

class StreamingTest : public ServerTest {
 protected:
  void add_routes() override {
    ServerTest::add_routes();
    // Writes event 0, then each next event only after the client has received the previous one:
    // passes only if every chunk reaches the client as it is written.
    server_->route(Verb::get, "/lockstep",
                   [this](const Request&, Responder& r) -> net::awaitable<void> {
                     if (!(co_await r.start_sse()).ok()) co_return;
                     for (int i = 0; i < 5; ++i) {
                       const std::string event = "{\"i\":" + std::to_string(i) + "}";
                       if (!(co_await r.write_sse(event)).ok()) co_return;
                       auto seen_next = [this, i] { return received_ > i; };
                       const bool seen = co_await co_wait_until(seen_next, 10s);
                       if (!seen) co_return;
                     }
                     (void)co_await r.write_sse("[DONE]");
                     (void)co_await r.finish();
                   });
    // Writes 1 MiB chunks until 256 MiB or a write fails.
    server_->route(Verb::get, "/flood",
                   [this](const Request&, Responder& r) -> net::awaitable<void> {
                     if (!(co_await r.start_stream(200, "application/octet-stream")).ok())
                       co_return;
                     std::string chunk(1 << 20, 'z');
                     for (int i = 0; i < 256; ++i) {
                       if (!(co_await r.write(chunk)).ok()) {
                         flood_failed_ = true;
                         co_return;
                       }
                       flood_written_ += chunk.size();
                     }
                   });
    // A held head leaves with the first chunk; with no chunk at all, with the terminating one.
    // /held-last: the head, the only chunk and the end in one write.
    const auto held = [](const Request& req, Responder& r) -> net::awaitable<void> {
      const std::vector<Header> headers = {{"x-held", "yes"}};
      if (!(co_await r.start_stream(200, "text/event-stream", headers, /*hold=*/true)).ok())
        co_return;
      if (req.target() == "/held") {
        (void)co_await r.write("");  // empty: skipped, the head stays held
        (void)co_await r.write("data: one\n\n");
        (void)co_await r.write("data: two\n\n");
      }
      const std::string_view last = req.target() == "/held-last" ? "data: last\n\n" : "";
      (void)co_await r.finish(last);
    };
    server_->route(Verb::get, "/held", held);
    server_->route(Verb::get, "/held-last", held);
    server_->route(Verb::get, "/held-empty",
                   [](const Request&, Responder& r) -> net::awaitable<void> {
                     if (!(co_await r.start_stream(200, "text/plain", {}, /*hold=*/true)).ok())
                       co_return;
                     (void)co_await r.finish();
                   });
    // Streams until its writes fail.
    server_->route(Verb::get, "/forever",
                   [this](const Request&, Responder& r) -> net::awaitable<void> {
                     if (!(co_await r.start_sse()).ok()) co_return;
                     net::steady_timer t(r.get_executor());
                     for (;;) {
                       if (!(co_await r.write_sse("{}")).ok()) break;
                       ++forever_events_;
                       t.expires_after(2ms);
                       boost::system::error_code ec;
                       co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
                     }
                     forever_ended_ = true;
                   });
  }
  std::atomic<int> received_{0};
  std::atomic<uint64_t> flood_written_{0};
  std::atomic<bool> flood_failed_{false};
  std::atomic<int> forever_events_{0};
  std::atomic<bool> forever_ended_{false};
};

TEST_F(StreamingTest, ChunksArriveAsWritten) {
  start();
  SyncClient c("127.0.0.1", server_->port());
  SseParser parser;
  std::vector<std::string> events;
  ClientRequest req;
  req.target = "/lockstep";
  auto r = c.stream(req, [&](std::string_view piece) {
    parser.feed(piece, [&](std::string_view d) {
      events.emplace_back(d);
      received_ = static_cast<int>(events.size());
    });
    return Status();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->header("Content-Type"), "text/event-stream");
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0], "{\"i\":0}");
  EXPECT_EQ(events[4], "{\"i\":4}");
  EXPECT_TRUE(parser.done());
  // The connection is reusable after a finished chunked stream.
  EXPECT_TRUE(c.get("/hello").ok());
  EXPECT_EQ(c.connects(), 1u);
}

// A HEAD on a streaming GET route: the stream's head alone, the handler stopped at its first
// write (even one that would stream forever), the connection ready for the next request.
TEST_F(StreamingTest, AHeadOnAStreamGetsTheHeadAndStopsTheHandler) {
  start();
  for (const char* path : {"/held", "/forever"}) {
    forever_ended_ = false;
    const std::string out = raw_exchange(std::string("HEAD ") + path +
                                         " HTTP/1.1\r\nHost: t\r\n\r\n"
                                         "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: "
                                         "close\r\n\r\n");
    const size_t head_end = out.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << path << ": " << out;
    EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << path << ": " << out;
    EXPECT_EQ(out.compare(head_end + 4, 12, "HTTP/1.1 200"), 0) << path << ": " << out;
    EXPECT_NE(out.find("hello ?"), std::string::npos) << path << ": " << out;
  }
  EXPECT_TRUE(wait_until([&] { return forever_ended_.load(); }));
}

TEST_F(StreamingTest, AHeldHeadLeavesWithTheFirstChunkOrTheLast) {
  start();
  SyncClient c("127.0.0.1", server_->port());
  std::string body;
  const auto read = [&](const char* target) {
    ClientRequest req;
    req.target = target;
    body.clear();
    return c.stream(req, [&](std::string_view piece) {
      body.append(piece);
      return Status();
    });
  };
  auto r = read("/held");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->header("x-held"), "yes");
  EXPECT_EQ(body, "data: one\n\ndata: two\n\n");
  r = read("/held-last");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header("x-held"), "yes");
  EXPECT_EQ(body, "data: last\n\n");
  r = read("/held-empty");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->header("Content-Type"), "text/plain");
  EXPECT_EQ(body, "");
  // All ended as chunked bodies should: the connection serves on.
  EXPECT_TRUE(c.get("/hello").ok());
  EXPECT_EQ(c.connects(), 1u);
}

TEST_F(StreamingTest, WritesAwaitASlowReader) {
  start();
  net::io_context ctx;
  net::ip::tcp::socket s(ctx);
  s.connect({net::ip::make_address("127.0.0.1"), server_->port()});
  std::string req = "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n";
  net::write(s, net::buffer(req));
  ASSERT_TRUE(wait_until([&] { return flood_written_ >= (2u << 20); }));
  // Without backpressure the handler would write all 256 MiB in well under this window.
  std::this_thread::sleep_for(300ms);
  uint64_t written = flood_written_;
  EXPECT_LT(written, 64u << 20) << "writes did not wait for the reader";
  // Reading drains it to the end.
  uint64_t got = 0;
  char buf[1 << 16];
  boost::system::error_code ec;
  while (got < (256u << 20)) {
    got += s.read_some(net::buffer(buf), ec);
    if (ec) break;
  }
  EXPECT_GE(got, 256u << 20);
  EXPECT_TRUE(wait_until([&] { return flood_written_ == (256u << 20); }));
  EXPECT_FALSE(flood_failed_);
}

TEST_F(StreamingTest, StopWhileStreamOpen) {
  start();
  std::atomic<bool> client_done{false};
  Status client_status;
  std::thread client([&] {
    SyncClient c("127.0.0.1", server_->port());
    ClientRequest req;
    req.target = "/forever";
    auto r = c.stream(req, [](std::string_view) { return Status(); });
    client_status = r.status();
    client_done = true;
  });
  ASSERT_TRUE(wait_until([&] { return forever_events_ > 3; }));
  EXPECT_TRUE(server_->stop(5s));  // every connection ended within the grace period
  EXPECT_TRUE(forever_ended_);
  ASSERT_TRUE(wait_until([&] { return client_done.load(); }));
  client.join();
  EXPECT_FALSE(client_status.ok());  // the stream was cut, not finished
  SyncClient late("127.0.0.1", server_->port(), {.connect_timeout = 1s});
  EXPECT_FALSE(late.get("/hello").ok());
}

TEST_F(StreamingTest, ListenerCloseAndReopen) {
  start();
  uint16_t port = server_->port();
  std::atomic<bool> client_done{false};
  Status client_status;
  std::thread client([&] {
    SyncClient c("127.0.0.1", port);
    ClientRequest req;
    req.target = "/forever";
    client_status = c.stream(req, [](std::string_view) { return Status(); }).status();
    client_done = true;
  });
  ASSERT_TRUE(wait_until([&] { return forever_events_ > 3; }));
  server_->close_listener(/*drop_connections=*/true);
  EXPECT_FALSE(server_->listening());
  ASSERT_TRUE(wait_until([&] { return client_done.load(); }));
  client.join();
  EXPECT_FALSE(client_status.ok());
  {
    SyncClient c("127.0.0.1", port, {.connect_timeout = 1s});
    EXPECT_FALSE(c.get("/hello").ok());  // refused
  }
  ASSERT_TRUE(server_->reopen_listener().ok());
  EXPECT_TRUE(server_->listening());
  EXPECT_EQ(server_->port(), port);
  SyncClient c("127.0.0.1", port);
  auto r = c.get("/hello");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
}

// A handler that waits for "work", watching its client meanwhile.
class DisconnectWatchTest : public ServerTest {
 protected:
  void add_routes() override {
    // Watches and answers at once: the watch ends before its socket wait begins.
    server_->route(Verb::get, "/quick", [](const Request&, Responder& r) -> net::awaitable<void> {
      const DisconnectWatch watch = r.watch_disconnect([] { ADD_FAILURE() << "fired"; });
      (void)co_await r.send(Response::text(200, "quick"));
    });
    server_->route(
        Verb::get, "/slow", [this](const Request& req, Responder& r) -> net::awaitable<void> {
          // The "work": ?ms=N milliseconds.
          const auto ms = std::stoi(std::string(req.query_param("ms").value_or("300")));
          net::steady_timer work(co_await net::this_coro::executor, std::chrono::milliseconds(ms));
          // ?arm_after=N: start watching N milliseconds late (after the client may have closed).
          if (const auto late = req.query_param("arm_after")) {
            net::steady_timer pause(co_await net::this_coro::executor,
                                    std::chrono::milliseconds(std::stoi(std::string(*late))));
            boost::system::error_code ec;
            co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
          }
          bool gone = false;
          {
            const DisconnectWatch watch = r.watch_disconnect([&] {
              gone = true;
              work.cancel();
            });
            boost::system::error_code ec;
            co_await work.async_wait(net::redirect_error(net::use_awaitable, ec));
            EXPECT_EQ(watch.fired(), gone);
          }
          if (gone) {
            ++aborted_;
            co_return;
          }
          ++completed_;
          Response out = Response::text(200, "done");
          (void)co_await r.send(std::move(out));
        });
  }
  // A client that sends `target` and closes `after` it.
  void send_then_close(const std::string& target, std::chrono::milliseconds after) {
    net::io_context ctx;
    net::ip::tcp::socket s(ctx);
    s.connect({net::ip::make_address("127.0.0.1"), server_->port()});
    const std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n";
    net::write(s, net::buffer(req));
    std::this_thread::sleep_for(after);
    s.close();
  }
  // The watch fired for the one request and its handler stopped working.
  void expect_one_abort() {
    ASSERT_TRUE(wait_until([&] { return aborted_.load() == 1; }, 2s)) << "the watch did not fire";
    EXPECT_EQ(completed_.load(), 0);
  }
  std::atomic<int> aborted_{0}, completed_{0};
};

TEST_F(DisconnectWatchTest, ClientThatClosesIsNoticedWhileTheHandlerWaits) {
  start();
  send_then_close("/slow?ms=5000", 50ms);
  expect_one_abort();
}

TEST_F(DisconnectWatchTest, ClientThatClosedBeforeTheWatchStartedIsNoticed) {
  start();
  send_then_close("/slow?ms=5000&arm_after=200", 0ms);  // the FIN is in before the handler watches
  expect_one_abort();
}

TEST_F(DisconnectWatchTest, ClientThatClosesRightAfterItsRequestIsNoticed) {
  start();
  // The FIN is in before the watch's socket wait begins (it starts at the next tick).
  send_then_close("/slow?ms=5000", 0ms);
  expect_one_abort();
}

TEST_F(DisconnectWatchTest, WatchesEndedBeforeTheirWaitBeganLeaveTheConnectionServing) {
  start();
  SyncClient c("127.0.0.1", server_->port());
  for (int i = 0; i < 200; ++i) {
    auto r = c.get("/quick");
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
    ASSERT_EQ(r->body, "quick");
  }
  // A wait that begins after them still sees its client close.
  send_then_close("/slow?ms=5000", 50ms);
  ASSERT_TRUE(wait_until([&] { return aborted_.load() == 1; }, 2s)) << "the watch did not fire";
  auto r = c.get("/quick");
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST_F(DisconnectWatchTest, ClientThatWaitsGetsItsAnswerAndAPipelinedRequestToo) {
  start();
  // Two requests in one write: the second's bytes arrive while the first is being worked on,
  // which is not a disconnect.
  const std::string two =
      "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /slow HTTP/1.1\r\nHost: x\r\n"
      "Connection: close\r\n\r\n";
  const std::string out = raw_exchange(two);
  size_t answers = 0;
  for (size_t at = out.find("HTTP/1.1 200"); at != std::string::npos;
       at = out.find("HTTP/1.1 200", at + 1))
    ++answers;
  EXPECT_EQ(answers, 2u) << out;
  EXPECT_EQ(completed_.load(), 2);
  EXPECT_EQ(aborted_.load(), 0);
  // And a keep-alive client that simply waits.
  SyncClient c("127.0.0.1", server_->port());
  auto r = c.get("/slow");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "done");
  EXPECT_EQ(aborted_.load(), 0);
}

TEST_F(ServerTest, ClientRequestTimeout) {
  // A listener that accepts and never answers.
  net::io_context ctx;
  net::ip::tcp::acceptor acc(ctx, {net::ip::make_address("127.0.0.1"), 0});
  SyncClient c("127.0.0.1", acc.local_endpoint().port(), {.request_timeout = 100ms});
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.get("/x");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s * testing_support::kSlowdown);
}

}  // namespace
}  // namespace kvgate::http
