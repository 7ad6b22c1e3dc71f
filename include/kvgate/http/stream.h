// Stream: a connection's byte stream, plain TCP or TLS over it, for the server and the client.
// Beast's algorithms see one stream type whose reads and writes go to whichever it is, so every
// exchange is written once for HTTP and HTTPS. Timeouts (expires_after) and the socket belong to
// the TCP layer in both cases.
#pragma once

#include <chrono>
#include <optional>
#include <utility>

#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/ssl/ssl_stream.hpp"

namespace kvgate::http {

class Stream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;
  using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  // With `tls`, the stream speaks TLS once tls()->async_handshake() has completed.
  Stream(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls)
      : Stream(boost::beast::tcp_stream(std::move(socket)), tls) {}
  Stream(boost::beast::tcp_stream tcp, boost::asio::ssl::context* tls) {
    if (tls != nullptr) {
      tls_.emplace(std::move(tcp), *tls);
    } else {
      tcp_.emplace(std::move(tcp));
    }
  }

  executor_type get_executor() { return tcp().get_executor(); }
  boost::beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *tcp_; }
  boost::asio::ip::tcp::socket& socket() { return tcp().socket(); }
  void expires_after(std::chrono::steady_clock::duration d) { tcp().expires_after(d); }
  void close() { tcp().close(); }
  TlsStream* tls() { return tls_ ? &*tls_ : nullptr; }

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
  std::optional<boost::beast::tcp_stream> tcp_;
  std::optional<TlsStream> tls_;
};

}  // namespace kvgate::http
