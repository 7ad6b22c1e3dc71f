#include "kvgate/http/sse.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kvgate::http {
namespace {

std::vector<std::string> parse_in_pieces(std::string_view body, size_t piece) {
  SseParser p;
  std::vector<std::string> out;
  for (size_t i = 0; i < body.size(); i += piece) {
    p.feed(body.substr(i, piece), [&](std::string_view d) { out.emplace_back(d); });
  }
  return out;
}

TEST(SseParser, SameEventsWhateverTheCuts) {
  const std::string body =
      "data: {\"a\":1}\n\n: comment\n\ndata:{\"b\":2}\r\n\r\nevent: x\ndata: l1\ndata: l2\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "{\"b\":2}", "l1\nl2", "[DONE]"};
  for (size_t piece = 1; piece <= body.size(); ++piece) {
    EXPECT_EQ(parse_in_pieces(body, piece), want) << "piece size " << piece;
  }
}

TEST(SseParser, DoneAndIncompleteEvent) {
  SseParser p;
  int n = 0;
  p.feed("data: x\n\ndata: [DONE]\n", [&](std::string_view) { ++n; });
  EXPECT_EQ(n, 1);  // the second event has no blank line yet
  EXPECT_FALSE(p.done());
  p.feed("\n", [&](std::string_view) { ++n; });
  EXPECT_EQ(n, 2);
  EXPECT_TRUE(p.done());
  EXPECT_EQ(p.events(), 2u);
}

// The event counter counts what the parser finds, whatever the cuts, on streams with comments,
// other fields, CRLF lines, data lines without a value and lines that only look like data.
TEST(SseEventCounter, CountsWhatTheParserFindsWhateverTheCuts) {
  const std::string body =
      "data: {\"a\":1}\n\n: comment\n\ndata:{\"b\":2}\r\n\r\nevent: x\ndata: l1\ndata: l2\n\n"
      "data\n\ndata\r\n\r\ndatax: no\n\ndat\n\nretry: 5\n\n:data: no\n\n data: no\n\n"
      "data: [DONE]\n\n";
  const size_t want = parse_in_pieces(body, body.size()).size();
  ASSERT_EQ(want, 6u);
  for (size_t piece = 1; piece <= body.size(); ++piece) {
    SseEventCounter c;
    size_t n = 0;
    for (size_t i = 0; i < body.size(); i += piece) n += c.feed(body.substr(i, piece));
    EXPECT_EQ(n, want) << "piece size " << piece;
    EXPECT_EQ(c.events(), want);
  }
}

TEST(SseEventCounter, BytesWithoutAnEndedDataEventAreNoProgress) {
  SseEventCounter c;
  EXPECT_EQ(c.feed("data: tok"), 0u);
  EXPECT_EQ(c.feed("en\n"), 0u);
  EXPECT_EQ(c.feed("\n"), 1u);
  EXPECT_EQ(c.feed(": keep-alive\n\n: keep-alive\n\n"), 0u) << "comments are no progress";
  EXPECT_EQ(c.feed(std::string(10000, 'x')), 0u) << "junk without a line end";
  EXPECT_EQ(c.feed("\n\n\n\n"), 0u) << "blank lines after junk end no data event";
}

}  // namespace
}  // namespace kvgate::http
