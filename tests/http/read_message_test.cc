// detail::read_message and read_some keep Beast's reading rules: a message already buffered is
// parsed without a read, one that arrives in pieces is assembled, a peer's end of stream ends a
// message without a length and cuts any other, a header read leaves the body for later.
#include "http/detail/read_message.h"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "gtest/gtest.h"

namespace kvgate::http::detail {
namespace {

namespace net = boost::asio;
namespace beast_http = boost::beast::http;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

class ReadMessageTest : public ::testing::Test {
 protected:
  ReadMessageTest() : peer_(ctx_) {
    tcp::acceptor acceptor(ctx_, {net::ip::make_address("127.0.0.1"), 0});
    tcp::socket client(ctx_);
    client.connect(acceptor.local_endpoint());
    acceptor.accept(peer_);
    stream_.emplace(std::move(client), nullptr);
  }

  // Reads into `parser` and runs the context until the read ends (or 5 s pass).
  template <bool kIsRequest>
  std::optional<boost::system::error_code> read(beast_http::basic_parser<kIsRequest>& parser,
                                                ReadUntil until) {
    std::optional<boost::system::error_code> out;
    net::co_spawn(
        ctx_,
        [&]() -> net::awaitable<void> {
          out = co_await read_message(*stream_, buffer_, parser, until);
        },
        [](const std::exception_ptr& e) {
          if (e) std::rethrow_exception(e);
        });
    ctx_.restart();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!out && std::chrono::steady_clock::now() < deadline) ctx_.run_for(10ms);
    return out;
  }
  void buffer(std::string_view bytes) {
    net::buffer_copy(buffer_.prepare(bytes.size()), net::buffer(bytes));
    buffer_.commit(bytes.size());
  }
  // The peer sends `bytes` after `delay`, while the reader waits.
  void send_later(std::string bytes, std::chrono::milliseconds delay) {
    auto timer = std::make_shared<net::steady_timer>(ctx_, delay);
    timer->async_wait([this, timer, bytes = std::move(bytes)](boost::system::error_code) {
      net::write(peer_, net::buffer(bytes));
    });
  }

  net::io_context ctx_;
  tcp::socket peer_;
  std::optional<Stream> stream_;
  boost::beast::flat_buffer buffer_;
};

TEST_F(ReadMessageTest, AMessageAlreadyBufferedIsParsedWithoutARead) {
  // Nothing will come from the peer: a read would wait until the test's limit.
  buffer("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  beast_http::request_parser<beast_http::string_body> parser;
  const auto ec = read(parser, ReadUntil::kWhole);
  ASSERT_TRUE(ec.has_value()) << "the read waited for the peer";
  EXPECT_FALSE(*ec) << ec->message();
  EXPECT_EQ(parser.get().body(), "hello");
  EXPECT_EQ(buffer_.size(), 0u);
}

TEST_F(ReadMessageTest, AMessageInPiecesIsAssembled) {
  buffer("POST /a HTTP/1.1\r\nHo");
  send_later("st: x\r\nContent-Len", 20ms);
  send_later("gth: 11\r\n\r\nhello ", 40ms);
  send_later("worldGET /next", 60ms);  // and the start of a pipelined request
  beast_http::request_parser<beast_http::string_body> parser;
  const auto ec = read(parser, ReadUntil::kWhole);
  ASSERT_TRUE(ec.has_value());
  EXPECT_FALSE(*ec) << ec->message();
  EXPECT_EQ(parser.get().target(), "/a");
  EXPECT_EQ(parser.get().body(), "hello world");
  // The next request's bytes stay buffered for it.
  EXPECT_EQ(std::string_view(static_cast<const char*>(buffer_.data().data()), buffer_.size()),
            "GET /next");
}

TEST_F(ReadMessageTest, AHeaderReadLeavesTheBodyForTheNextRead) {
  buffer("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody");
  beast_http::response_parser<beast_http::string_body> parser;
  auto ec = read(parser, ReadUntil::kHeader);
  ASSERT_TRUE(ec.has_value());
  EXPECT_FALSE(*ec) << ec->message();
  EXPECT_TRUE(parser.is_header_done());
  EXPECT_FALSE(parser.is_done());
  EXPECT_EQ(parser.get().result_int(), 200u);
  ec = read(parser, ReadUntil::kWhole);
  ASSERT_TRUE(ec.has_value());
  EXPECT_FALSE(*ec) << ec->message();
  EXPECT_EQ(parser.get().body(), "body");
}

TEST_F(ReadMessageTest, TheEndOfStreamEndsAnAnswerWithoutALength) {
  send_later("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", 10ms);
  auto close = std::make_shared<net::steady_timer>(ctx_, 40ms);
  close->async_wait([this, close](boost::system::error_code) { peer_.close(); });
  beast_http::response_parser<beast_http::string_body> parser;
  const auto ec = read(parser, ReadUntil::kWhole);
  ASSERT_TRUE(ec.has_value());
  EXPECT_FALSE(*ec) << ec->message();
  EXPECT_TRUE(parser.is_done());
  EXPECT_EQ(parser.get().body(), "until the end");
}

TEST_F(ReadMessageTest, TheEndOfStreamCutsAMessageWithALengthOrBeforeAnyByte) {
  buffer("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort");
  peer_.close();
  beast_http::response_parser<beast_http::string_body> cut;
  auto ec = read(cut, ReadUntil::kWhole);
  ASSERT_TRUE(ec.has_value());
  EXPECT_EQ(*ec, beast_http::error::partial_message) << ec->message();

  beast_http::response_parser<beast_http::string_body> none;
  ec = read(none, ReadUntil::kWhole);  // the same closed connection, nothing buffered
  ASSERT_TRUE(ec.has_value());
  EXPECT_EQ(*ec, beast_http::error::end_of_stream) << ec->message();
}

TEST_F(ReadMessageTest, TheParsersLimitsHold) {
  buffer("POST /a HTTP/1.1\r\nContent-Length: 100\r\n\r\n");
  beast_http::request_parser<beast_http::string_body> parser;
  parser.body_limit(10);
  auto ec = read(parser, ReadUntil::kWhole);
  ASSERT_TRUE(ec.has_value());
  EXPECT_EQ(*ec, beast_http::error::body_limit) << ec->message();

  buffer_.consume(buffer_.size());
  send_later("GET /" + std::string(20000, 'a'), 10ms);
  beast_http::request_parser<beast_http::string_body> long_line;
  long_line.header_limit(8 << 10);
  ec = read(long_line, ReadUntil::kHeader);
  ASSERT_TRUE(ec.has_value());
  EXPECT_EQ(*ec, beast_http::error::header_limit) << ec->message();
}

}  // namespace
}  // namespace kvgate::http::detail
