// TimedSocket keeps beast::tcp_stream's deadline rules with one timer per connection: an
// operation pending at its deadline fails with timeout and closes the socket, one started after
// the deadline fails at once, a deadline moved later never fires at the earlier time, one moved
// earlier does, and a connection whose deadline ended holds no work on its io_context. write_now
// sends what fits at once, never waits, and leaves a passed deadline to the write that follows.
#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/error.hpp"
#include "gtest/gtest.h"
#include "kvgate/http/timed_socket.h"
#include "support/sanitizer.h"
#include "support/wait.h"

namespace kvgate::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A connected pair on loopback: `ours` wrapped in a TimedSocket, `peer` a plain socket.
struct Pair {
  explicit Pair(net::io_context& ctx) : peer(ctx) {
    tcp::acceptor acceptor(ctx, {net::ip::make_address("127.0.0.1"), 0});
    tcp::socket client(ctx);
    client.connect(acceptor.local_endpoint());
    acceptor.accept(peer);
    ours.emplace(std::move(client));
  }
  tcp::socket peer;
  std::optional<TimedSocket> ours;
};

struct Outcome {
  bool done = false;
  boost::system::error_code ec;
  size_t n = 0;
  Clock::time_point at;
};

class TimedSocketTest : public ::testing::Test {
 protected:
  TimedSocket& ours() { return *pair_.ours; }
  // Starts a read whose end lands in `out` (which must outlive it, as the fixture's do).
  void read(Outcome& out) {
    ours().async_read_some(net::buffer(buf_), [&out](boost::system::error_code ec, size_t n) {
      out = {true, ec, n, Clock::now()};
    });
  }
  // Runs the context for up to `limit` and expects `out` to have ended in a timeout.
  void expect_timeout(const Outcome& out, Clock::duration limit) {
    ctx_.restart();
    ctx_.run_for(limit);
    ASSERT_TRUE(out.done);
    EXPECT_EQ(out.ec, boost::beast::error::timeout) << out.ec.message();
  }

  net::io_context ctx_;
  Pair pair_{ctx_};
  std::array<char, 16> buf_{};
  Outcome out_;
  Outcome second_;
  const Clock::time_point start_ = Clock::now();
};

TEST_F(TimedSocketTest, APendingReadFailsWithTimeoutAtItsDeadlineAndTheSocketCloses) {
  ours().expires_after(50ms);
  read(out_);
  expect_timeout(out_, 2s);
  EXPECT_GE(out_.at - start_, 50ms);
  EXPECT_LT(out_.at - start_, 1s * testing_support::kSlowdown);
  EXPECT_FALSE(ours().socket().is_open());
}

TEST_F(TimedSocketTest, DataBeforeTheDeadlineIsReadAndTheDeadlineStillHoldsForTheNextRead) {
  ours().expires_after(150ms);
  read(out_);
  net::write(pair_.peer, net::buffer("hi", 2));
  while (!out_.done) ctx_.run_one();
  EXPECT_FALSE(out_.ec) << out_.ec.message();
  EXPECT_EQ(out_.n, 2u);
  // No new expires_after: the same deadline ends the next read.
  read(second_);
  expect_timeout(second_, 2s);
}

TEST_F(TimedSocketTest, ADeadlineMovedLaterDoesNotFireAtTheEarlierOne) {
  ours().expires_after(40ms);
  ours().expires_after(300ms);  // later: the timer fires at 40 ms and waits again
  read(out_);
  expect_timeout(out_, 2s);
  EXPECT_GE(out_.at - start_, 300ms);
}

TEST_F(TimedSocketTest, ADeadlineMovedEarlierFiresAtTheEarlierOne) {
  ours().expires_after(10s);
  read(out_);
  ours().expires_after(60ms);
  expect_timeout(out_, 3s);
  EXPECT_GE(out_.at - start_, 60ms);
  EXPECT_LT(out_.at - start_, 2s * testing_support::kSlowdown);
}

TEST_F(TimedSocketTest, AReadStartedAfterTheDeadlinePassedFailsAtOnce) {
  ours().expires_after(20ms);
  ctx_.run_for(100ms);                             // the deadline passes with nothing pending
  net::write(pair_.peer, net::buffer("late", 4));  // even with bytes there to read
  read(out_);
  expect_timeout(out_, 1s);
  EXPECT_FALSE(ours().socket().is_open());
}

TEST_F(TimedSocketTest, ANewDeadlineAfterAQuietExpiryLetsTheNextReadRun) {
  ours().expires_after(20ms);
  ctx_.run_for(100ms);  // expires with nothing pending (and the context runs out of work)
  ctx_.restart();
  ours().expires_after(1s);
  net::write(pair_.peer, net::buffer("ok", 2));
  read(out_);
  while (!out_.done) ctx_.run_one();
  EXPECT_FALSE(out_.ec) << out_.ec.message();
  EXPECT_EQ(out_.n, 2u);
}

TEST_F(TimedSocketTest, AnEndedDeadlineHoldsNoWorkSoRunReturns) {
  ours().expires_after(30s);
  ours().expires_never();
  ctx_.run();  // returns once the cancelled wait has run
  EXPECT_LT(Clock::now() - start_, 1s * testing_support::kSlowdown);
  // Destroying a socket with a deadline set also ends the wait.
  Pair q(ctx_);
  q.ours->expires_after(30s);
  q.ours.reset();
  ctx_.restart();
  const auto again = Clock::now();
  ctx_.run();
  EXPECT_LT(Clock::now() - again, 1s * testing_support::kSlowdown);
}

TEST_F(TimedSocketTest, DestroyingTheSocketEndsAPendingRead) {
  ours().expires_after(30s);
  read(out_);
  pair_.ours.reset();
  ctx_.run_for(2s);
  ASSERT_TRUE(out_.done) << "the read outlived its socket";
  EXPECT_TRUE(out_.ec);
  EXPECT_LT(out_.at - start_, 1s * testing_support::kSlowdown);
}

TEST_F(TimedSocketTest, WritesShareTheDeadline) {
  // The peer never reads: writes succeed until the windows fill, then one waits and times out.
  std::vector<char> big(1 << 20, 'x');
  std::function<void()> write_more = [&] {
    ours().async_write_some(net::buffer(big), [&](boost::system::error_code ec, size_t n) {
      if (!ec) {
        write_more();
        return;
      }
      out_ = {true, ec, n, Clock::now()};
    });
  };
  const auto start = Clock::now();
  ours().expires_after(200ms);
  write_more();
  expect_timeout(out_, 5s);
  EXPECT_GE(out_.at - start, 200ms);
}

TEST_F(TimedSocketTest, WriteNowSendsWhatFitsWithoutAnOperation) {
  const std::array<net::const_buffer, 2> parts = {net::buffer("he", 2), net::buffer("llo", 3)};
  boost::system::error_code ec;
  EXPECT_EQ(ours().write_now(parts, ec), 5u);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(ctx_.poll(), 0u);  // nothing was queued on the context
  std::array<char, 5> got{};
  net::read(pair_.peer, net::buffer(got));
  EXPECT_EQ(std::string_view(got.data(), got.size()), "hello");
}

TEST_F(TimedSocketTest, WriteNowStopsAtAFullSendBufferWithoutWaiting) {
  // The peer never reads: the first call sends part of a large buffer, later ones nothing.
  std::vector<char> big(16 << 20, 'x');
  const std::array<net::const_buffer, 1> parts = {net::buffer(big)};
  boost::system::error_code ec;
  const auto start = Clock::now();
  const size_t first = ours().write_now(parts, ec);
  EXPECT_GT(first, 0u);
  EXPECT_LT(first, big.size());
  size_t more = 0;
  for (int i = 0; i < 4; ++i) more += ours().write_now(parts, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_LT(more, big.size() - first);
  EXPECT_LT(Clock::now() - start, 1s * testing_support::kSlowdown);
}

TEST_F(TimedSocketTest, WriteNowAfterThePassedDeadlineLeavesTheTimeoutToTheWrite) {
  ours().expires_after(20ms);
  ctx_.run_for(100ms);  // the deadline passes with nothing pending
  const std::array<net::const_buffer, 1> parts = {net::buffer("late", 4)};
  boost::system::error_code ec;
  EXPECT_EQ(ours().write_now(parts, ec), 0u);
  EXPECT_FALSE(ec) << ec.message();
  ours().async_write_some(parts, [&](boost::system::error_code e, size_t n) {
    out_ = {true, e, n, Clock::now()};
  });
  expect_timeout(out_, 1s);
}

TEST_F(TimedSocketTest, WriteNowToAClosedPeerReportsTheErrorWithoutASignal) {
  pair_.peer.close();
  const std::array<net::const_buffer, 1> parts = {net::buffer("x", 1)};
  boost::system::error_code ec;
  // The first send may still be accepted (the reset comes back with it); one after it fails.
  kvgate::testing::wait_until(
      [&] {
        ours().write_now(parts, ec);
        return bool(ec);
      },
      2s, 10ms);
  EXPECT_TRUE(ec == net::error::broken_pipe || ec == net::error::connection_reset) << ec.message();
}

}  // namespace
}  // namespace kvgate::http
