// HTTP/1.1 message heads written straight into one buffer, for the server's answers and the
// client's requests: one contiguous write (head, then the body's own bytes) instead of Beast's
// per-field allocations and buffer sequences, which measured as a large part of the proxy's CPU.
//
// Header rules, as Beast's set() applied them: a name given twice keeps its last value (names
// compare case-insensitively, `added` after `headers`); a name or value holding CR or LF is
// dropped (it would split the head).
//
// Threading: pure functions.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "boost/asio/awaitable.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/asio/write.hpp"
#include "kvgate/http/message.h"
#include "kvgate/http/stream.h"

namespace kvgate::http::detail {

// Appends a response head: status line, Server, Content-Type, `headers` then `added`,
// Content-Length (or Transfer-Encoding: chunked when `content_length` is nullopt; neither for
// 1xx, 204 and 304), Connection: close unless `keep_alive`, and the blank line.
void append_response_head(std::string& out, unsigned status, std::string_view server,
                          std::string_view content_type, std::span<const Header> headers,
                          std::span<const Header> added, bool keep_alive,
                          std::optional<size_t> content_length);

// Appends a request head: request line, Host, User-Agent, Content-Type (when not empty),
// `headers` (empty values skipped), Content-Length (when `send_length`), the blank line.
void append_request_head(std::string& out, Verb method, std::string_view target,
                         std::string_view host, std::string_view user_agent,
                         std::string_view content_type, std::span<const Header> headers,
                         size_t content_length, bool send_length);

// Whether a response with this status carries no body (1xx, 204, 304).
bool status_has_no_body(unsigned status);

// Writes `parts` in order: one gathered write on plain TCP; on TLS copied into `scratch` and
// written as one buffer (Asio's TLS stream was seen to stall on a gathered write whose data ran
// past one TLS record; the copy is small next to the encryption).
template <size_t N>
boost::asio::awaitable<boost::system::error_code> write_parts(
    Stream& stream, const std::array<boost::asio::const_buffer, N>& parts, std::string& scratch) {
  namespace net = boost::asio;
  boost::system::error_code ec;
  if (stream.tls() == nullptr) {
    // What the send buffer takes now goes at once; only the rest waits for the socket.
    size_t sent = stream.write_now(parts, ec);
    if (ec) co_return ec;
    std::array<net::const_buffer, N> rest = parts;
    for (net::const_buffer& b : rest) {
      const size_t k = std::min(sent, b.size());
      b += k;
      sent -= k;
    }
    if (net::buffer_size(rest) == 0) co_return ec;
    co_await net::async_write(stream, rest, net::redirect_error(net::use_awaitable, ec));
    co_return ec;
  }
  scratch.clear();
  for (const net::const_buffer& b : parts) {
    scratch.append(static_cast<const char*>(b.data()), b.size());
  }
  co_await net::async_write(stream, net::buffer(scratch),
                            net::redirect_error(net::use_awaitable, ec));
  co_return ec;
}

}  // namespace kvgate::http::detail
