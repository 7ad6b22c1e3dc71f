// Stream: a connection's byte stream, plain TCP or TLS over it, for the server and the client.
// Beast's algorithms see one stream type whose reads and writes go to whichever it is, so every
// exchange is written once for HTTP and HTTPS. Timeouts (expires_after) and the socket belong to
// the TCP layer in both cases: a TimedSocket for plain TCP (one timer per connection, see
// timed_socket.h), beast::tcp_stream under TLS.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <utility>

#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/ssl/ssl_stream.hpp"
#include "kvgate/http/timed_socket.h"

namespace kvgate::http {

class Stream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;
  using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  // With `tls`, the stream speaks TLS once tls()->async_handshake() has completed.
  Stream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls) {
    if (tls != nullptr) {
      tls_.emplace(boost::beast::tcp_stream(std::move(socket)), *tls);
    } else {
      tcp_.emplace(std::move(socket));
    }
  }
  Stream(boost::beast::tcp_stream tcp, boost::asio::ssl::context* tls)
      : Stream(tcp.release_socket(), tls) {}

  executor_type get_executor() { return tls_ ? tls_->get_executor() : tcp_->get_executor(); }
  boost::asio::ip::tcp::socket& socket() {
    return tls_ ? tls_->next_layer().socket() : tcp_->socket();
  }
  void expires_after(std::chrono::steady_clock::duration d) {
    if (tls_) {
      tls_->next_layer().expires_after(d);
    } else {
      tcp_->expires_after(d);
    }
  }
  // No deadline until the next expires_after() (an idle connection holds no timer).
  void expires_never() {
    if (tls_) {
      tls_->next_layer().expires_never();
    } else {
      tcp_->expires_never();
    }
  }
  void close() {
    if (tls_) {
      tls_->next_layer().close();
    } else {
      tcp_->close();
    }
  }
  TlsStream* tls() { return tls_ ? &*tls_ : nullptr; }

  // Plain TCP: TimedSocket::write_now. TLS: 0 (its records are written asynchronously).
  size_t write_now(std::span<const boost::asio::const_buffer> buffers,
                   boost::system::error_code& ec) {
    ec = {};
    return tcp_ ? tcp_->write_now(buffers, ec) : 0;
  }

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<ReadToken>(token));
    return tcp_->async_read_some(buffers, std::forward<ReadToken>(token));
  }
  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    if (tls_) return tls_->async_write_some(buffers, std::forward<WriteToken>(token));
    return tcp_->async_write_some(buffers, std::forward<WriteToken>(token));
  }

 private:
  std::optional<TimedSocket> tcp_;
  std::optional<TlsStream> tls_;
};

}  // namespace kvgate::http
