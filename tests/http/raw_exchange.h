// A raw HTTP exchange for tests of what a server does with bytes a client library would never
// send: writes `bytes` to 127.0.0.1:`port`, reads until the server closes, returns what it sent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"

namespace kvgate::testing {

inline std::string raw_exchange(uint16_t port, std::string_view bytes) {
  namespace net = boost::asio;
  net::io_context ctx;
  net::ip::tcp::socket s(ctx);
  s.connect({net::ip::make_address("127.0.0.1"), port});
  net::write(s, net::buffer(bytes.data(), bytes.size()));
  std::string out;
  boost::system::error_code ec;
  char buf[4096];
  while (!ec) out.append(buf, s.read_some(net::buffer(buf), ec));
  return out;
}

}  // namespace kvgate::testing
