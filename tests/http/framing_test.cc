// Request framing by RFC 9112: every head whose end a proxy in front could place elsewhere is
// refused before its body is read, and the bytes after it never run as a request of their own.
// The rules (detail/framing.h) one by one, the parser's refusal of folded lines, the quick
// parser's Host rule, and the server end to end with the known smuggling shapes.
#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "boost/algorithm/string/predicate.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "gtest/gtest.h"
#include "http/detail/flat_parser.h"
#include "http/detail/framing.h"
#include "http/detail/quick_head.h"
#include "http/raw_exchange.h"
#include "kvgate/http/server.h"

namespace kvgate::http {
namespace {

namespace net = boost::asio;
using detail::request_framing_refusal;

// The status kvgate gives `head` (a request head, its blank line included): the framing rules'
// refusal, 400 for a head Beast's parser refuses, 0 when it is accepted.
unsigned verdict(std::string_view head) {
  FieldList fields;
  detail::RequestParser parser(&fields);
  parser.eager(false);
  boost::system::error_code ec;
  parser.put(net::buffer(head.data(), head.size()), ec);
  if (ec) return 400;
  if (!parser.is_header_done()) return 1;  // the head was not whole: a broken case
  const auto refusal = request_framing_refusal(fields, parser.version());
  return refusal ? refusal->status : 0;
}

constexpr std::string_view kLine = "POST /echo HTTP/1.1\r\n";

std::string head(std::string_view fields, std::string_view line = kLine) {
  return std::string(line) + std::string(fields) + "\r\n";
}

TEST(FramingRules, PlainHeadsPass) {
  EXPECT_EQ(verdict(head("Host: x\r\nContent-Length: 5\r\n")), 0u);
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding: chunked\r\n")), 0u);
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding:\tChunked \r\n")), 0u);
  EXPECT_EQ(verdict(head("Host: [::1]:8000\r\n")), 0u);
  EXPECT_EQ(verdict(head("", "GET /health HTTP/1.0\r\n")), 0u) << "HTTP/1.0 may omit Host";
  EXPECT_EQ(verdict(head("Host:\r\n")), 0u) << "an empty Host is RFC 9112's for no authority";
}

TEST(FramingRules, TransferCodingsOtherThanChunkedAloneAreRefused) {
  for (const char* value : {"xchunked", "identity", "gzip", "chunked, gzip", "chunked, identity",
                            "chunked, chunked", "chunkedx", "chunked;q=1", "chunked,", ", chunked",
                            "\"chunked\"", "chunked\x0b", "chu nked"}) {
    EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding: " + std::string(value) + "\r\n")), 400u)
        << value;
  }
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding:\r\n")), 400u) << "empty";
  // A coding kvgate would have to decode: not implemented.
  for (const char* value : {"gzip, chunked", "deflate,chunked", "x-custom , chunked"}) {
    EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding: " + std::string(value) + "\r\n")), 501u)
        << value;
  }
}

TEST(FramingRules, AmbiguousLengthsAreRefused) {
  // TE.CL and CL.TE in both orders, with chunked and without.
  EXPECT_EQ(verdict(head("Host: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\nContent-Length: 4\r\nTransfer-Encoding: identity\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\nContent-Length: 4\r\nTransfer-Encoding: \r\n")), 400u);
  // Two codings fields, in either order (TE.TE).
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n")),
            400u);
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding: x\r\nTransfer-encoding: chunked\r\n")),
            400u);
  // Lengths repeated or listed, equal or not.
  EXPECT_EQ(verdict(head("Host: x\r\nContent-Length: 4\r\nContent-Length: 4\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\nContent-Length: 4, 4\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\nContent-Length: +4\r\n")), 400u);
  // A body's framing in HTTP/1.0 is its Content-Length or the connection's end, never a coding.
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding: chunked\r\n", "POST /echo HTTP/1.0\r\n")),
            400u);
}

TEST(FramingRules, HostMustBeOneAndPlain) {
  EXPECT_EQ(verdict(head("Content-Length: 0\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: a\r\nHost: b\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: a\r\nhost: a\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: a\r\nHost: b\r\n", "GET / HTTP/1.0\r\n")), 400u);
  for (const char* value : {"a b", "a,b", "a/b", "a@b", "a\tb", "a\x7f"}) {
    EXPECT_EQ(verdict(head("Host: " + std::string(value) + "\r\n")), 400u) << value;
  }
}

TEST(FramingRules, FoldedAndBentFieldLinesAreRefusedByTheParser) {
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding:\r\n chunked\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding: gzip,\r\n\tchunked\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\nX-Note: a\r\n b\r\n")), 400u) << "any field, not only TE";
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding : chunked\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\n Transfer-Encoding: chunked\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\r\nTransfer-Encoding\x0b: chunked\r\n")), 400u);
  EXPECT_EQ(verdict(head("Host: x\nTransfer-Encoding: chunked\r\n")), 400u) << "a bare LF";
}

TEST(FramingRules, TheQuickParserTakesOnlyOneValidHost) {
  FieldList fields;
  detail::QuickHead quick;
  const auto takes = [&](std::string_view bytes) {
    fields.clear();
    return detail::quick_parse_request(bytes, 8192, 1 << 20, &quick, &fields);
  };
  EXPECT_TRUE(takes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_FALSE(takes("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_FALSE(takes("GET / HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n"));
  EXPECT_FALSE(takes("GET / HTTP/1.1\r\nHost: a,b\r\n\r\n"));
  EXPECT_EQ(fields.size(), 0u) << "a head it declines leaves the fields as they were";
}

// The server end to end: the smuggled request after a refused head never runs.
class SmugglingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_.start();
    server_ = std::make_unique<Server>(pool_, ServerOptions{});
    server_->route(Verb::post, "/echo",
                   [this](const Request& req, Responder& r) { return answer(req, r, &echoed_); });
    server_->route(Verb::get, "/smuggled",
                   [this](const Request& req, Responder& r) { return answer(req, r, &smuggled_); });
    ASSERT_TRUE(server_->start().ok());
  }
  void TearDown() override {
    server_->stop();
    pool_.stop();
  }
  static net::awaitable<void> answer(const Request& req, Responder& r, std::atomic<int>* count) {
    count->fetch_add(1);
    Response out = Response::text(200, std::string(req.body()));
    (void)co_await r.send(std::move(out));
  }
  std::string exchange(std::string_view bytes) {
    return kvgate::testing::raw_exchange(server_->port(), bytes);
  }
  static size_t answers_in(std::string_view out) {
    size_t n = 0;
    for (size_t at = out.find("HTTP/1.1 "); at != std::string_view::npos;
         at = out.find("HTTP/1.1 ", at + 1)) {
      ++n;
    }
    return n;
  }

  IoPool pool_{2};
  std::unique_ptr<Server> server_;
  std::atomic<int> echoed_{0};
  std::atomic<int> smuggled_{0};
};

TEST_F(SmugglingTest, TheRequestAfterARefusedHeadNeverRuns) {
  const std::string inner = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  // Each reads as one request with the inner one inside its body to a parser that frames by the
  // coding, and as two requests to one that falls back to the length or to no body.
  const std::vector<std::string> fields = {
      "Content-Length: 5\r\nTransfer-Encoding: xchunked\r\n",
      "Content-Length: 5\r\nTransfer-Encoding: identity\r\n",
      "Content-Length: 5\r\nTransfer-Encoding: gzip\r\n",
      "Content-Length: 5\r\nTransfer-Encoding: \r\n",
      "Transfer-Encoding: xchunked\r\n",
      "Transfer-Encoding: identity\r\n",
      "Transfer-Encoding: gzip\r\n",
      "Transfer-Encoding: chunked, identity\r\n",
      "Transfer-Encoding: chunked\r\nTransfer-Encoding: cow\r\n",
      "Transfer-Encoding:\r\n chunked\r\n",
      "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
  };
  for (const std::string& f : fields) {
    const std::string out =
        exchange("POST /echo HTTP/1.1\r\nHost: x\r\n" + f + "\r\n0\r\n\r\n" + inner);
    EXPECT_TRUE(out.rfind("HTTP/1.1 400", 0) == 0 || out.rfind("HTTP/1.1 501", 0) == 0)
        << f << " -> " << out.substr(0, 40);
    EXPECT_EQ(answers_in(out), 1u) << f;
    EXPECT_TRUE(boost::algorithm::icontains(out, "connection: close")) << f;
  }
  EXPECT_EQ(echoed_.load(), 0);
  EXPECT_EQ(smuggled_.load(), 0);
  EXPECT_EQ(server_->stats().framing_refusals, fields.size());
  // A request a proxy frames the same way still runs, and so does the one pipelined after it.
  const std::string out = exchange(
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n0\r\n\r\n" +
      inner.substr(0, inner.size() - 2) + "Connection: close\r\n\r\n");
  EXPECT_EQ(answers_in(out), 2u) << out;
  EXPECT_EQ(echoed_.load(), 1);
  EXPECT_EQ(smuggled_.load(), 1);
}

TEST_F(SmugglingTest, NoHostOrTwoHostsIsRefusedAndClosed) {
  std::string out = exchange("GET /smuggled HTTP/1.1\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  out = exchange("GET /smuggled HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  EXPECT_EQ(smuggled_.load(), 0);
}

}  // namespace
}  // namespace kvgate::http
