#include "http/detail/head_writer.h"

#include <gtest/gtest.h>

namespace kvgate::http::detail {
namespace {

TEST(HeadWriter, AResponseHeadWithItsLengthAndTheLastValueOfEachName) {
  std::string out;
  const std::vector<Header> headers = {
      {"x-kvgate-worker", "http://w:1"}, {"X-Request-Id", "a"}, {"x-request-id", "b"}};
  const std::vector<Header> added = {{"Access-Control-Allow-Origin", "*"},
                                     {"X-KVGATE-WORKER", "w2"}};
  append_response_head(out, 200, "kvgate", "application/json", headers, added, true, 283);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nServer: kvgate\r\nContent-Type: application/json\r\n"
            "x-request-id: b\r\nAccess-Control-Allow-Origin: *\r\nX-KVGATE-WORKER: w2\r\n"
            "Content-Length: 283\r\n\r\n");
}

TEST(HeadWriter, ChunkedClosingAndBodilessHeads) {
  std::string stream;
  append_response_head(stream, 200, "kvgate", "text/event-stream", {}, {}, false, std::nullopt);
  EXPECT_EQ(stream,
            "HTTP/1.1 200 OK\r\nServer: kvgate\r\nContent-Type: text/event-stream\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
  std::string empty;
  append_response_head(empty, 204, "kvgate", "", {}, {}, true, 0);
  EXPECT_EQ(empty, "HTTP/1.1 204 No Content\r\nServer: kvgate\r\n\r\n");
  EXPECT_TRUE(status_has_no_body(304));
  EXPECT_FALSE(status_has_no_body(200));
  std::string odd;
  append_response_head(odd, 599, "", "text/plain", {}, {}, true, 1);
  EXPECT_EQ(odd.rfind("HTTP/1.1 599 ", 0), 0u) << odd;
}

TEST(HeadWriter, AHeaderThatWouldSplitTheHeadIsDropped) {
  std::string out;
  const std::vector<Header> headers = {{"x-evil", "a\r\nSet-Cookie: x=1"},
                                       {"x\nbad", "v"},
                                       {"x-fine", "ok"},
                                       {"Content-Type", "text/html"}};
  append_response_head(out, 404, "kvgate", "application/json", headers, {}, true, 2);
  EXPECT_EQ(out,
            "HTTP/1.1 404 Not Found\r\nServer: kvgate\r\nx-fine: ok\r\nContent-Type: text/html\r\n"
            "Content-Length: 2\r\n\r\n");
}

// The check for CR and LF reads words and overlapping tails: every length and position of one.
TEST(HeadWriter, ACrOrLfAtAnyPlaceOfANameOrValueDropsTheHeader) {
  for (size_t size = 1; size <= 40; ++size) {
    for (size_t at = 0; at < size; ++at) {
      for (const char bad : {'\r', '\n'}) {
        std::string text(size, 'a');
        const std::vector<Header> kept = {{"x-name", text}, {text, "value"}};
        std::string out;
        append_response_head(out, 200, "", "", kept, {}, true, 0);
        ASSERT_NE(out.find("x-name: " + text + "\r\n"), std::string::npos) << size;
        ASSERT_NE(out.find(text + ": value\r\n"), std::string::npos) << size;
        text[at] = bad;
        const std::vector<Header> dropped = {{"x-name", text}, {text, "value"}};
        out.clear();
        append_response_head(out, 200, "", "", dropped, {}, true, 0);
        ASSERT_EQ(out, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") << size << " " << at;
      }
    }
  }
}

TEST(HeadWriter, ARequestHead) {
  std::string post;
  const std::vector<Header> headers = {{"authorization", ""}, {"x-data-parallel-rank", "1"}};
  append_request_head(post, Verb::post, "/v1/completions", "127.0.0.1:8000", "kvgate",
                      "application/json", headers, 12, true);
  EXPECT_EQ(
      post,
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: kvgate\r\n"
      "Content-Type: application/json\r\nx-data-parallel-rank: 1\r\nContent-Length: 12\r\n\r\n");
  std::string get;
  append_request_head(get, Verb::get, "/health", "w:1", "kvgate", "", {}, 0, false);
  EXPECT_EQ(get, "GET /health HTTP/1.1\r\nHost: w:1\r\nUser-Agent: kvgate\r\n\r\n");
}

}  // namespace
}  // namespace kvgate::http::detail
