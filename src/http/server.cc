#include "kvgate/http/server.h"

#include <exception>
#include <set>
#include <string>
#include <utility>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/ssl/stream_base.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/string_body.hpp"
#include "boost/beast/http/write.hpp"
#include "http/detail/flat_parser.h"
#include "http/detail/framing.h"
#include "http/detail/kept_room.h"
#include "http/detail/quick_head.h"
#include "http/detail/read_message.h"
#include "http/detail/session.h"
#include "kvgate/core/log.h"

namespace kvgate::http {
namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using detail::ServerState;
using detail::Session;

namespace detail {

void Session::close_async() {
  net::post(stream.get_executor(), [self = shared_from_this()] {
    boost::system::error_code ec;
    self->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    self->stream.close();
  });
}

namespace {

// The routes of `path` (exact, else the longest prefix), or null.
const std::vector<Route>* routes_of(const ServerState& st, std::string_view path) {
  if (auto it = st.exact.find(absl::string_view(path.data(), path.size())); it != st.exact.end())
    return &it->second;
  for (const auto& [prefix, r] : st.prefixes) {
    if (path.substr(0, prefix.size()) == prefix) return &r;
  }
  return nullptr;
}

const Handler* handler_for(const ServerState& st, const std::vector<Route>* routes, Verb method) {
  if (routes != nullptr) {
    for (const Route& r : *routes) {
      if (r.method == method) return &r.handler;
    }
  }
  for (const Route& r : st.every_path) {
    if (r.method == method) return &r.handler;
  }
  return nullptr;
}

}  // namespace

const Handler* ServerState::find(Verb method, std::string_view path, unsigned* error_status,
                                 bool* as_get) const {
  const std::vector<Route>* routes = routes_of(*this, path);
  if (const Handler* h = handler_for(*this, routes, method)) return h;
  if (method == Verb::head) {  // RFC 9110 9.3.2: HEAD is GET without the body
    if (const Handler* h = handler_for(*this, routes, Verb::get)) {
      if (as_get != nullptr) *as_get = true;
      return h;
    }
  }
  *error_status = routes == nullptr ? 404 : 405;
  return nullptr;
}

std::string ServerState::allowed(std::string_view path) const {
  std::set<std::string> methods;
  const auto add = [&](const std::vector<Route>& routes) {
    for (const Route& r : routes) {
      const auto name = boost::beast::http::to_string(r.method);
      methods.emplace(name.data(), name.size());
      if (r.method == Verb::get) methods.emplace("HEAD");
    }
  };
  if (const std::vector<Route>* routes = routes_of(*this, path)) add(*routes);
  add(every_path);
  std::string out;
  for (const std::string& m : methods) out += (out.empty() ? "" : ", ") + m;
  return out;
}

}  // namespace detail

namespace {

// What a chunked body (no Content-Length) reserves of max_inflight_body_bytes until it is read.
constexpr uint64_t kChunkedReservation = 1 << 20;
// A connection keeps at most this much of a past request body's room for the next request: most
// bodies fit, and ten thousand idle connections hold at most 160 MiB of it.
constexpr size_t kKeptBodyRoom = 16 << 10;

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = log::get("http");
  return l;
}

bool is_parse_error(const boost::system::error_code& ec) {
  if (ec.category() != beast_http::make_error_code(beast_http::error::bad_method).category()) {
    return false;
  }
  return ec != beast_http::error::end_of_stream && ec != beast_http::error::partial_message &&
         ec != beast_http::error::need_more;
}

void unregister(ServerState& st, uint64_t id) {
  {
    MutexLock l(&st.mu);
    st.sessions.erase(id);
  }
  st.sessions_changed.notify_all();
}

// The wait predicate runs with st.mu held (condition_variable_any relocks it), which the
// analysis cannot follow into a lambda.
bool no_sessions(const ServerState& st) KVGATE_NO_THREAD_SAFETY_ANALYSIS {
  return st.sessions.empty();
}

// Waits (holding st.mu) until no session is left or the deadline passes.
bool await_no_sessions(ServerState& st, std::chrono::milliseconds grace) KVGATE_REQUIRES(st.mu) {
  return st.sessions_changed.wait_for(st.mu, grace, [&st] { return no_sessions(st); });
}

int64_t steady_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// Body bytes reserved against max_inflight_body_bytes for one request, released when it ends.
class BodyReservation {
 public:
  explicit BodyReservation(ServerState& st) : st_(st) {}
  ~BodyReservation() {
    if (bytes_ > 0) st_.inflight_body_bytes.fetch_sub(bytes_, std::memory_order_relaxed);
  }
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;
  // Takes `n` more bytes if the budget allows (always, with `force`).
  bool take(uint64_t n, bool force = false) {
    const uint64_t limit = st_.options.max_inflight_body_bytes;
    const uint64_t before = st_.inflight_body_bytes.fetch_add(n, std::memory_order_relaxed);
    if (!force && limit > 0 && before + n > limit) {
      st_.inflight_body_bytes.fetch_sub(n, std::memory_order_relaxed);
      return false;
    }
    bytes_ += n;
    return true;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  ServerState& st_;
  uint64_t bytes_ = 0;
};

// Answers a request the server itself rejects, then the connection closes. Up to `drain` bytes
// of what the client still sends are read and dropped, so it reads the answer instead of a reset.
net::awaitable<void> reject(Session& s, unsigned status, std::string_view message,
                            size_t drain = 4u << 20) {
  Response r = Response::error(status, message, error_type_for(status));
  beast_http::response<beast_http::string_body> res{static_cast<beast_http::status>(status), 11};
  res.set(beast_http::field::server, s.options.server_name);
  res.set(beast_http::field::content_type, r.content_type);
  res.keep_alive(false);
  res.body() = std::move(r.body);
  res.prepare_payload();
  s.stream.expires_after(s.options.write_timeout);
  boost::system::error_code ec;
  co_await beast_http::async_write(s.stream, res, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return;
  // Closing with unread request bytes would reset the connection and could destroy the answer
  // before the client reads it: stop sending, then drain (bounded) until the client closes.
  s.stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  s.stream.expires_after(std::chrono::seconds(1));
  char sink[16 << 10];
  s.stream.expires_after(std::chrono::seconds(drain > (4u << 20) ? 30 : 1));
  for (size_t drained = 0; !ec && drained < drain;) {
    drained += co_await s.stream.async_read_some(net::buffer(sink),
                                                 net::redirect_error(net::use_awaitable, ec));
  }
}

// The TLS handshake of a new connection; false when it failed (counted and logged).
net::awaitable<bool> handshake(ServerState& st, Session& s, const tcp::endpoint& remote) {
  Stream::TlsStream* tls = s.stream.tls();
  if (tls == nullptr) co_return true;
  boost::system::error_code ec;
  s.stream.expires_after(st.options.read_timeout);
  co_await tls->async_handshake(net::ssl::stream_base::server,
                                net::redirect_error(net::use_awaitable, ec));
  if (!ec) co_return true;
  st.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
  KVGATE_LOG_EVERY_MS(logger(), spdlog::level::info, 1000, "TLS handshake with {} failed: {}",
                      remote.address().to_string(), ec.message());
  co_return false;
}

// The keep-alive wait: until the next request's first byte (or what the last read buffered).
// False when the connection should close instead (the peer left, the wait timed out, a drain).
net::awaitable<bool> await_request(ServerState& st, Session& s, uint64_t served) {
  if (s.input.size() > 0) co_return true;
  s.idle_since_ns.store(steady_ns(), std::memory_order_relaxed);
  s.idle.store(true, std::memory_order_release);
  // No next request on a kept-alive connection while draining; a new connection's first request
  // is still read and answered (a readiness probe learns the gateway is draining).
  s.awaiting_next.store(served > 0);
  if (served > 0 && st.draining.load()) co_return false;
  s.stream.expires_after(st.options.idle_timeout);
  boost::system::error_code ec;
  const size_t n = co_await s.stream.async_read_some(s.input.prepare(1024),
                                                     net::redirect_error(net::use_awaitable, ec));
  s.idle.store(false, std::memory_order_release);
  s.awaiting_next.store(false);
  if (ec == beast::error::timeout) st.idle_timeouts.fetch_add(1, std::memory_order_relaxed);
  if (ec) co_return false;
  s.input.commit(n);
  co_return true;
}

// The answer to a request whose reading failed with `ec` (0: none, the peer left or timed out).
net::awaitable<void> refuse_unread(ServerState& st, Session& s, boost::system::error_code ec,
                                   bool line_read) {
  unsigned status = 0;
  std::string why;
  if (ec == beast_http::error::body_limit) {
    status = 413;
    why = "the request body is larger than " + std::to_string(st.options.body_limit) + " bytes (" +
          st.options.body_limit_name + ")";
  } else if (ec == beast_http::error::header_limit) {
    // The request line alone overran the limit (the parser never got past it): a URI too long,
    // not too many headers.
    status = line_read ? 431 : 414;
    why = line_read ? "request header too large" : "request line (URI) too long";
  } else if (is_parse_error(ec)) {
    status = 400;
    why = "malformed HTTP request";
  } else if (ec == beast::error::timeout) {
    // A request that did not arrive whole within read_timeout (a client trickling it): closed
    // without an answer, as a client that never finishes its request reads none.
    st.read_timeouts.fetch_add(1, std::memory_order_relaxed);
  }
  if (status == 0) co_return;
  // Beast's own refusals of conflicting lengths and codings, and folded lines (FlatParser), are
  // framing refusals.
  const bool framing = ec == beast_http::error::bad_transfer_encoding ||
                       ec == beast_http::error::bad_content_length ||
                       ec == beast_http::error::bad_obs_fold;
  (framing ? st.framing_refusals : st.bad_requests).fetch_add(1, std::memory_order_relaxed);
  co_await reject(s, status, why);
}

// Whether a request whose head names `path` and a body of `declared` bytes (`chunked`: not yet
// known) may be read: on a connection beyond the limit only always-available routes are, and its
// body must fit the in-flight budget. Refuses it (the answer sent) when not.
net::awaitable<bool> admit_head(ServerState& st, Session& s, std::string_view path,
                                uint64_t declared, bool chunked, BodyReservation& reservation) {
  if (s.restricted && !st.always_available.contains(absl::string_view(path.data(), path.size()))) {
    st.restricted_refusals.fetch_add(1, std::memory_order_relaxed);
    co_await reject(s, 503, "the server is at its connection limit; retry later");
    co_return false;
  }
  if (reservation.take(chunked ? kChunkedReservation : declared)) co_return true;
  st.body_budget_refusals.fetch_add(1, std::memory_order_relaxed);
  const bool alone = declared > st.options.max_inflight_body_bytes;
  const std::string why = (alone ? "a request body of " + std::to_string(declared) +
                                       " bytes is larger than the server holds at once: "
                                 : std::string("too many request bytes in flight; retry later: ")) +
                          std::to_string(st.options.max_inflight_body_bytes) + " bytes (" +
                          st.options.inflight_limit_name + ")";
  co_await reject(s, alone ? 413 : 429, why, std::min<size_t>(declared, st.options.body_limit));
  co_return false;
}

// Reads the rest of a request Beast parses (its head read, admitted): the body, after a
// 100-continue when asked. False when the connection must close (refused, or the peer left).
net::awaitable<bool> read_body(ServerState& st, Session& s, detail::RequestParser& parser,
                               Request& req, BodyReservation& reservation) {
  boost::system::error_code ec;
  if (beast::iequals(req.fields.get("expect"), "100-continue")) {
    beast_http::response<beast_http::empty_body> cont{beast_http::status::continue_, 11};
    co_await beast_http::async_write(s.stream, cont, net::redirect_error(net::use_awaitable, ec));
  }
  if (!ec && !parser.is_done()) {
    ec = co_await detail::read_message(s.stream, s.input, parser, detail::ReadUntil::kWhole);
  }
  if (ec) {
    co_await refuse_unread(st, s, ec, /*line_read=*/true);
    co_return false;
  }
  if (parser.chunked() && req.payload.size() > kChunkedReservation) {
    reservation.take(req.payload.size() - kChunkedReservation, /*force=*/true);
  }
  req.payload.reserve(req.payload.size() + kPayloadPadding);  // a chunked body's grew as read
  req.verb = parser.method();
  req.request_target = std::move(parser.target());
  co_return true;
}

// Reads the next request into `req`: a request of the common shape that arrived whole is taken
// as it is, any other is Beast's (its framing checked before its body is read). False when the
// connection must close (refused with an answer, or the peer left); `keep_alive` is the request's.
net::awaitable<bool> read_request(ServerState& st, Session& s, Request& req,
                                  BodyReservation& reservation, bool* keep_alive) {
  s.stream.expires_after(st.options.read_timeout);
  detail::QuickHead quick;
  if (detail::quick_parse_request(
          std::string_view(static_cast<const char*>(s.input.data().data()), s.input.size()),
          st.options.header_limit, st.options.body_limit, &quick, &req.fields)) {
    const std::string_view path = quick.target.substr(0, quick.target.find('?'));
    if (!co_await admit_head(st, s, path, quick.body.size(), false, reservation)) co_return false;
    req.verb = quick.method;
    req.request_target.assign(quick.target);
    req.payload.reserve(quick.body.size() + kPayloadPadding);
    req.payload.assign(quick.body);
    s.input.consume(quick.size());
    *keep_alive = true;  // HTTP/1.1 without a Connection field
    co_return true;
  }
  detail::RequestParser parser(&req.fields);
  parser.collect_body(&req.payload);
  parser.body_limit(st.options.body_limit);
  parser.header_limit(st.options.header_limit);
  const boost::system::error_code ec =
      co_await detail::read_message(s.stream, s.input, parser, detail::ReadUntil::kHeader);
  if (ec) {
    co_await refuse_unread(st, s, ec, /*line_read=*/!parser.target().empty());
    co_return false;
  }
  // A head whose end a proxy in front could place elsewhere: refused before its body is read.
  if (auto refusal = detail::request_framing_refusal(req.fields, parser.version())) {
    st.framing_refusals.fetch_add(1, std::memory_order_relaxed);
    co_await reject(s, refusal->status, refusal->reason);
    co_return false;
  }
  const std::string_view target = parser.target();
  if (!co_await admit_head(st, s, target.substr(0, target.find('?')),
                           parser.content_length().value_or(0), parser.chunked(), reservation) ||
      !co_await read_body(st, s, parser, req, reservation)) {
    co_return false;
  }
  *keep_alive = parser.keep_alive();
  co_return true;
}

// Runs the request's handler (or answers 404 / 405) and makes sure an answer went out whole.
// False when the connection must close.
net::awaitable<bool> serve(ServerState& st, Session& s, const Request& req, bool keep_alive) {
  Responder responder = s.responder(keep_alive && !st.draining.load());
  if (!req.request_id.empty()) responder.add_header(st.options.request_id_header, req.request_id);
  unsigned error_status = 0;
  bool head_as_get = false;
  const Handler* handler = st.find(req.method(), req.path(), &error_status, &head_as_get);
  if (head_as_get) responder.answer_head_only();
  std::string failure;
  try {
    if (handler != nullptr) {
      co_await (*handler)(req, responder);
    } else {
      Response r = Response::error(error_status,
                                   error_status == 404 ? "no such route" : "method not allowed",
                                   error_type_for(error_status));
      if (error_status == 405) r.headers.emplace_back("Allow", st.allowed(req.path()));
      (void)co_await responder.send(std::move(r));
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty()) {
    KVGATE_LOG_EVERY_MS(logger(), spdlog::level::err, 1000, "handler for {} threw: {}",
                        std::string(req.path()), failure);
  }
  if (!responder.started()) {
    Response r = Response::error(500, "handler sent no response", "server_error");
    (void)co_await responder.send(std::move(r));
  } else if (responder.streaming()) {
    (void)co_await responder.finish();
  }
  co_return !responder.failed() && responder.keep_alive();
}

// "/v1/chat/completions/" is "/v1/chat/completions" when only the latter is a route (clients
// that join a base URL and a path with a slash too many; FastAPI redirects them): the target is
// rewritten, so the handler and whatever it forwards see the route's own path.
void drop_trailing_slash(const ServerState& st, Request& req) {
  const std::string_view path = req.path();
  if (path.size() < 2 || path.back() != '/') return;
  const auto exact = [&](std::string_view p) {
    return st.exact.find(absl::string_view(p.data(), p.size())) != st.exact.end();
  };
  if (exact(path) || !exact(path.substr(0, path.size() - 1))) return;
  req.request_target.erase(path.size() - 1, 1);
}

net::awaitable<void> run_session(std::shared_ptr<ServerState> st, std::shared_ptr<Session> s) {
  boost::system::error_code ec;
  const tcp::endpoint remote = s->stream.socket().remote_endpoint(ec);
  if (co_await handshake(*st, *s, remote)) {
    uint64_t served = 0;  // requests read on this connection
    // One request object for the connection: its strings keep their room from one request to
    // the next (three allocations fewer per request), but not a large body's or head's while
    // idle.
    Request req;
    req.remote = remote;
    for (;;) {
      req.verb = Verb::get;
      req.request_target.clear();
      req.fields.clear();
      detail::clear_keeping_room(req.payload, kKeptBodyRoom);
      if (!co_await await_request(*st, *s, served)) break;
      s->idle.store(false, std::memory_order_release);
      BodyReservation reservation(*st);  // released when the request's handler returns
      bool keep_alive = false;
      if (!co_await read_request(*st, *s, req, reservation, &keep_alive)) break;
      drop_trailing_slash(*st, req);
      if (!st->options.request_id_header.empty()) {
        req.request_id = request_id_or_new(req.header(st->options.request_id_header));
      }
      st->requests.fetch_add(1, std::memory_order_relaxed);
      ++served;
      if (!co_await serve(*st, *s, req, keep_alive)) break;
    }
    s->stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  }
  s->stream.close();
  unregister(*st, s->id);
}

// The session that has waited longest for its next request, if any is waiting.
std::shared_ptr<Session> longest_idle(ServerState& st) KVGATE_REQUIRES(st.mu) {
  std::shared_ptr<Session> best;
  int64_t best_since = 0;
  for (const auto& [id, weak] : st.sessions) {
    auto s = weak.lock();
    if (!s || !s->idle.load(std::memory_order_acquire)) continue;
    const int64_t since = s->idle_since_ns.load(std::memory_order_relaxed);
    if (!best || since < best_since) {
      best = std::move(s);
      best_since = since;
    }
  }
  return best;
}

net::awaitable<void> accept_loop(std::shared_ptr<ServerState> st,
                                 std::shared_ptr<tcp::acceptor> acceptor) {
  for (;;) {
    tcp::socket socket(st->connection_context());
    boost::system::error_code ec;
    co_await acceptor->async_accept(socket, net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) co_return;
      // Out of descriptors and the like: back off instead of spinning on the error.
      KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 1000, "accept failed: {}", ec.message());
      net::steady_timer pause(co_await net::this_coro::executor, std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    st->connections_accepted.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<Session> session;
    std::shared_ptr<Session> shed;
    {
      MutexLock l(&st->mu);
      if (st->stopping) {
        socket.close(ec);
        continue;
      }
      bool restricted = false;
      const size_t limit = st->options.max_connections;
      if (limit > 0 && st->sessions.size() >= limit) {
        shed = longest_idle(*st);
        if (shed) {
          st->sessions.erase(shed->id);  // leaves now; its coroutine ends on its own
          st->idle_shed.fetch_add(1, std::memory_order_relaxed);
        }
      }
      if (limit > 0 && st->sessions.size() >= limit) {
        // Still full (every other connection is busy, or reserved ones are open).
        if (st->sessions.size() < limit + st->options.reserved_connections) {
          restricted = true;
        } else {
          st->refused_connections.fetch_add(1, std::memory_order_relaxed);
          socket.close(ec);
          if (shed) shed->close_async();
          continue;
        }
      }
      session = std::make_shared<Session>(st->next_session_id++, std::move(socket), st->options,
                                          st->tls.get());
      session->restricted = restricted;
      st->sessions.emplace(session->id, session);
    }
    if (shed) shed->close_async();
    net::co_spawn(session->stream.get_executor(), run_session(st, session), net::detached);
  }
}

// Opens, binds and listens on `endpoint`; on success starts the accept loop.
Result<std::shared_ptr<tcp::acceptor>> listen_on(const std::shared_ptr<ServerState>& st,
                                                 const tcp::endpoint& endpoint) {
  auto acceptor = std::make_shared<tcp::acceptor>(st->listener_context());
  boost::system::error_code ec;
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(st->options.backlog, ec);
  if (ec) {
    return absl::UnavailableError("cannot listen on " + endpoint.address().to_string() + ":" +
                                  std::to_string(endpoint.port()) + ": " + ec.message());
  }
  net::co_spawn(acceptor->get_executor(), accept_loop(st, acceptor), net::detached);
  return acceptor;
}

// The TLS context for options naming a certificate and key (nullptr for plain HTTP).
Result<std::unique_ptr<net::ssl::context>> tls_server_context(const ServerOptions& o) {
  if (o.tls_cert_path.empty() && o.tls_key_path.empty()) {
    return std::unique_ptr<net::ssl::context>();
  }
  if (o.tls_cert_path.empty() || o.tls_key_path.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a private key");
  }
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                   net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use);
  // TLS 1.2: forward-secret AEAD suites only (no static RSA key exchange, no CBC, no SHA-1 MAC);
  // TLS 1.3's suites are all of that kind already.
  SSL_CTX_set_cipher_list(ctx->native_handle(),
                          "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                          "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                          "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305");
  if (!o.tls_session_tickets) {
    // No tickets in TLS 1.2 or 1.3 (1.3's are also bytes a client finds on a connection it
    // believes idle).
    SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx->native_handle(), 0);
  }
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(o.tls_cert_path, ec);
  if (ec) {
    return absl::InvalidArgumentError("cannot load the TLS certificate " + o.tls_cert_path + ": " +
                                      ec.message());
  }
  ctx->use_private_key_file(o.tls_key_path, net::ssl::context::pem, ec);
  if (ec) {
    return absl::InvalidArgumentError("cannot load the TLS private key " + o.tls_key_path + ": " +
                                      ec.message());
  }
  return ctx;
}

void close_acceptor(std::shared_ptr<tcp::acceptor> acceptor) {
  if (!acceptor) return;
  net::post(acceptor->get_executor(), [acceptor] {
    boost::system::error_code ec;
    acceptor->close(ec);
  });
}

}  // namespace

// ---- Server ----

Server::Server(IoPool& pool, ServerOptions options)
    : state_(std::make_shared<ServerState>(pool, std::move(options))) {}

Server::~Server() {
  if (state_->pool.in_pool_thread()) {
    request_stop();
  } else {
    stop();
  }
}

void Server::route(Verb method, std::string path, Handler handler) {
  auto& routes = state_->exact[std::move(path)];
  for (auto& r : routes) {
    if (r.method == method) {
      r.handler = std::move(handler);
      return;
    }
  }
  routes.push_back({method, std::move(handler)});
}

void Server::always_available(std::string path) {
  state_->always_available.insert(std::move(path));
}

void Server::route_every_path(Verb method, Handler handler) {
  for (auto& r : state_->every_path) {
    if (r.method == method) {
      r.handler = std::move(handler);
      return;
    }
  }
  state_->every_path.push_back({method, std::move(handler)});
}

void Server::route_prefix(Verb method, std::string prefix, Handler handler) {
  auto& routes = state_->prefixes[std::move(prefix)];
  for (auto& r : routes) {
    if (r.method == method) {
      r.handler = std::move(handler);
      return;
    }
  }
  routes.push_back({method, std::move(handler)});
}

Status Server::start() {
  boost::system::error_code ec;
  net::ip::address address = net::ip::make_address(state_->options.address, ec);
  if (ec) return absl::InvalidArgumentError("bad listen address: " + state_->options.address);
  MutexLock l(&state_->mu);
  if (state_->started) return absl::FailedPreconditionError("server already started");
  if (auto tls = tls_server_context(state_->options); !tls.ok()) {
    return tls.status();
  } else {
    state_->tls = std::move(*tls);
  }
  auto acceptor = listen_on(state_, tcp::endpoint(address, state_->options.port));
  if (!acceptor.ok()) return acceptor.status();
  state_->started = true;
  state_->acceptor = *acceptor;
  state_->bound = (*acceptor)->local_endpoint(ec);
  return Status();
}

uint16_t Server::port() const {
  MutexLock l(&state_->mu);
  return state_->bound.port();
}

boost::asio::ip::tcp::endpoint Server::endpoint() const {
  MutexLock l(&state_->mu);
  return state_->bound;
}

void Server::close_listener(bool drop_connections) {
  std::vector<std::shared_ptr<Session>> open;
  {
    MutexLock l(&state_->mu);
    close_acceptor(std::move(state_->acceptor));
    state_->acceptor = nullptr;
    if (drop_connections) {
      for (auto& [id, weak] : state_->sessions) {
        if (auto s = weak.lock()) open.push_back(std::move(s));
      }
    }
  }
  for (auto& s : open) s->close_async();
}

Status Server::reopen_listener() {
  MutexLock l(&state_->mu);
  if (!state_->started || state_->stopping) {
    return absl::FailedPreconditionError("server not running");
  }
  if (state_->acceptor) return Status();
  auto acceptor = listen_on(state_, state_->bound);
  if (!acceptor.ok()) return acceptor.status();
  state_->acceptor = *acceptor;
  return Status();
}

bool Server::listening() const {
  MutexLock l(&state_->mu);
  return state_->acceptor != nullptr;
}

void Server::begin_drain() {
  state_->draining.store(true);
  std::vector<std::shared_ptr<Session>> idle;
  {
    MutexLock l(&state_->mu);
    for (auto& [id, weak] : state_->sessions) {
      if (auto s = weak.lock(); s && s->awaiting_next.load()) idle.push_back(std::move(s));
    }
  }
  for (auto& s : idle) s->close_async();
}

bool Server::draining() const { return state_->draining.load(std::memory_order_relaxed); }

void Server::request_stop() {
  {
    MutexLock l(&state_->mu);
    state_->stopping = true;
  }
  close_listener(/*drop_connections=*/true);
}

bool Server::stop(std::chrono::milliseconds grace) {
  request_stop();
  MutexLock l(&state_->mu);
  return await_no_sessions(*state_, grace);
}

ServerStats Server::stats() const {
  ServerStats s;
  s.connections_accepted = state_->connections_accepted.load(std::memory_order_relaxed);
  s.requests = state_->requests.load(std::memory_order_relaxed);
  s.bad_requests = state_->bad_requests.load(std::memory_order_relaxed);
  s.framing_refusals = state_->framing_refusals.load(std::memory_order_relaxed);
  s.read_timeouts = state_->read_timeouts.load(std::memory_order_relaxed);
  s.idle_timeouts = state_->idle_timeouts.load(std::memory_order_relaxed);
  s.idle_shed = state_->idle_shed.load(std::memory_order_relaxed);
  s.refused_connections = state_->refused_connections.load(std::memory_order_relaxed);
  s.restricted_refusals = state_->restricted_refusals.load(std::memory_order_relaxed);
  s.body_budget_refusals = state_->body_budget_refusals.load(std::memory_order_relaxed);
  s.inflight_body_bytes = state_->inflight_body_bytes.load(std::memory_order_relaxed);
  s.tls_handshake_failures = state_->tls_handshake_failures.load(std::memory_order_relaxed);
  MutexLock l(&state_->mu);
  s.open_connections = state_->sessions.size();
  return s;
}

}  // namespace kvgate::http
