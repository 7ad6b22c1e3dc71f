// Reading an HTTP message into a Beast parser, for the server's requests and the client's
// answers: the rules of Beast's http::async_read, async_read_header and async_read_some (the
// parser's limits, a peer's end of stream, a buffer that cannot grow), in one coroutine that
// parses what is already buffered before it reads, and reads straight from the stream.
//
// Beast's versions stack two composed operations on every read, each keeping work on the
// executor and completing through a post when the buffer already held the message (the common
// case for a small request: the keep-alive wait read it whole). That bookkeeping measured as a
// visible share of the proxy's CPU per request; here a message already buffered costs no
// operation at all.
//
// Threading: the stream's executor, like the stream.
#pragma once

#include <algorithm>
#include <cstddef>

#include "boost/asio/awaitable.hpp"
#include "boost/asio/error.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/basic_parser.hpp"
#include "boost/beast/http/error.hpp"
#include "kvgate/http/stream.h"

namespace kvgate::http::detail {

// How much one read asks for: what the buffer already has room for, at least 4 KiB (Beast asks
// for 512 bytes of a new buffer, so a first answer larger than that took two reads), at most
// 64 KiB; 0 when the buffer cannot grow.
inline size_t read_size(const boost::beast::flat_buffer& buffer) {
  const size_t limit = buffer.max_size() - buffer.size();
  const size_t room = std::max<size_t>(4096, buffer.capacity() - buffer.size());
  return std::min<size_t>({room, size_t{64} << 10, limit});
}

// async_read_some's rules: parses buffered bytes, reading when the parser needs more, until one
// parse makes progress or fails. need_buffer (a buffer body is full) comes back as it is.
template <bool kIsRequest>
boost::asio::awaitable<boost::system::error_code> read_some(
    Stream& stream, boost::beast::flat_buffer& buffer,
    boost::beast::http::basic_parser<kIsRequest>& parser) {
  namespace net = boost::asio;
  namespace beast_http = boost::beast::http;
  boost::system::error_code ec;
  for (;;) {
    if (buffer.size() > 0) {
      const size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec != beast_http::error::need_more) co_return ec;
      ec = {};
    }
    const size_t size = read_size(buffer);
    if (size == 0) co_return beast_http::error::buffer_overflow;
    const size_t n = co_await stream.async_read_some(buffer.prepare(size),
                                                     net::redirect_error(net::use_awaitable, ec));
    if (ec == net::error::eof) {
      ec = {};
      // The peer's end of stream ends a message without a length; anywhere else it is a cut.
      if (parser.got_some()) {
        parser.put_eof(ec);
        co_return ec;
      }
      co_return beast_http::error::end_of_stream;
    }
    if (ec) co_return ec;
    buffer.commit(n);
  }
}

// async_read's rules (kWhole) or async_read_header's: reads until the parser is done, or until
// its header is.
enum class ReadUntil { kHeader, kWhole };
template <bool kIsRequest>
boost::asio::awaitable<boost::system::error_code> read_message(
    Stream& stream, boost::beast::flat_buffer& buffer,
    boost::beast::http::basic_parser<kIsRequest>& parser, ReadUntil until) {
  const bool whole = until == ReadUntil::kWhole;
  parser.eager(whole);
  const auto done = [&] { return whole ? parser.is_done() : parser.is_header_done(); };
  while (!done()) {
    const boost::system::error_code ec = co_await read_some(stream, buffer, parser);
    if (ec) co_return ec;
  }
  co_return boost::system::error_code();
}

}  // namespace kvgate::http::detail
