// StreamEvents on every cut of a stream: the usage event the gateway asked for is stripped, the
// usage is kept, and whole events pass as views of their piece, copied by nothing.
#include "app/stream_events.h"

#include <gtest/gtest.h>

#include <string>

#include "app/cache_report.h"

namespace kvgate::app {
namespace {

const std::string kStream =
    "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n"
    "data: {\"choices\":[{\"text\":\"b\"}]}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n"
    "data: [DONE]\n\n";

TEST(StreamEvents, TheUsageEventIsStrippedAndTheUsageKeptWhereverThePiecesSplit) {
  const std::string expected =
      "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n"
      "data: {\"choices\":[{\"text\":\"b\"}]}\n\n"
      "data: [DONE]\n\n";
  for (const bool strip : {true, false}) {
    for (size_t cut = 1; cut < kStream.size(); ++cut) {
      StreamEvents events(strip);
      std::string out(events.feed(std::string_view(kStream).substr(0, cut)));
      out += events.feed(std::string_view(kStream).substr(cut));
      out += events.rest();
      EXPECT_EQ(out, strip ? expected : kStream) << "cut at " << cut;
      EXPECT_EQ(reported_cached_tokens(events.usage()), 32u) << "cut at " << cut;
    }
  }
}

TEST(StreamEvents, CrlfEventsAndAnUnterminatedLastEventKeptForTheEnd) {
  StreamEvents crlf(/*strip_usage=*/true);
  const std::string out(
      crlf.feed("data: {\"choices\": [], \"usage\": {}}\r\n\r\ndata: x\r\n\r\ndata: y"));
  EXPECT_EQ(out, "data: x\r\n\r\n");
  EXPECT_EQ(crlf.rest(), "data: y");
}

// The common stream: every piece one or more whole token events, the usage at the end. Nothing
// but the usage is copied, and the pieces go out as themselves.
TEST(StreamEvents, WholeEventsAreRelayedWithoutACopy) {
  const std::string token = "data: {\"choices\":[{\"text\":\"tok\"}],\"usage\":null}\n\n";
  const std::string usage =
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":48}}}\n\n";
  for (const bool strip : {true, false}) {
    StreamEvents events(strip);
    uint64_t relayed = 0;
    for (int i = 0; i < 200; ++i) {
      const std::string_view out = events.feed(token);
      EXPECT_EQ(out.data(), token.data()) << "a view of the piece itself";
      relayed += out.size();
    }
    EXPECT_EQ(events.bytes_copied(), 0u) << "\"usage\":null is no usage";
    const std::string last = usage + "data: [DONE]\n\n";
    relayed += events.feed(last).size();
    EXPECT_EQ(reported_cached_tokens(events.usage()), 48u);
    EXPECT_LT(events.bytes_copied(), 2 * last.size()) << "the last piece at most, and the usage";
    EXPECT_GT(relayed, 100 * events.bytes_copied());
  }
}

TEST(StreamEvents, AUsageKeyCutAcrossTwoPiecesIsFound) {
  const size_t key = kStream.find("\"usage\":{");
  for (size_t cut = key + 1; cut < key + 7; ++cut) {
    StreamEvents events(/*strip_usage=*/false);
    (void)events.feed(std::string_view(kStream).substr(0, cut));
    (void)events.feed(std::string_view(kStream).substr(cut));
    EXPECT_EQ(reported_cached_tokens(events.usage()), 32u) << "cut at " << cut;
  }
}

// An engine's error event is found wherever the stream's pieces cut it, and only there.
TEST(ErrorEventScan, FindsAnErrorEventWhereverThePiecesCutIt) {
  const std::string stream =
      "data: {\"id\":\"c\",\"choices\":[{\"text\":\"x\"}]}\n\n"
      "data: {\"error\":{\"message\":\"engine died\"}}\n\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    ErrorEventScan scan;
    scan.scan(std::string_view(stream).substr(0, cut));
    scan.scan(std::string_view(stream).substr(cut));
    EXPECT_TRUE(scan.found()) << "cut at " << cut;
  }
  // Byte by byte: each piece shorter than the pattern.
  ErrorEventScan bytes;
  for (char c : stream) bytes.scan(std::string_view(&c, 1));
  EXPECT_TRUE(bytes.found());
  // A clean stream, however cut, has none.
  const std::string clean = stream.substr(0, stream.find("data: {\"error"));
  for (size_t cut = 0; cut <= clean.size(); ++cut) {
    ErrorEventScan scan;
    scan.scan(std::string_view(clean).substr(0, cut));
    scan.scan(std::string_view(clean).substr(cut));
    scan.scan("data: [DONE]\n\n");
    EXPECT_FALSE(scan.found()) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace kvgate::app
