#include "kvgate/sync/redis_url.h"

#include <gtest/gtest.h>

namespace kvgate::sync {
namespace {

TEST(RedisUrl, HostPortAndDatabase) {
  auto t = parse_redis_url("redis://10.0.0.5:6380/3");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "10.0.0.5");
  EXPECT_EQ(t->port, 6380);
  EXPECT_EQ(t->db, 3u);
  EXPECT_TRUE(t->password.empty());
  auto d = parse_redis_url("redis://cache.internal");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->port, 6379);
  EXPECT_EQ(d->db, 0u);
}

TEST(RedisUrl, CredentialsAreDecodedAndNeverShown) {
  auto t = parse_redis_url("redis://sync:p%40ss%3Aw0rd@127.0.0.1:7000");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->user, "sync");
  EXPECT_EQ(t->password, "p@ss:w0rd");
  EXPECT_EQ(t->redacted(), "redis://sync:***@127.0.0.1:7000/0");
  auto only = parse_redis_url("redis://secret@127.0.0.1:7000");
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->password, "secret");
  EXPECT_TRUE(only->user.empty());
  EXPECT_EQ(only->redacted().find("secret"), std::string::npos);
}

TEST(RedisUrl, Ipv6Host) {
  auto t = parse_redis_url("redis://[::1]:6390");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "::1");
  EXPECT_EQ(t->port, 6390);
  EXPECT_EQ(t->redacted(), "redis://[::1]:6390/0");
}

TEST(RedisUrl, RefusalsSayWhatIsWrong) {
  const auto message = [](std::string_view url) {
    auto t = parse_redis_url(url);
    EXPECT_FALSE(t.ok()) << url;
    return std::string(message_of(t.status()));
  };
  EXPECT_NE(message("rediss://h:1").find("TLS"), std::string::npos);
  EXPECT_NE(message("http://h:1").find("redis://"), std::string::npos);
  EXPECT_NE(message("redis://:6379").find("no host"), std::string::npos);
  EXPECT_NE(message("redis://h:99999").find("port"), std::string::npos);
  EXPECT_NE(message("redis://h:0").find("port"), std::string::npos);
  EXPECT_NE(message("redis://h:1/x").find("database"), std::string::npos);
  EXPECT_NE(message("redis://u:%zz@h:1").find("escape"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::sync
