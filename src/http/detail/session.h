// The server's internals: shared state (kept alive by every connection coroutine, so a coroutine
// that outlives Server never touches freed memory) and one connection.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/server.h"
#include "kvgate/http/stream.h"

namespace kvgate::http::detail {

struct Session : std::enable_shared_from_this<Session> {
  Session(uint64_t id, boost::asio::ip::tcp::socket socket, const ServerOptions& options,
          boost::asio::ssl::context* tls)
      : id(id), stream(std::move(socket), tls), options(options) {}

  // Closes the socket on its own context (pending operations fail with operation_aborted).
  void close_async();
  Responder responder(bool keep_alive) { return Responder(this, keep_alive); }

  const uint64_t id;
  Stream stream;
  // Request bytes read and not yet parsed: the read loop's, and on a TLS connection also what a
  // DisconnectWatch read while the handler waited (a pipelined request).
  boost::beast::flat_buffer input;
  // The head of the answer being written (one at a time): its room is kept between answers.
  std::string head_out;
  const ServerOptions& options;
  // Accepted beyond max_connections: only always-available routes are served on it.
  bool restricted = false;
  // Waiting for its next request (not reading one, not in a handler), and since when: the
  // longest-idle connection is the one shed at the connection limit.
  std::atomic<bool> idle{false};
  std::atomic<int64_t> idle_since_ns{0};
  // Waiting for a request after the first: what a drain closes (a new connection's first request
  // is still read and answered). Sequentially consistent with ServerState::draining.
  std::atomic<bool> awaiting_next{false};
};

struct Route {
  Verb method;
  Handler handler;
};

struct ServerState {
  ServerState(IoPool& pool, ServerOptions options) : pool(pool), options(std::move(options)) {}

  boost::asio::io_context& listener_context() {
    return pool.context(options.pin_context.value_or(0));
  }
  boost::asio::io_context& connection_context() {
    return options.pin_context ? pool.context(*options.pin_context) : pool.next();
  }
  // The handler for a request, or the error to answer with (404, 405). A HEAD with no route of
  // its own takes the path's GET route (`*as_get` set): its answer goes out without its body.
  const Handler* find(Verb method, std::string_view path, unsigned* error_status,
                      bool* as_get = nullptr) const;
  // The methods `path` answers, for a 405's Allow ("GET, HEAD, POST"; HEAD wherever GET is).
  std::string allowed(std::string_view path) const;

  IoPool& pool;
  const ServerOptions options;
  // Written before start() only.
  absl::flat_hash_map<std::string, std::vector<Route>> exact;
  absl::flat_hash_set<std::string> always_available;
  std::map<std::string, std::vector<Route>, std::greater<>> prefixes;  // longest first
  std::vector<Route> every_path;  // a method's handler for paths no other route takes it on
  // Set by start() when the options name a certificate and key: every connection is TLS.
  std::unique_ptr<boost::asio::ssl::context> tls;

  mutable Mutex mu;
  std::condition_variable_any sessions_changed;  // with mu: a session ended
  std::shared_ptr<boost::asio::ip::tcp::acceptor> acceptor KVGATE_GUARDED_BY(mu);
  boost::asio::ip::tcp::endpoint bound KVGATE_GUARDED_BY(mu);
  absl::flat_hash_map<uint64_t, std::weak_ptr<Session>> sessions KVGATE_GUARDED_BY(mu);
  bool stopping KVGATE_GUARDED_BY(mu) = false;
  bool started KVGATE_GUARDED_BY(mu) = false;
  uint64_t next_session_id KVGATE_GUARDED_BY(mu) = 1;

  // Draining (begin_drain): every response closes its connection, and a connection about to wait
  // for its next request closes instead. (Sequentially consistent with Session::idle: either the
  // session sees it before waiting, or begin_drain sees the session idle and closes it.)
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bad_requests{0};
  std::atomic<uint64_t> framing_refusals{0};
  std::atomic<uint64_t> read_timeouts{0};
  std::atomic<uint64_t> idle_timeouts{0};
  std::atomic<uint64_t> idle_shed{0};
  std::atomic<uint64_t> refused_connections{0};
  std::atomic<uint64_t> restricted_refusals{0};
  std::atomic<uint64_t> body_budget_refusals{0};
  std::atomic<uint64_t> inflight_body_bytes{0};
  std::atomic<uint64_t> tls_handshake_failures{0};
};

}  // namespace kvgate::http::detail
