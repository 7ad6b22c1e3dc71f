// Whether a worker URL leads back to the gateway itself, by where it connects, not how it is
// spelled.
//
// A gateway registered as its own worker is routed to, answers its own forwarded requests with
// 508 and counts them against "the worker". Names are many: 0.0.0.0 and :: (a connection to the
// unspecified address reaches this host), every loopback and interface address, IPv4-mapped IPv6
// ([::ffff:127.0.0.1]), host names that resolve to any of these, and every port the gateway
// listens on (HTTP, Prometheus, gRPC). A URL reaches a listener when its port is the listener's
// and its address is one the listener accepts on:
//   - a listener on a wildcard address accepts on every local address (an IPv6 wildcard also on
//     IPv4's, as Linux's dual-stack sockets do);
//   - a listener on one address accepts on that address only;
//   - a connection to the unspecified address (0.0.0.0, ::) goes to this host: it reaches any
//     listener on its port.
//
// Threading: SelfAddresses is set once before workers are added and read under the caller's lock;
// the functions are pure apart from reading the machine's interfaces.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "boost/asio/ip/address.hpp"

namespace kvgate::app {

// `a` with an IPv4-mapped IPv6 address turned into its IPv4 address.
boost::asio::ip::address canonical(const boost::asio::ip::address& a);

// Whether `a` is an address of this machine: loopback, unspecified, or one of its interfaces'.
bool is_local_address(const boost::asio::ip::address& a);

struct Listener {
  std::string name;  // for the refusal's message: "HTTP", "Prometheus", "gRPC"
  boost::asio::ip::address address;
  uint16_t port = 0;
};

class SelfAddresses {
 public:
  // `is_local` decides which addresses are this machine's (tests describe a machine).
  explicit SelfAddresses(
      std::function<bool(const boost::asio::ip::address&)> is_local = is_local_address)
      : is_local_(std::move(is_local)) {}

  void add(Listener l);
  // The listener a connection to `ip`:`port` would reach, or nullptr.
  const Listener* reached(const boost::asio::ip::address& ip, uint16_t port) const;

 private:
  std::function<bool(const boost::asio::ip::address&)> is_local_;
  std::vector<Listener> listeners_;
};

}  // namespace kvgate::app
