// HTTP/1.1 client: one keep-alive connection at a time, coroutine-based, with a synchronous
// wrapper for tests and tools.
//
//   // In a coroutine on some executor:
//   auto conn = co_await http::Connection::connect("127.0.0.1", port);
//   http::ClientRequest req{.method = http::Verb::post, .target = "/v1/completions", .body = json};
//   auto res = co_await (*conn)->send(req);
//   // Streaming: the body arrives piece by piece (chunked transfer decoded), e.g. into SseParser.
//   auto head = co_await (*conn)->send_streaming(req, [&](std::string_view piece) {
//     parser.feed(piece, on_event); return Status();
//   });
//
// Arguments with destructors are built in named locals before the co_await (g++ 12 may destroy a
// temporary inside a co_await expression twice; docs/architecture.md).
//
// A connection is reusable() after a complete response that allowed keep-alive; the gateway's
// upstream pool keeps such connections per worker. Timeouts: connecting is bounded by
// connect_timeout; a whole send() and the response head of send_streaming() by request_timeout,
// and send()'s answer, once its first bytes came, by idle_timeout too (an answer is written at
// once); each body read of send_streaming() by idle_timeout (a stream may run long, but not go
// quiet).
//
// Threading: a Connection is used by one coroutine at a time, on the executor it was connected
// on. SyncClient is not thread-safe; use one per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "boost/asio/awaitable.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "kvgate/core/result.h"
#include "kvgate/http/field_list.h"
#include "kvgate/http/message.h"
#include "kvgate/http/stream.h"

namespace kvgate::http {

struct ClientOptions {
  // Set: HTTPS. The server's certificate must chain to the context's trusted roots and name the
  // host connected to (SNI is sent); see make_client_tls().
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{60'000};
  std::chrono::milliseconds idle_timeout{60'000};
  size_t body_limit = 64 << 20;  // bytes, for send(); streamed bodies are not limited
};

struct ClientRequest {
  Verb method = Verb::get;
  std::string target = "/";
  std::string body;
  // When not empty, sent instead of `body` without a copy (a proxy's client body): the bytes
  // must outlive every exchange that sends the request.
  std::string_view body_view;
  std::string content_type = "application/json";
  std::vector<Header> headers;
};

struct ClientResponse {
  unsigned status = 0;
  FieldList headers;
  std::string body;  // empty for send_streaming()
  std::string_view header(std::string_view name) const { return headers.get(name); }
};

// Receives each piece of a streamed body as it arrives; a non-OK status aborts the exchange
// (the connection is then closed) and is returned by send_streaming().
using BodyCallback = std::function<Status(std::string_view)>;
// The coroutine form takes a non-owning reference: a std::function built from a lambda would be a
// temporary inside the caller's co_await, which g++ 12 may destroy twice.
using BodyRef = absl::FunctionRef<Status(std::string_view)>;

// A client TLS context trusting the PEM roots in `ca_path` (empty: the system's roots), TLS 1.2
// and later, peers verified.
Result<std::shared_ptr<boost::asio::ssl::context>> make_client_tls(const std::string& ca_path);

class Connection {
 public:
  // Resolves `host` and connects on the calling coroutine's executor.
  // Resolves `host` and connects on the calling coroutine's executor. `host` must stay valid
  // until the awaitable completes (a view, not a string: no temporary inside the caller's
  // co_await).
  static boost::asio::awaitable<Result<std::unique_ptr<Connection>>> connect(
      std::string_view host, uint16_t port, ClientOptions options = {});

  // Sends the request and reads the whole response.
  boost::asio::awaitable<Result<ClientResponse>> send(const ClientRequest& request);
  // Sends the request and streams the response body to `on_body`; returns the head when the body
  // has ended.
  boost::asio::awaitable<Result<ClientResponse>> send_streaming(const ClientRequest& request,
                                                                BodyRef on_body);

  // The same exchange with the body pulled piece by piece, so the caller can await its own writes
  // between pieces (a proxy's backpressure): start_streaming() returns the response head, then
  // next_piece() returns each body piece (valid until the next call) and an empty view at the end.
  // A non-zero `timeout` replaces the options' request_timeout (for the head) or idle_timeout (for
  // one piece): a proxy waits longer for a stream's first token than between two tokens.
  boost::asio::awaitable<Result<ClientResponse>> start_streaming(
      const ClientRequest& request, std::chrono::milliseconds timeout = {});
  // A piece is what one read brought plus every further piece already buffered (up to 16 KiB):
  // what arrived together leaves together, and nothing waits for bytes to join it.
  boost::asio::awaitable<Result<std::string_view>> next_piece(
      std::chrono::milliseconds timeout = {});
  // Whether the streamed body has been read to its end: the piece just returned was its last, and
  // next_piece() returns the end without reading (and must still be called, to end the exchange).
  bool body_complete() const;

  bool reusable() const { return reusable_; }
  // Whether the last exchange failed before any byte of its response arrived.
  bool failed_before_response() const { return failed_before_response_; }
  // Whether the last exchange failed because the server had closed the connection: no response
  // byte arrived and the failure was the peer's close or reset, not a timeout. On a reused
  // keep-alive connection this means the server dropped it while idle (uvicorn does after 5 s),
  // so the request can be sent again on a fresh connection without running twice.
  bool closed_by_peer() const { return closed_by_peer_; }
  // For a connection at rest between exchanges: true if it can carry another request, checked
  // without blocking. False once the server has closed or reset it, or sent bytes nobody asked
  // for (a connection in that state would answer the next request with stale bytes or an EOF).
  // Without `peek`, only what is known without asking the socket (a syscall) is checked.
  bool idle_and_open(bool peek = true);
  uint64_t exchanges() const { return exchanges_; }
  void close();

  Connection(Stream stream, std::string host_header, ClientOptions options);
  ~Connection();

 private:
  // A streamed exchange's parser and the fields it is filling (the head's move to the answer):
  // allocated once per connection, the parser renewed per exchange.
  struct Streamed;

  boost::asio::awaitable<Status> write_request(const ClientRequest& request,
                                               std::chrono::milliseconds timeout);
  Status failure(const char* what, const boost::system::error_code& ec);
  // Parses body bytes already in buffer_ into the current piece, without reading.
  void take_buffered();

  Stream stream_;
  boost::beast::flat_buffer buffer_;
  std::string head_;  // the request head being written; its room is kept between exchanges
  std::unique_ptr<Streamed> streamed_;
  bool stream_keep_alive_ = false;  // the streamed answer's head allows keeping the connection
  std::unique_ptr<char[]> piece_;
  boost::system::error_code buffered_error_;  // met by take_buffered(): the next piece's failure
  std::string host_header_;
  ClientOptions options_;
  bool reusable_ = true;
  bool failed_before_response_ = false;
  bool closed_by_peer_ = false;
  uint64_t exchanges_ = 0;
};

// A blocking client over one reusable connection, for tests and tools. Reconnects when the
// connection is not reusable or the server has closed it, and sends again once when the server
// closes a reused connection under the request.
class SyncClient {
 public:
  SyncClient(std::string host, uint16_t port, ClientOptions options = {});
  ~SyncClient();

  Result<ClientResponse> request(const ClientRequest& request);
  Result<ClientResponse> get(std::string target);
  Result<ClientResponse> post(std::string target, std::string body);
  Result<ClientResponse> stream(const ClientRequest& request, BodyCallback on_body);

  // Connections opened so far (keep-alive reuse keeps this at 1).
  uint64_t connects() const { return connects_; }
  void close();

 private:
  Result<ClientResponse> run(const ClientRequest& request, const BodyCallback* on_body);
  template <class Future>
  void run_until_ready(Future& fut);

  boost::asio::io_context ctx_;
  std::string host_;
  uint16_t port_;
  ClientOptions options_;
  std::unique_ptr<Connection> conn_;
  uint64_t connects_ = 0;
};

}  // namespace kvgate::http
