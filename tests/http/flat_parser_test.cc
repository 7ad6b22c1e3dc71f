// FieldList and detail::FlatParser: the flat store keeps a head's fields in arrival order and
// finds the first of a name in any case; the parser gives the request line or status, fields,
// body, keep_alive() and need_eof() Beast's own parser gives for the same bytes, whole or piece by
// piece.
#include "http/detail/flat_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "boost/asio/buffer.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "kvgate/http/field_list.h"
#include "kvgate/http/message.h"

namespace kvgate::http::detail {
namespace {

namespace beast_http = boost::beast::http;
using Fields = std::vector<std::pair<std::string, std::string>>;

Fields all_of(const FieldList& list) {
  Fields out;
  for (size_t i = 0; i < list.size(); ++i) {
    out.emplace_back(std::string(list[i].name), std::string(list[i].value));
  }
  return out;
}

TEST(FieldList, KeepsArrivalOrderAndFindsTheFirstOfANameInAnyCase) {
  FieldList fields;
  EXPECT_TRUE(fields.empty());
  EXPECT_EQ(fields.get("content-type"), "");
  fields.add("Content-Type", "application/json");
  fields.add("x-request-id", "first");
  fields.add("X-Request-Id", "second");
  fields.add("x-request-ix", "same length, other name");
  fields.add("x-empty", "");
  const std::string long_value(1000, 'v');  // past the first reservation
  fields.add("x-long", long_value);
  for (const char* name : {"content-type", "CONTENT-TYPE", "Content-Type"}) {
    EXPECT_EQ(fields.get(name), "application/json") << name;
  }
  EXPECT_EQ(fields.get("X-REQUEST-ID"), "first");
  EXPECT_EQ(fields.get("x-request-ix"), "same length, other name");
  EXPECT_EQ(fields.get("x-request"), "");
  EXPECT_EQ(fields.get("x-request-idx"), "");
  EXPECT_EQ(fields.get("x-empty"), "");
  EXPECT_EQ(fields.get("x-long"), long_value);
  EXPECT_EQ(all_of(fields), (Fields{{"Content-Type", "application/json"},
                                    {"x-request-id", "first"},
                                    {"X-Request-Id", "second"},
                                    {"x-request-ix", "same length, other name"},
                                    {"x-empty", ""},
                                    {"x-long", long_value}}));
  FieldList moved = std::move(fields);
  EXPECT_EQ(moved.get("content-type"), "application/json");
  EXPECT_EQ(moved.size(), 6u);
  moved.clear();
  EXPECT_TRUE(moved.empty());
  EXPECT_EQ(moved.get("content-type"), "");
  // A list moved from and cleared is used again (a streamed answer's trailers).
  fields.clear();
  fields.add("X-Trailer", "t");
  EXPECT_EQ(all_of(fields), (Fields{{"X-Trailer", "t"}}));
  fields.truncate(0);
  EXPECT_TRUE(fields.empty());
}

// A field name is one or more of RFC 9110's tchar: no separators, spaces, controls or high bytes.
TEST(FieldList, IsTokenTakesOnlyTchar) {
  EXPECT_TRUE(is_token("x-session-id"));
  EXPECT_TRUE(is_token("X_Key.1!#$%&'*+^`|~"));
  for (std::string_view bad :
       {std::string_view(), std::string_view("x key"), std::string_view("x-key:"),
        std::string_view("x\x7fkey"), std::string_view("x\x80key"), std::string_view("x\0key", 5),
        std::string_view("(x)"), std::string_view("a,b")}) {
    EXPECT_FALSE(is_token(bad)) << bad;
  }
}

// A list cleared for the next head keeps the room of a usual one, not that of a large one.
TEST(FieldList, ClearKeepsTheRoomOfAUsualHeadOnly) {
  FieldList fields;
  fields.add("x-usual", std::string(1000, 'v'));
  const size_t usual = fields.room();
  fields.clear();
  EXPECT_EQ(fields.room(), usual);
  fields.add("x-large", std::string(2 * FieldList::kKeptRoom, 'v'));
  EXPECT_GT(fields.room(), FieldList::kKeptRoom);
  fields.clear();
  EXPECT_LE(fields.room(), FieldList::kKeptRoom);
  EXPECT_TRUE(fields.empty());
}

// A head's field lines taken as one block: the same fields as added one by one, after those already
// there, and the block's own bytes no longer needed.
TEST(FieldList, AddsTheFieldsOfABlockAfterThoseAlreadyThere) {
  FieldList fields;
  fields.add("Host", "w:1");
  std::string block = "Content-Type: application/json\r\nX-Empty:\r\nx-id:  7 \r\n";
  const std::string_view b = block;
  const FieldList::Field found[] = {{b.substr(0, 12), b.substr(14, 16)},
                                    {b.substr(32, 7), b.substr(40, 0)},
                                    {b.substr(42, 4), b.substr(49, 1)}};
  fields.add_all(block, found);
  block.assign(block.size(), '#');  // the list holds its own copy
  EXPECT_EQ(
      all_of(fields),
      (Fields{
          {"Host", "w:1"}, {"Content-Type", "application/json"}, {"X-Empty", ""}, {"x-id", "7"}}));
  EXPECT_EQ(fields.get("content-type"), "application/json");
  EXPECT_EQ(fields.get("X-ID"), "7");
  fields.truncate(2);
  fields.add("x-after", "a");
  EXPECT_EQ(all_of(fields),
            (Fields{{"Host", "w:1"}, {"Content-Type", "application/json"}, {"x-after", "a"}}));
}

// What a parser gave: the request line (requests) or status (answers), fields, body, and whether
// the connection is kept and ended by the peer.
struct Parsed {
  boost::system::error_code ec;
  Verb method = Verb::unknown;
  std::string target;
  unsigned status = 0;
  Fields fields;
  std::string body;
  bool keep_alive = false;
  bool need_eof = false;
};

// Feeds `bytes` `step` bytes at a time (the parser keeps what it could not use, as a read loop
// does), then the end of stream if the answer is still open.
template <class Parser>
void feed(Parser& parser, std::string_view bytes, size_t step, boost::system::error_code& ec) {
  parser.eager(true);
  std::string pending;
  for (size_t at = 0; at < bytes.size() && !parser.is_done();) {
    const size_t n = std::min(step, bytes.size() - at);
    pending.append(bytes.substr(at, n));
    at += n;
    ec = {};
    const size_t used = parser.put(boost::asio::buffer(pending), ec);
    pending.erase(0, used);
    if (ec == beast_http::error::need_more) ec = {};
    if (ec) return;
  }
  if (!parser.is_done() && parser.got_some()) parser.put_eof(ec);
}

template <bool kIsRequest>
Parsed with_beast(std::string_view bytes, size_t step) {
  Parsed out;
  beast_http::parser<kIsRequest, beast_http::string_body> parser;
  feed(parser, bytes, step, out.ec);
  if (out.ec || !parser.is_done()) return out;
  if constexpr (kIsRequest) {
    out.method = parser.get().method();
    out.target = std::string(parser.get().target());
  } else {
    out.status = parser.get().result_int();
  }
  for (const auto& f : parser.get()) {
    out.fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
  }
  out.body = parser.get().body();
  out.keep_alive = parser.keep_alive();
  out.need_eof = parser.need_eof();
  return out;
}

template <bool kIsRequest>
Parsed with_flat(std::string_view bytes, size_t step) {
  Parsed out;
  FieldList fields;
  FlatParser<kIsRequest> parser(&fields);
  parser.collect_body(&out.body);
  feed(parser, bytes, step, out.ec);
  if (out.ec || !parser.is_done()) return Parsed{.ec = out.ec};
  if constexpr (kIsRequest) {
    out.method = parser.method();
    out.target = parser.target();
  } else {
    out.status = parser.status();
  }
  out.fields = all_of(fields);
  out.keep_alive = parser.keep_alive();
  out.need_eof = parser.need_eof();
  return out;
}

// Each message, fed whole and in steps, parses the same with both.
template <bool kIsRequest>
void expect_same_as_beast(const std::vector<std::string_view>& messages, size_t step) {
  for (std::string_view message : messages) {
    for (size_t s : {message.size(), size_t{1}, step}) {
      const Parsed beast = with_beast<kIsRequest>(message, s);
      const Parsed flat = with_flat<kIsRequest>(message, s);
      ASSERT_FALSE(beast.ec) << beast.ec.message() << " in " << message;
      EXPECT_FALSE(flat.ec) << flat.ec.message() << " in " << message;
      EXPECT_EQ(flat.method, beast.method) << message;
      EXPECT_EQ(flat.target, beast.target) << message;
      EXPECT_EQ(flat.status, beast.status) << message;
      EXPECT_EQ(flat.fields, beast.fields) << message;
      EXPECT_EQ(flat.body, beast.body) << message;
      EXPECT_EQ(flat.keep_alive, beast.keep_alive) << message;
      EXPECT_EQ(flat.need_eof, beast.need_eof) << message;
    }
  }
}

const std::vector<std::string_view> kAnswers = {
    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n"
    "x-request-id: abc\r\n\r\n{\"ok\":true}",
    "HTTP/1.1 200 OK\r\nDate: Sat, 05 Dec 2026 10:00:00 GMT\r\nServer: uvicorn\r\n"
    "Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    "7\r\ndata: 1\r\n8;ext=1\r\n\ndata: 2\r\n0\r\nX-Trailer: t\r\n\r\n",
    "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy",
    "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end of stream",
    "HTTP/1.1 204 No Content\r\nX-Empty:\r\nX-Padded:   value with spaces   \r\n\r\n",
    "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
};

TEST(ResponseParser, GivesWhatBeastsParserGivesForTheSameBytes) {
  expect_same_as_beast<false>(kAnswers, 7);
  // The cases themselves: trailers after the head's fields, a close, an answer to the end.
  const Parsed chunked = with_flat<false>(kAnswers[1], 3);
  EXPECT_EQ(chunked.body, "data: 1\ndata: 2");
  EXPECT_EQ(chunked.fields.back(), (std::pair<std::string, std::string>("X-Trailer", "t")));
  EXPECT_FALSE(with_flat<false>(kAnswers[2], 100).keep_alive);
  EXPECT_TRUE(with_flat<false>(kAnswers[3], 100).need_eof);
}

TEST(RequestParser, GivesWhatBeastsParserGivesForTheSameBytes) {
  const std::vector<std::string_view> requests = {
      "POST /v1/completions?stream=1 HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
      "Content-Length: 14\r\nAuthorization: Bearer k\r\n\r\n{\"prompt\":\"a\"}",
      "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\n{\"a\"\r\n5\r\n:1}\r\n\r\n0\r\n\r\n",
      "GET /health HTTP/1.0\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nConnection: close\r\nX-Dup: 1\r\nx-dup: 2\r\n\r\n",
      "BREW /pot HTTP/1.1\r\nHost: gw\r\n\r\n",
  };
  expect_same_as_beast<true>(requests, 5);
  const Parsed chunked = with_flat<true>(requests[1], 2);
  EXPECT_EQ(chunked.body, "{\"a\":1}\r\n");
  EXPECT_EQ(with_flat<true>(requests[4], 100).method, Verb::unknown);
  EXPECT_FALSE(with_flat<true>(requests[2], 100).keep_alive);
}

TEST(ResponseParser, KeepsBeastsLimitsAndFieldRules) {
  FieldList fields;
  std::string body;
  {
    ResponseParser parser(&fields);
    parser.collect_body(&body);
    parser.body_limit(4);
    boost::system::error_code ec;
    feed(parser, kAnswers[0], 1000, ec);
    EXPECT_EQ(ec, beast_http::error::body_limit);
  }
  {
    ResponseParser parser(&fields);
    parser.collect_body(&body);
    parser.header_limit(32);
    boost::system::error_code ec;
    feed(parser, kAnswers[1], 1000, ec);
    EXPECT_EQ(ec, beast_http::error::header_limit);
  }
  {
    ResponseParser parser(&fields);
    parser.collect_body(&body);
    boost::system::error_code ec;
    feed(parser, "HTTP/1.1 200 OK\r\nbad header\r\n\r\n", 1000, ec);
    EXPECT_TRUE(ec) << "a field without a colon";
  }
}

// Piece by piece: each parse fills the room it was given and stops with need_buffer, and the
// pieces join to the whole body, chunked or not.
TEST(ResponseParser, FillsTheGivenRoomPieceByPiece) {
  for (std::string_view answer : {kAnswers[0], kAnswers[1]}) {
    FieldList fields;
    ResponseParser parser(&fields);
    boost::system::error_code ec;
    std::string bytes(answer);
    size_t used = parser.put(boost::asio::buffer(bytes), ec);
    ASSERT_FALSE(ec && ec != beast_http::error::need_more) << ec.message();
    ASSERT_TRUE(parser.is_header_done());
    bytes.erase(0, used);
    std::string joined;
    char room[5];
    while (!parser.is_done()) {
      parser.set_piece(room, sizeof room);
      ec = {};
      used = parser.put(boost::asio::buffer(bytes), ec);
      bytes.erase(0, used);
      ASSERT_TRUE(!ec || ec == beast_http::error::need_buffer) << ec.message();
      if (ec == beast_http::error::need_buffer) {
        EXPECT_EQ(parser.piece_room(), 0u);
      }
      joined.append(room, sizeof room - parser.piece_room());
    }
    EXPECT_EQ(joined, with_beast<false>(answer, answer.size()).body) << answer;
  }
  // No room: nothing of the body is taken.
  FieldList fields;
  ResponseParser parser(&fields);
  parser.eager(true);
  std::string bytes(kAnswers[0]);
  boost::system::error_code ec;
  const size_t used = parser.put(boost::asio::buffer(bytes), ec);
  EXPECT_EQ(ec, beast_http::error::need_buffer);
  EXPECT_EQ(used, bytes.find("\r\n\r\n") + 4) << "the head, not a byte of the body";
  EXPECT_EQ(parser.status(), 200u);
  EXPECT_EQ(fields.get("X-REQUEST-ID"), "abc");
}

}  // namespace
}  // namespace kvgate::http::detail
