#include "app/self_address.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

namespace kvgate::app {
namespace ip = boost::asio::ip;

ip::address canonical(const ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return ip::make_address_v4(ip::v4_mapped, a.to_v6());
  }
  return a;
}

bool is_local_address(const ip::address& given) {
  const ip::address a = canonical(given);
  if (a.is_loopback() || a.is_unspecified()) return true;
  if (a.is_v4() && (a.to_v4().to_uint() >> 24) == 127) return true;  // all of 127.0.0.0/8
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool local = false;
  for (ifaddrs* i = ifs; i != nullptr && !local; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      local = a.is_v4() && a.to_v4().to_uint() == ntohl(in->sin_addr.s_addr);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      ip::address_v6::bytes_type bytes;
      std::memcpy(bytes.data(), &in6->sin6_addr, bytes.size());
      local = a.is_v6() && a.to_v6().to_bytes() == bytes;
    }
  }
  freeifaddrs(ifs);
  return local;
}

void SelfAddresses::add(Listener l) {
  l.address = canonical(l.address);
  listeners_.push_back(std::move(l));
}

const Listener* SelfAddresses::reached(const ip::address& given, uint16_t port) const {
  const ip::address target = canonical(given);
  for (const Listener& l : listeners_) {
    if (l.port != port) continue;
    if (target.is_unspecified()) return &l;  // a connection to 0.0.0.0 or :: stays on this host
    if (l.address.is_unspecified()) {
      // An IPv4 wildcard accepts IPv4 only; an IPv6 one both (dual-stack).
      if ((l.address.is_v6() || target.is_v4()) && is_local_(target)) return &l;
    } else if (l.address == target) {
      return &l;
    }
  }
  return nullptr;
}

}  // namespace kvgate::app
