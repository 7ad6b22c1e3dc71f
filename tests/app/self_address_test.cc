// Which worker addresses reach the gateway's own listeners, on a described machine.
#include "app/self_address.h"

#include <gtest/gtest.h>

namespace kvgate::app {
namespace {

namespace ip = boost::asio::ip;

ip::address at(const char* s) { return ip::make_address(s); }

// A machine with loopback and one interface, 10.1.2.3 and fd00::3.
bool described_local(const ip::address& a) {
  const ip::address c = canonical(a);
  return c.is_loopback() || c.is_unspecified() || c == at("10.1.2.3") || c == at("fd00::3") ||
         (c.is_v4() && (c.to_v4().to_uint() >> 24) == 127);
}

TEST(SelfAddresses, AWildcardListenerIsReachedByEveryLocalAddressOnItsPort) {
  SelfAddresses self(described_local);
  self.add({.name = "HTTP", .address = at("0.0.0.0"), .port = 8000});
  for (const char* a : {"127.0.0.1", "127.0.0.2", "10.1.2.3", "0.0.0.0", "::ffff:10.1.2.3",
                        "::ffff:127.0.0.1", "::"}) {
    ASSERT_NE(self.reached(at(a), 8000), nullptr) << a;
    EXPECT_EQ(self.reached(at(a), 8000)->name, "HTTP");
    EXPECT_EQ(self.reached(at(a), 8001), nullptr) << a << " on another port";
  }
  EXPECT_EQ(self.reached(at("10.9.9.9"), 8000), nullptr) << "another host";
  EXPECT_EQ(self.reached(at("::1"), 8000), nullptr) << "an IPv4 wildcard takes no IPv6";
}

TEST(SelfAddresses, AnIpv6WildcardListenerTakesIpv4Too) {
  SelfAddresses self(described_local);
  self.add({.name = "gRPC", .address = at("::"), .port = 9000});
  for (const char* a : {"::1", "fd00::3", "127.0.0.1", "10.1.2.3", "::ffff:127.0.0.1"}) {
    EXPECT_NE(self.reached(at(a), 9000), nullptr) << a;
  }
  EXPECT_EQ(self.reached(at("fd00::9"), 9000), nullptr);
}

TEST(SelfAddresses, AListenerOnOneAddressIsReachedThereAndByTheUnspecifiedAddress) {
  SelfAddresses self(described_local);
  self.add({.name = "HTTP", .address = at("127.0.0.1"), .port = 8000});
  self.add({.name = "Prometheus", .address = at("::ffff:127.0.0.1"), .port = 9100});
  EXPECT_NE(self.reached(at("127.0.0.1"), 8000), nullptr);
  EXPECT_NE(self.reached(at("::ffff:127.0.0.1"), 8000), nullptr);
  EXPECT_NE(self.reached(at("0.0.0.0"), 8000), nullptr);
  EXPECT_NE(self.reached(at("::"), 8000), nullptr);
  EXPECT_EQ(self.reached(at("127.0.0.2"), 8000), nullptr) << "no listener there";
  EXPECT_EQ(self.reached(at("10.1.2.3"), 8000), nullptr);
  ASSERT_NE(self.reached(at("127.0.0.1"), 9100), nullptr) << "a mapped listener address";
  EXPECT_EQ(self.reached(at("127.0.0.1"), 9100)->name, "Prometheus");
}

TEST(SelfAddresses, TheMachinesOwnInterfacesAreLocal) {
  EXPECT_TRUE(is_local_address(at("127.0.0.1")));
  EXPECT_TRUE(is_local_address(at("127.3.4.5")));
  EXPECT_TRUE(is_local_address(at("::1")));
  EXPECT_TRUE(is_local_address(at("::ffff:127.0.0.1")));
  EXPECT_TRUE(is_local_address(at("0.0.0.0")));
  EXPECT_FALSE(is_local_address(at("192.0.2.1")));  // TEST-NET-1: never a real interface's
}

}  // namespace
}  // namespace kvgate::app
