// Server: an HTTP/1.1 server on Boost.Asio/Beast with C++20 coroutine handlers.
//
//   http::IoPool pool(2);
//   http::Server server(pool, {.address = "127.0.0.1", .port = 0});
//   server.route(http::Verb::get, "/health",
//                [](const http::Request&, http::Responder& r) -> boost::asio::awaitable<void> {
//                  http::Response ok = http::Response::json(200, "{}");
//                  (void)co_await r.send(std::move(ok));
//                });
//   pool.start();
//   Status s = server.start();   // then server.port() is the bound port
//
// Connections are kept alive between requests (no pipelining: one request at a time per
// connection). A handler either sends one whole response (Responder::send) or streams one
// (start_stream, then write / write_sse, then finish): every write awaits the socket, so a slow
// client slows its handler instead of growing a buffer. Bodies above `body_limit` get 413, a
// malformed request 400, a header block above `header_limit` 431; each then closes the connection.
//
// g++ 12 may destroy a temporary inside a co_await expression twice (docs/architecture.md):
// build a Response in a named local and co_await send(std::move(r)).
//
// Threading: the listener and each connection run on one context of the pool (all of them on
// `pin_context` when it is set, else the listener on context 0 and connections round-robin), and a
// handler runs on its connection's context; with `pin_context` every handler of the server runs on
// that one thread, so the owner may keep its state unsynchronized. Routes are added before start()
// and not changed afterwards. start(), close_listener(), reopen_listener(), begin_drain(), stats()
// and open_connections() are safe from any thread. stop() waits for connections to end and so must
// be called from outside the pool (request_stop() works anywhere). The pool must outlive the
// server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "boost/asio/awaitable.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "kvgate/core/result.h"
#include "kvgate/http/io_pool.h"
#include "kvgate/http/message.h"
#include "kvgate/http/response_sink.h"

namespace kvgate::http {

namespace detail {
struct Session;
struct ServerState;
}  // namespace detail

struct ServerOptions {
  std::string address = "127.0.0.1";  // "0.0.0.0" or "::" for every interface
  uint16_t port = 0;                  // 0 picks a free port; port() reports it
  size_t body_limit = 16 << 20;       // bytes; larger bodies get 413
  uint32_t header_limit = 64 << 10;   // bytes; larger header blocks get 431
  // A kept-alive connection with no request for this long is closed (and a new connection that
  // sends nothing): the keep-alive timeout.
  std::chrono::milliseconds idle_timeout{60'000};
  // Reading one request, from its first byte to the end of its body.
  std::chrono::milliseconds read_timeout{60'000};
  // Each write (a whole response, or one chunk) must complete within this.
  std::chrono::milliseconds write_timeout{60'000};
  std::optional<size_t> pin_context;  // run everything on this context of the pool
  int backlog = 1024;
  std::string server_name = "kvgate";
  // Every answer carries this header with its request's id (Request::request_id: the client's own
  // value of the header when usable, else a new one), 404s and 405s included; "" for none.
  std::string request_id_header;
  // An answer of status 400 or more without a header of this name gets it (name: value): a
  // proxy marks the errors it makes itself apart from the upstream answers it forwards, which
  // carry the same header with another value. Empty name: nothing added.
  Header local_error_header;
  // Connections at once (0: no limit). At the limit a new connection closes the longest-idle
  // kept-alive one to make room; with none idle, up to `reserved_connections` more are accepted
  // for the routes marked always_available() only (health, readiness, metrics stay reachable
  // under saturation): anything else on them gets 503 and the connection closes. Beyond that a
  // connection is closed at once.
  size_t max_connections = 0;
  size_t reserved_connections = 32;
  // Request bodies held at once, in bytes (0: no limit), reserved from a request's Content-Length
  // when its head arrives (1 MiB for a chunked body, corrected once read) and released when its
  // handler returns. A request beyond the budget gets 429 (413 if it alone is larger) before its
  // body is kept.
  size_t max_inflight_body_bytes = 0;
  // What a refusal calls body_limit and max_inflight_body_bytes, so a client learns which knob
  // bounds it (a program names its flags: "--max-payload-size").
  std::string body_limit_name = "the body limit";
  std::string inflight_limit_name = "the in-flight body budget";
  // TLS: with both set every connection is HTTPS (a PEM certificate chain and its private key;
  // TLS 1.2 with forward-secret AEAD suites only (ECDHE with AES-GCM or ChaCha20-Poly1305), and
  // TLS 1.3), with neither plain HTTP. start() fails naming a file it cannot load. The
  // handshake must complete within read_timeout.
  std::string tls_cert_path;
  std::string tls_key_path;
  // Session tickets (TLS 1.2's and 1.3's) let a client resume without a full handshake, at the
  // cost of state the server must keep secret across connections; off, none are issued.
  bool tls_session_tickets = false;
};

struct DisconnectWatchState;

// Watches a client connection while its handler waits on something else (an upstream answer, an
// engine's tokens): when the client closes the connection, `on_close` runs once, on the
// connection's executor, so the handler can abort work nobody will read. Bytes of a next
// (pipelined) request end the watch silently. Destroying the watch ends it; `on_close` never runs
// afterwards. The socket wait begins at the connection context's next tick (within 10 ms; a close
// that came before it is seen then): a watch ended sooner, as for most short answers, costs no
// system call. Threading: create and destroy on the handler's executor (the connection's).
class DisconnectWatch {
 public:
  DisconnectWatch() = default;
  DisconnectWatch(DisconnectWatch&&) noexcept;
  DisconnectWatch& operator=(DisconnectWatch&&) noexcept;
  ~DisconnectWatch();

  bool fired() const;  // the client has closed

 private:
  friend class Responder;
  DisconnectWatch(std::shared_ptr<detail::Session> session,
                  std::shared_ptr<DisconnectWatchState> state);
  void end();

  std::shared_ptr<detail::Session> session_;  // null when the request came through a sink
  ResponseSink* sink_ = nullptr;
  std::shared_ptr<DisconnectWatchState> state_;
};

// The response side of one request. Either send() once, or start_stream(), write()* and finish().
// A handler that returns without responding gets a 500; one that leaves a stream open has it
// finished for it. After any failed write the connection is closed and later calls fail at once.
// The server makes one per request it reads; another front end makes one over its ResponseSink
// (response_sink.h) and runs a handler with it.
class Responder {
 public:
  explicit Responder(ResponseSink& sink) : session_(nullptr), sink_(&sink), keep_alive_(false) {}

  boost::asio::awaitable<Status> send(Response response);

  // Sends the status line and headers with Transfer-Encoding: chunked.
  // (A span, not a vector: a defaulted vector would be a temporary inside the caller's co_await,
  // which g++ 12 may destroy twice.)
  // With `hold`, the head is kept and goes out with the first chunk (or the terminating one) in
  // one write: for a caller that already holds its first chunk (the proxy, once a worker's first
  // token is in), one write and one wake-up of the client fewer per stream.
  boost::asio::awaitable<Status> start_stream(unsigned status, std::string_view content_type,
                                              std::span<const Header> headers = {},
                                              bool hold = false);
  // start_stream for Server-Sent Events (text/event-stream, no caching, no proxy buffering).
  boost::asio::awaitable<Status> start_sse(unsigned status = 200);
  // One chunk (empty data is skipped: an empty chunk would end the body).
  boost::asio::awaitable<Status> write(std::string_view data);
  // One SSE event: "data: <payload>\n\n", as one chunk.
  boost::asio::awaitable<Status> write_sse(std::string_view payload);
  // The terminating chunk, after `last` as one more chunk when it has bytes: a stream whose last
  // bytes and end are known together sends them in one write.
  boost::asio::awaitable<Status> finish(std::string_view last = {});

  // Starts watching for the client closing the connection (see DisconnectWatch). Watch while
  // waiting, not while a response is being written by another coroutine.
  DisconnectWatch watch_disconnect(std::function<void()> on_close);

  // A header every response to this request carries, whichever way the handler answers (added
  // before it answers: CORS, request ids). Overrides a handler's header of the same name.
  void add_header(std::string name, std::string value);
  // The request was a HEAD answered by its path's GET handler: whatever the handler sends goes
  // out as its head only (Content-Length as the body's would be; a stream's first write() sends
  // the head and fails Cancelled, so a streaming handler stops).
  void answer_head_only() { head_only_ = true; }
  // The status sent (0 until a response or stream has started).
  unsigned status() const { return status_; }

  bool started() const { return state_ != State::kIdle; }
  bool streaming() const { return state_ == State::kStreaming; }
  bool failed() const { return failed_; }
  // Whether the connection stays open after this response.
  bool keep_alive() const { return keep_alive_; }
  boost::asio::any_io_executor get_executor() const;

 private:
  friend struct detail::Session;
  enum class State { kIdle, kStreaming, kDone };
  Responder(detail::Session* session, bool keep_alive)
      : session_(session), keep_alive_(keep_alive) {}
  Status fail(const char* what, const boost::system::error_code& ec);
  // write() and finish() on a connection of our own: `data` as one chunk (none when empty), after
  // a held head, and with `end` the terminating chunk, in one write.
  boost::asio::awaitable<boost::system::error_code> write_chunk(std::string_view data, bool end);
  Status failed_sink(Status s);
  // Adds ServerOptions::local_error_header to an error the handler did not mark.
  void mark_local_error(std::vector<Header>& headers, unsigned status) const;
  // The handler's headers and the ones added here, for a sink.
  std::vector<Header> with_added(std::span<const Header> headers) const;

  detail::Session* session_;
  ResponseSink* sink_ = nullptr;
  bool keep_alive_;
  State state_ = State::kIdle;
  bool failed_ = false;
  bool head_only_ = false;
  unsigned status_ = 0;
  std::vector<Header> added_headers_;
  std::string sse_scratch_;
  std::string write_scratch_;  // a TLS write's bytes (detail::write_parts)
  std::string held_head_;      // start_stream(hold): written with the next chunk
};

using Handler = std::function<boost::asio::awaitable<void>(const Request&, Responder&)>;

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t requests = 0;
  uint64_t bad_requests = 0;  // malformed (400), too large (413 / 414 / 431)
  // 400 / 501: framing a proxy could read otherwise (detail/framing.h), the connection closed
  uint64_t framing_refusals = 0;
  uint64_t read_timeouts = 0;  // requests not whole within read_timeout, closed unanswered
  uint64_t idle_timeouts = 0;  // kept-alive connections closed after idle_timeout
  uint64_t open_connections = 0;
  uint64_t idle_shed = 0;            // idle connections closed to make room (max_connections)
  uint64_t refused_connections = 0;  // closed at once: over max_connections + reserved
  uint64_t restricted_refusals = 0;  // 503s on reserved connections (not an always-available route)
  uint64_t body_budget_refusals = 0;    // 429s: max_inflight_body_bytes reached
  uint64_t inflight_body_bytes = 0;     // reserved now
  uint64_t tls_handshake_failures = 0;  // connections closed because their TLS handshake failed
};

class Server {
 public:
  Server(IoPool& pool, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Exact-path route. A later route for the same (method, path) replaces the earlier one.
  void route(Verb method, std::string path, Handler handler);
  // Every path starting with `prefix` (after exact routes; the longest prefix wins).
  void route_prefix(Verb method, std::string prefix, Handler handler);
  // `method` on any path no exact or prefix route serves it on (CORS preflights: OPTIONS).
  void route_every_path(Verb method, Handler handler);
  // The exact path stays served on the connections reserved beyond max_connections.
  void always_available(std::string path);

  // Binds and listens. After it returns OK, port() is the bound port.
  Status start();
  uint16_t port() const;
  boost::asio::ip::tcp::endpoint endpoint() const;

  // Closes the listening socket: new connections are refused. With drop_connections, the open
  // connections are closed too (streams in flight fail). The port stays reserved for reopen.
  void close_listener(bool drop_connections);
  // Listens again on the same address and port.
  Status reopen_listener();
  bool listening() const;

  // Graceful shutdown's first step: the listener stays open (readiness probes and late clients
  // get the application's answer, typically a 503), but every response from now on closes its
  // connection and connections waiting for their next request are closed. Requests in flight
  // go on. From any thread; stop() ends it.
  void begin_drain();
  bool draining() const;

  // Stops listening, closes every connection and waits up to `grace` for their handlers to end.
  // Returns whether all ended in time. Call from outside the pool.
  bool stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  // stop() without the wait, callable from anywhere (also from a handler).
  void request_stop();

  ServerStats stats() const;

 private:
  std::shared_ptr<detail::ServerState> state_;
};

}  // namespace kvgate::http
