#include "app/access.h"

#include <gtest/gtest.h>

namespace kvgate::app {
namespace {

namespace net = boost::asio;

http::Request request_from(const std::string& address, std::string authorization = {}) {
  http::Request r;
  r.verb = http::Verb::post;
  r.request_target = "/workers";
  if (!authorization.empty()) r.fields.add("authorization", authorization);
  r.remote = net::ip::tcp::endpoint(net::ip::make_address(address), 40000);
  return r;
}

TEST(Access, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(constant_time_equals("secret", "secret"));
  EXPECT_TRUE(constant_time_equals("", ""));
  EXPECT_FALSE(constant_time_equals("secret", "secreT"));
  EXPECT_FALSE(constant_time_equals("secret", "secret2"));
  EXPECT_FALSE(constant_time_equals("secret", ""));
  EXPECT_FALSE(constant_time_equals(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

TEST(Access, BearerTokenOfAnAuthorizationHeader) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer  abc "), "abc");
  EXPECT_EQ(bearer_token("BEARER abc"), "abc");
  EXPECT_EQ(bearer_token("Basic abc"), "");
  EXPECT_EQ(bearer_token("Bearer "), "");
  EXPECT_EQ(bearer_token(""), "");
}

TEST(Access, ClientRoutesNeedTheApiKeyWhenOneIsSet) {
  const AccessGuard open("", "");
  EXPECT_FALSE(open.check(Access::kClient, request_from("10.0.0.9")).has_value());

  const AccessGuard guard("k1", "");
  auto missing = guard.check(Access::kClient, request_from("127.0.0.1"));
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 401u);
  EXPECT_NE(missing->body.find("invalid_request_error"), std::string::npos) << missing->body;
  auto wrong = guard.check(Access::kClient, request_from("127.0.0.1", "Bearer k2"));
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->status, 401u);
  EXPECT_EQ(wrong->body.find("k2"), std::string::npos) << "a key never shows in an answer";
  EXPECT_FALSE(guard.check(Access::kClient, request_from("10.0.0.9", "Bearer k1")).has_value());
  EXPECT_FALSE(guard.check(Access::kOpen, request_from("10.0.0.9")).has_value());
}

TEST(Access, ControlRoutesWithoutAnAdminKeyAnswerOnlyTheLoopbackAddress) {
  const AccessGuard guard("", "");
  for (const char* local : {"127.0.0.1", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_FALSE(guard.check(Access::kControl, request_from(local)).has_value()) << local;
  }
  for (const char* remote : {"127.0.0.2", "10.1.2.3", "::ffff:10.1.2.3", "fe80::1"}) {
    auto refusal = guard.check(Access::kControl, request_from(remote));
    ASSERT_TRUE(refusal.has_value()) << remote;
    EXPECT_EQ(refusal->status, 403u) << remote;
  }
}

TEST(Access, ControlRoutesWithAnAdminKeyNeedIt) {
  const AccessGuard guard("client", "admin");
  EXPECT_FALSE(guard.check(Access::kControl, request_from("10.1.2.3", "Bearer admin")).has_value());
  auto client_key = guard.check(Access::kControl, request_from("127.0.0.1", "Bearer client"));
  ASSERT_TRUE(client_key.has_value()) << "the client key does not open control routes";
  EXPECT_EQ(client_key->status, 401u);
  EXPECT_TRUE(guard.check(Access::kControl, request_from("127.0.0.1")).has_value());
}

}  // namespace
}  // namespace kvgate::app
