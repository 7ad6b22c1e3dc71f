#include "kvgate/http/client.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/ssl/host_name_verification.hpp"
#include "boost/asio/ssl/stream_base.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/asio/use_future.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/error.hpp"
#include "http/detail/flat_parser.h"
#include "http/detail/head_writer.h"
#include "http/detail/quick_head.h"
#include "http/detail/read_message.h"

namespace kvgate::http {
namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

struct Connection::Streamed {
  FieldList fields;  // the head's, until start_streaming() moves them out; then trailers
  std::optional<detail::ResponseParser> parser;
};

Connection::Connection(Stream stream, std::string host_header, ClientOptions options)
    : stream_(std::move(stream)), host_header_(std::move(host_header)), options_(options) {}

Connection::~Connection() = default;

bool Connection::body_complete() const {
  return streamed_ && streamed_->parser && streamed_->parser->is_done();
}

Result<std::shared_ptr<net::ssl::context>> make_client_tls(const std::string& ca_path) {
  auto ctx = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                   net::ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  if (ca_path.empty()) {
    ctx->set_default_verify_paths(ec);
  } else {
    ctx->load_verify_file(ca_path, ec);
  }
  if (ec) {
    return absl::InvalidArgumentError("cannot load the CA certificates " +
                                      (ca_path.empty() ? "of the system" : ca_path) + ": " +
                                      ec.message());
  }
  ctx->set_verify_mode(net::ssl::verify_peer);
  return ctx;
}

net::awaitable<Result<std::unique_ptr<Connection>>> Connection::connect(std::string_view host_view,
                                                                        uint16_t port,
                                                                        ClientOptions options) {
  const std::string host(host_view);
  const std::string service = std::to_string(port);
  auto executor = co_await net::this_coro::executor;
  tcp::resolver resolver(executor);
  boost::system::error_code ec;
  auto results =
      co_await resolver.async_resolve(host, service, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return absl::UnavailableError("resolve " + host + ": " + ec.message());
  beast::tcp_stream stream(executor);
  stream.expires_after(options.connect_timeout);
  co_await stream.async_connect(results, net::redirect_error(net::use_awaitable, ec));
  if (ec) {
    co_return absl::UnavailableError("connect " + host + ":" + std::to_string(port) + ": " +
                                     ec.message());
  }
  stream.socket().set_option(tcp::no_delay(true), ec);
  Stream s(std::move(stream), options.tls.get());
  if (Stream::TlsStream* tls = s.tls()) {
    // SNI, and the certificate must name the host connected to.
    if (!SSL_set_tlsext_host_name(tls->native_handle(), host.c_str())) {
      co_return absl::InvalidArgumentError("TLS server name " + host + " refused");
    }
    tls->set_verify_callback(net::ssl::host_name_verification(host));
    s.expires_after(options.connect_timeout);
    co_await tls->async_handshake(net::ssl::stream_base::client,
                                  net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      co_return absl::UnavailableError("TLS handshake with " + host + ":" + std::to_string(port) +
                                       ": " + ec.message());
    }
  }
  co_return std::make_unique<Connection>(std::move(s), host + ":" + std::to_string(port), options);
}

namespace {
// An answer's head, at most (Beast's default for a response parser).
constexpr uint32_t kAnswerHeaderLimit = 8 << 10;

// The errors a read or write meets when the server has closed or reset the connection.
bool is_peer_close(const boost::system::error_code& ec) {
  return ec == beast_http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::error::connection_aborted || ec == beast_http::error::partial_message;
}
}  // namespace

bool Connection::idle_and_open(bool peek) {
  if (!reusable_ || !stream_.socket().is_open() || buffer_.size() > 0) return false;
  if (!peek) return true;
  char byte;
  const ssize_t n = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;  // quiet: still usable
  reusable_ = false;  // EOF (n == 0), unsolicited bytes (n > 0) or an error
  return false;
}

Status Connection::failure(const char* what, const boost::system::error_code& ec) {
  closed_by_peer_ = failed_before_response_ && is_peer_close(ec);
  reusable_ = false;
  stream_.close();
  if (ec == beast::error::timeout)
    return absl::DeadlineExceededError(std::string(what) + ": timeout");
  return absl::UnavailableError(std::string(what) + ": " + ec.message());
}

void Connection::close() {
  reusable_ = false;
  boost::system::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
}

net::awaitable<Status> Connection::write_request(const ClientRequest& request,
                                                 std::chrono::milliseconds timeout) {
  ++exchanges_;
  failed_before_response_ = false;
  closed_by_peer_ = false;
  if (!reusable_) co_return absl::FailedPreconditionError("connection is not reusable");
  const std::string_view body =
      request.body_view.empty() ? std::string_view(request.body) : request.body_view;
  const bool has_body =
      !body.empty() || request.method == Verb::post || request.method == Verb::put;
  // The head in one buffer and the caller's body bytes after it (a large body is not copied).
  std::string& head = head_;
  head.clear();
  detail::append_request_head(head, request.method, request.target, host_header_, "kvgate",
                              has_body ? std::string_view(request.content_type) : "",
                              request.headers, body.size(), has_body);
  const std::array<net::const_buffer, 2> buffers = {net::buffer(head),
                                                    net::buffer(body.data(), body.size())};
  stream_.expires_after(timeout.count() > 0 ? timeout : options_.request_timeout);
  std::string scratch;  // for TLS only
  const boost::system::error_code ec = co_await detail::write_parts(stream_, buffers, scratch);
  if (ec) {
    failed_before_response_ = true;
    co_return failure("write request", ec);
  }
  co_return Status();
}

net::awaitable<Result<ClientResponse>> Connection::send(const ClientRequest& request) {
  const auto deadline = std::chrono::steady_clock::now() + options_.request_timeout;
  if (Status s = co_await write_request(request, {}); !s.ok()) co_return s;
  ClientResponse out;
  boost::system::error_code ec;
  // The deadline set by write_request covers the whole exchange. The first read is made here, so
  // that an answer of the common shape that arrived whole is taken without Beast.
  if (const size_t size = detail::read_size(buffer_); buffer_.size() == 0 && size > 0) {
    const size_t n = co_await stream_.async_read_some(buffer_.prepare(size),
                                                      net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      failed_before_response_ = true;
      co_return failure("read response",
                        ec == net::error::eof ? beast_http::error::end_of_stream : ec);
    }
    buffer_.commit(n);
    // A whole answer is written at once, when its generation ends: once its first bytes came,
    // the rest has idle_timeout (a peer that trickles it does not hold the request for the whole
    // request_timeout).
    stream_.expires_after(std::min<std::chrono::steady_clock::duration>(
        deadline - std::chrono::steady_clock::now(), options_.idle_timeout));
  }
  detail::QuickHead quick;
  if (detail::quick_parse_response(
          std::string_view(static_cast<const char*>(buffer_.data().data()), buffer_.size()),
          kAnswerHeaderLimit, options_.body_limit, &quick, &out.headers)) {
    out.status = quick.status;
    out.body.assign(quick.body);
    buffer_.consume(quick.size());
    reusable_ = true;  // the common shape: HTTP/1.1 without a Connection field, with a length
    stream_.expires_never();
    co_return out;
  }
  detail::ResponseParser parser(&out.headers);
  parser.collect_body(&out.body);
  parser.header_limit(kAnswerHeaderLimit);
  parser.body_limit(options_.body_limit);
  ec = co_await detail::read_message(stream_, buffer_, parser, detail::ReadUntil::kWhole);
  if (ec) {
    failed_before_response_ = !parser.got_some();
    co_return failure("read response", ec);
  }
  out.status = parser.status();
  reusable_ = parser.keep_alive() && !parser.need_eof();
  if (!reusable_) close();
  stream_.expires_never();  // idle until the next exchange: no deadline, no timer
  co_return out;
}

namespace {
constexpr size_t kPieceBytes = 16 << 10;
}  // namespace

net::awaitable<Result<ClientResponse>> Connection::start_streaming(
    const ClientRequest& request, std::chrono::milliseconds timeout) {
  if (Status s = co_await write_request(request, timeout); !s.ok()) co_return s;
  if (!streamed_) streamed_ = std::make_unique<Streamed>();
  streamed_->fields.clear();
  detail::ResponseParser& parser = streamed_->parser.emplace(&streamed_->fields);
  buffered_error_ = {};
  // No limit, said as the largest one: Beast 1.74 compares a Content-Length against an empty
  // optional limit as "greater", so body_limit(boost::none) fails every answer with a length (an
  // engine's 400 to a streamed request) with "body limit exceeded".
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  boost::system::error_code ec;
  ec = co_await detail::read_message(stream_, buffer_, parser, detail::ReadUntil::kHeader);
  if (ec) {
    failed_before_response_ = !parser.got_some();
    streamed_->parser.reset();
    co_return failure("read response head", ec);
  }
  ClientResponse out;
  out.status = parser.status();
  // Whether the connection may be kept is read at the head: the body's parse may still add
  // trailers. The head's fields move to the answer; trailers, if any, go to the emptied list.
  stream_keep_alive_ = parser.keep_alive();
  out.headers = std::move(streamed_->fields);
  streamed_->fields.clear();
  co_return out;
}

net::awaitable<Result<std::string_view>> Connection::next_piece(std::chrono::milliseconds timeout) {
  if (!streamed_ || !streamed_->parser) {
    co_return absl::FailedPreconditionError("no streaming exchange in progress");
  }
  if (!piece_) piece_ = std::make_unique<char[]>(kPieceBytes);
  auto& parser = *streamed_->parser;
  boost::system::error_code ec = std::exchange(buffered_error_, {});
  if (ec) {
    streamed_->parser.reset();
    co_return failure("read response body", ec);
  }
  while (!parser.is_done()) {
    parser.set_piece(piece_.get(), kPieceBytes);
    stream_.expires_after(timeout.count() > 0 ? timeout : options_.idle_timeout);
    // read_some: hand each piece over as soon as it is parsed, not when the buffer is full.
    ec = co_await detail::read_some(stream_, buffer_, parser);
    if (ec == beast_http::error::need_buffer) ec = {};
    if (ec) {
      streamed_->parser.reset();
      co_return failure("read response body", ec);
    }
    if (parser.piece_room() < kPieceBytes) {
      take_buffered();
      co_return std::string_view(piece_.get(), kPieceBytes - parser.piece_room());
    }
  }
  reusable_ = stream_keep_alive_ && !parser.need_eof();
  streamed_->parser.reset();
  if (!reusable_) close();
  stream_.expires_never();
  co_return std::string_view();
}

void Connection::take_buffered() {
  auto& parser = *streamed_->parser;
  while (buffer_.size() > 0 && !parser.is_done() && parser.piece_room() > 0) {
    boost::system::error_code ec;
    const size_t used = parser.put(buffer_.data(), ec);
    buffer_.consume(used);
    // need_more: the rest has not arrived; need_buffer: the piece is full. Another error is the
    // body's: this piece goes out, and the next call reports it.
    if (ec && ec != beast_http::error::need_more && ec != beast_http::error::need_buffer) {
      buffered_error_ = ec;
    }
    if (ec || used == 0) break;
  }
}

net::awaitable<Result<ClientResponse>> Connection::send_streaming(const ClientRequest& request,
                                                                  BodyRef on_body) {
  auto head = co_await start_streaming(request);
  if (!head.ok()) co_return head;
  for (;;) {
    auto piece = co_await next_piece();
    if (!piece.ok()) co_return piece.status();
    if (piece->empty()) break;
    if (Status s = on_body(*piece); !s.ok()) {
      streamed_->parser.reset();
      close();
      co_return s;
    }
  }
  co_return head;
}

// ---- SyncClient ----

SyncClient::SyncClient(std::string host, uint16_t port, ClientOptions options)
    : ctx_(1), host_(std::move(host)), port_(port), options_(options) {}

SyncClient::~SyncClient() { close(); }

template <class Future>
void SyncClient::run_until_ready(Future& fut) {
  // Until the result, not until the context has no work left: a connection whose exchange ended
  // early (an error) may still hold its deadline's timer.
  ctx_.restart();
  while (fut.wait_for(std::chrono::seconds(0)) != std::future_status::ready) ctx_.run_one();
}

void SyncClient::close() {
  if (conn_) conn_->close();
  conn_.reset();
}

Result<ClientResponse> SyncClient::run(const ClientRequest& request, const BodyCallback* on_body) {
  for (int attempt = 0;; ++attempt) {
    const bool reused = conn_ != nullptr && conn_->idle_and_open();
    if (!reused) {
      conn_.reset();
      auto fut = net::co_spawn(ctx_, Connection::connect(host_, port_, options_), net::use_future);
      run_until_ready(fut);
      auto c = fut.get();
      if (!c.ok()) return c.status();
      conn_ = std::move(*c);
      ++connects_;
    }
    Connection* conn = conn_.get();
    auto op = [conn, &request, on_body]() -> net::awaitable<Result<ClientResponse>> {
      if (on_body != nullptr) co_return co_await conn->send_streaming(request, *on_body);
      co_return co_await conn->send(request);
    };
    auto fut = net::co_spawn(ctx_, op(), net::use_future);
    run_until_ready(fut);
    auto res = fut.get();
    if (!res.ok() && reused && attempt == 0 && conn_->closed_by_peer()) continue;
    return res;
  }
}

Result<ClientResponse> SyncClient::request(const ClientRequest& request) {
  return run(request, nullptr);
}

Result<ClientResponse> SyncClient::get(std::string target) {
  ClientRequest r;
  r.target = std::move(target);
  return run(r, nullptr);
}

Result<ClientResponse> SyncClient::post(std::string target, std::string body) {
  ClientRequest r;
  r.method = Verb::post;
  r.target = std::move(target);
  r.body = std::move(body);
  return run(r, nullptr);
}

Result<ClientResponse> SyncClient::stream(const ClientRequest& request, BodyCallback on_body) {
  return run(request, &on_body);
}

}  // namespace kvgate::http
