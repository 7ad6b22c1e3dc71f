#include "replay/fleet.h"

#include <gtest/gtest.h>

#include "replay/oracle.h"

namespace kvgate::replay {
namespace {

TEST(Url, Parse) {
  auto a = parse_http_url("http://127.0.0.1:8000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8000);
  auto b = parse_http_url("http://gateway.local:30000/v1");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "gateway.local");
  EXPECT_EQ(b->port, 30000);
  auto c = parse_http_url("http://[::1]:9/");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 9);
  for (const char* bad : {"https://x:1", "http://x", "http://:80", "http://x:0", "http://x:70000",
                          "http://x:8o", "http://[::1:9", "127.0.0.1:80"}) {
    EXPECT_FALSE(parse_http_url(bad).ok()) << bad;
  }
  EXPECT_EQ(canonical_url("http://127.0.0.1:8000/"), "http://127.0.0.1:8000");
  EXPECT_EQ(canonical_url("http://127.0.0.1:8000/v1/x"), "http://127.0.0.1:8000");
  EXPECT_EQ(canonical_url("http://127.0.0.1:8000"), "http://127.0.0.1:8000");
}

TEST(Oracle, ReusableTokensNeverIncludeTheLastToken) {
  // 100 tokens, block 16: at most 6 blocks (96 tokens) can be reused.
  EXPECT_EQ(reusable_tokens(10, 100, 16), 96u);
  EXPECT_EQ(reusable_tokens(3, 100, 16), 48u);
  // 96 tokens exactly: the 6th block holds the last token, so 5 blocks.
  EXPECT_EQ(reusable_tokens(6, 96, 16), 80u);
  EXPECT_EQ(reusable_tokens(6, 97, 16), 96u);
  EXPECT_EQ(reusable_tokens(5, 0, 16), 0u);
  EXPECT_EQ(reusable_tokens(0, 100, 16), 0u);
}

}  // namespace
}  // namespace kvgate::replay
