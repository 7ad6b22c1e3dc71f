// quick_parse_request / quick_parse_response: the common shape is taken; everything whose meaning
// Beast works out is left to it; and whatever is taken, from hand-written cases and every single
// byte edit of them, Beast parses to the same message (tests/http/quick_head_check.h).
#include "http/detail/quick_head.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "http/quick_head_check.h"

namespace kvgate::http::detail {
namespace {

constexpr std::string_view kRequest =
    "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
    "Content-Length: 26\r\n\r\n{\"prompt\":\"hi\",\"stream\":1}";
constexpr std::string_view kAnswer =
    "HTTP/1.1 200 OK\r\ndate: Sat, 05 Dec 2026 10:00:00 GMT\r\nserver: uvicorn\r\n"
    "content-length: 11\r\ncontent-type: application/json\r\n\r\n{\"ok\":true}";

TEST(QuickHead, TakesTheCommonShape) {
  FieldList fields;
  QuickHead head;
  ASSERT_TRUE(quick_parse_request(kRequest, 8192, 1 << 20, &head, &fields));
  EXPECT_EQ(head.method, Verb::post);
  EXPECT_EQ(head.target, "/v1/completions");
  EXPECT_EQ(head.body, "{\"prompt\":\"hi\",\"stream\":1}");
  EXPECT_EQ(head.size(), kRequest.size());
  EXPECT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields.get("content-type"), "application/json");

  FieldList answer_fields;
  QuickHead answer;
  const std::string pipelined = std::string(kAnswer) + "HTTP/1.1 200 OK\r\n";
  ASSERT_TRUE(quick_parse_response(pipelined, 8192, 1 << 20, &answer, &answer_fields));
  EXPECT_EQ(answer.status, 200u);
  EXPECT_EQ(answer.body, "{\"ok\":true}");
  EXPECT_EQ(answer.size(), kAnswer.size()) << "the next message's bytes are not taken";
  EXPECT_EQ(answer_fields.get("Server"), "uvicorn");

  FieldList bodiless_fields;
  QuickHead bodiless;
  ASSERT_TRUE(quick_parse_request("GET /health?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", 8192, 0, &bodiless,
                                  &bodiless_fields));
  EXPECT_EQ(bodiless.method, Verb::get);
  EXPECT_EQ(bodiless.target, "/health?x=1");
  EXPECT_TRUE(bodiless.body.empty());

  for (std::string_view taken : {kRequest, std::string_view("GET / HTTP/1.1\r\n\r\n"),
                                 std::string_view("GET / HTTP/1.1\r\nX-Pad: \t a b \t \r\n"
                                                  "X-Empty:\r\nx-empty:   \r\n\r\n")}) {
    EXPECT_EQ(quick_disagreement<true>(taken), "") << taken;
  }
  EXPECT_EQ(quick_disagreement<false>(kAnswer), "");
}

TEST(QuickHead, LeavesToBeastWhatItMustWorkOut) {
  const std::vector<std::string_view> requests = {
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\ntransfer-encoding: gzip\r\nContent-Length: 1\r\n\r\nx",
      "GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
      "GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n",
      "GET / HTTP/1.1\r\nProxy-Connection: close\r\n\r\n",
      "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
      "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
      "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx",
      "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
      "POST / HTTP/1.1\r\nContent-Length: 1 1\r\n\r\nx",
      // 2^64 + 1: wraps to 1 in 64 bits, so its one body byte would be taken without the cap.
      "POST / HTTP/1.1\r\nContent-Length: 18446744073709551617\r\n\r\nx",
      "POST / HTTP/1.1\r\nContent-Length: 0000000000000000001\r\n\r\nx",
      "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabc",  // the body has not all arrived
      "GET / HTTP/1.1\r\nHost: h\r\n",                    // nor the head
      "GET / HTTP/1.0\r\n\r\n",
      "BREW /pot HTTP/1.1\r\n\r\n",
      "GET  / HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1 \r\n\r\n",
      "GET / HTTP/1.1\r\nX-Fold: a\r\n b\r\n\r\n",
      "GET / HTTP/1.1\r\nX-Text: caf\xc3\xa9\r\n\r\n",
      "GET / HTTP/1.1\r\nX-Bare: a\nb\r\n\r\n",
      "GET / HTTP/1.1\r\nX Space: a\r\n\r\n",
      "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
      "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
      "GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n",
  };
  const std::vector<std::string_view> answers = {
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end",  // no length
      "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\nabc",
      "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc",
      "HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1\r\n\r\n",
  };
  for (const bool request : {true, false}) {
    for (std::string_view m : request ? requests : answers) {
      FieldList fields;
      QuickHead head;
      EXPECT_FALSE(quick_parse(request, m, 8192, 1 << 20, &head, &fields)) << m;
      EXPECT_TRUE(fields.empty()) << m;
    }
  }
  // As many fields as the quick path holds, and one more.
  std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (size_t i = 1; i < kMaxQuickFields; ++i) many += "X-F" + std::to_string(i) + ": v\r\n";
  const std::string too_many = many + "X-Last: v\r\n\r\n";
  many += "\r\n";
  for (const std::string& m : {many, too_many}) {
    FieldList fields;
    QuickHead head;
    EXPECT_EQ(quick_parse_request(m, 8192, 0, &head, &fields), m == many);
    EXPECT_EQ(fields.size(), m == many ? kMaxQuickFields : 0u);
    EXPECT_EQ(quick_disagreement<true>(m), "");
  }
  // The limits: a head past header_limit, a body past body_limit.
  FieldList fields;
  QuickHead head;
  EXPECT_FALSE(quick_parse_request(kRequest, 40, 1 << 20, &head, &fields));
  EXPECT_FALSE(quick_parse_request(kRequest, 8192, 25, &head, &fields));
  EXPECT_TRUE(quick_parse_request(kRequest, 8192, 26, &head, &fields));
  // At the limits' edges the two parsers agree, whichever takes the message.
  const size_t head_size = head.head_size;
  EXPECT_TRUE(quick_parse_request(kRequest, head_size, 26, &head, &fields));
  EXPECT_FALSE(quick_parse_request(kRequest, head_size - 1, 26, &head, &fields));
  for (size_t header_limit : {head_size - 1, head_size, head_size + 1}) {
    for (uint64_t body_limit : {25, 26, 27}) {
      EXPECT_EQ(quick_disagreement<true>(kRequest, header_limit, body_limit), "")
          << header_limit << " " << body_limit;
    }
  }
}

// Every single-byte edit of the common messages (each byte replaced by each of a set of bytes
// that matter to HTTP, deleted, or preceded by one): what the quick parser takes, Beast parses the
// same way.
TEST(QuickHead, AgreesWithBeastOnEveryOneByteEdit) {
  const std::string_view replacements(
      "\0\t\n\r :,;\"\x7f\x80\xff\x1f"
      "0aZ-~",
      18);
  size_t taken = 0;
  size_t tried = 0;
  const auto check = [&](bool request, const std::string& bytes) {
    const std::string why =
        request ? quick_disagreement<true>(bytes) : quick_disagreement<false>(bytes);
    EXPECT_EQ(why, "") << bytes;
    FieldList fields;
    QuickHead head;
    if (quick_parse(request, bytes, 8192, 1 << 20, &head, &fields)) {
      ++taken;
    }
    ++tried;
  };
  for (const bool request : {true, false}) {
    const std::string base(request ? kRequest : kAnswer);
    for (size_t i = 0; i < base.size(); ++i) {
      for (char c : replacements) {
        std::string edited = base;
        edited[i] = c;
        check(request, edited);
        edited = base;
        edited.insert(edited.begin() + static_cast<ptrdiff_t>(i), c);
        check(request, edited);
      }
      std::string deleted = base;
      deleted.erase(i, 1);
      check(request, deleted);
    }
  }
  // Most edits of a value or a body still have the common shape; the check must have compared.
  EXPECT_GT(taken, tried / 4) << taken << " of " << tried;
}

}  // namespace
}  // namespace kvgate::http::detail
