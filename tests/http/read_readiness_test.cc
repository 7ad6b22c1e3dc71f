// A TimedSocket read that waited for its bytes and got fewer than it asked for, with no end of
// stream behind them, marks the socket drained, so the next read waits for epoll's wake-up without
// trying a receive first; a read the first receive completed never marks (an edge may have been
// collected before its handler ran, and clearing the flag then would lose it: the next read would
// wait forever); contexts run by more than one thread never mark. Every case also checks that the
// next bytes are read.
#include <array>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "gtest/gtest.h"
#include "http/detail/read_readiness.h"
#include "kvgate/http/timed_socket.h"

namespace kvgate::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

struct ReadEnd {
  bool done = false;
  boost::system::error_code ec;
  size_t n = 0;
};

class ReadReadinessTest : public ::testing::Test {
 protected:
  explicit ReadReadinessTest(int concurrency_hint = 1) : ctx_(concurrency_hint), peer_(ctx_) {
    tcp::acceptor acceptor(ctx_, {net::ip::make_address("127.0.0.1"), 0});
    tcp::socket client(ctx_);
    client.connect(acceptor.local_endpoint());
    acceptor.accept(peer_);
    ours_.emplace(std::move(client));
  }

  TimedSocket& ours() { return *ours_; }
  bool receives_first() { return detail::next_read_receives_first(ours().socket()); }
  void send(std::string_view bytes) { net::write(peer_, net::buffer(bytes)); }
  void read(ReadEnd& out) {
    out = {};
    ours().async_read_some(net::buffer(buf_), [&out](boost::system::error_code ec, size_t n) {
      out = {true, ec, n};
    });
  }
  // Runs the context until `out` is done or a second has passed.
  void run_until(const ReadEnd& out) {
    const auto until = std::chrono::steady_clock::now() + 1s;
    ctx_.restart();
    while (!out.done && std::chrono::steady_clock::now() < until) ctx_.run_one_for(10ms);
  }
  std::string got(const ReadEnd& out) const { return std::string(buf_.data(), out.n); }

  net::io_context ctx_;
  tcp::socket peer_;
  std::optional<TimedSocket> ours_;
  std::array<char, 16> buf_{};
  ReadEnd out_;
};

TEST_F(ReadReadinessTest, AShortReadThatWaitedMarksTheSocketAndTheNextBytesStillWakeIt) {
  ASSERT_TRUE(detail::marks_drained(ours().socket()));
  // The first short read only asks epoll to report the peer's end of stream from now on (its own
  // wake-up could not say whether one followed the bytes): not marked.
  read(out_);
  send("0");
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_TRUE(receives_first());

  read(out_);  // nothing there yet: the first receive fails and the read waits
  EXPECT_TRUE(detail::read_is_queued(ours().socket()));
  send("ab");
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_EQ(got(out_), "ab");
  EXPECT_FALSE(receives_first());

  read(out_);  // a marked socket: this read waits without a receive and the edge wakes it
  EXPECT_TRUE(detail::read_is_queued(ours().socket()));
  send("c");
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_EQ(got(out_), "c");
  EXPECT_FALSE(receives_first());

  send("d");  // arrives before the read starts: its edge sets the flag again
  {
    const auto work = net::make_work_guard(ctx_);  // an io_context without work does not poll
    ctx_.restart();
    ctx_.poll();
  }
  EXPECT_TRUE(receives_first());
  read(out_);
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_EQ(got(out_), "d");
}

TEST_F(ReadReadinessTest, AReadTheFirstReceiveCompletedDoesNotMarkSoAnEdgeBeforeItsHandlerCounts) {
  send("b");
  read(out_);  // the first receive takes "b"; the completion waits behind the next epoll wait
  EXPECT_FALSE(detail::read_is_queued(ours().socket()));
  send("c");  // that epoll wait collects this edge before the handler runs
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_EQ(got(out_), "b");
  EXPECT_TRUE(receives_first());
  read(out_);
  run_until(out_);
  ASSERT_TRUE(out_.done) << "the edge for \"c\" was lost";
  EXPECT_EQ(got(out_), "c");
}

TEST_F(ReadReadinessTest, AFullReadDoesNotMark) {
  read(out_);
  send(std::string(buf_.size() + 4, 'x'));
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_EQ(out_.n, buf_.size());
  EXPECT_TRUE(receives_first());
  read(out_);
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_EQ(out_.n, 4u);
}

// A peer that sends its last bytes and closes: both can reach the socket before the context's
// next epoll wait, which then reports one edge for the two. The receive takes the bytes (fewer
// than asked) and the end of stream is still to read, with no edge left to wake a waiting read.
TEST_F(ReadReadinessTest, AnEndOfStreamBehindTheLastBytesIsRead) {
  read(out_);
  send("ab");
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_EQ(got(out_), "ab");

  read(out_);
  EXPECT_TRUE(detail::read_is_queued(ours().socket()));
  send("c");
  peer_.shutdown(tcp::socket::shutdown_send);  // the bytes and the end arrive together
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_EQ(got(out_), "c");
  EXPECT_TRUE(receives_first());

  read(out_);
  run_until(out_);
  ASSERT_TRUE(out_.done) << "the end of stream was lost";
  EXPECT_EQ(out_.ec, net::error::eof);
}

class ReadReadinessSharedContextTest : public ReadReadinessTest {
 protected:
  ReadReadinessSharedContextTest() : ReadReadinessTest(BOOST_ASIO_CONCURRENCY_HINT_DEFAULT) {}
};

TEST_F(ReadReadinessSharedContextTest, AContextForManyThreadsNeverMarks) {
  EXPECT_FALSE(detail::marks_drained(ours().socket()));
  read(out_);
  send("ab");
  run_until(out_);
  ASSERT_TRUE(out_.done);
  EXPECT_TRUE(receives_first());
}

// Bytes arriving at random moments around the reads (before, during and after each one starts),
// from another thread: every byte is read and no read waits for an edge that came and went.
TEST_F(ReadReadinessTest, BytesAtRandomMomentsAreAllReadWithoutAStall) {
  constexpr int kMessages = 2000;
  std::thread writer([this] {
    std::mt19937 rng(7);
    for (int i = 0; i < kMessages; ++i) {
      const char byte = static_cast<char>('a' + i % 26);
      net::write(peer_, net::buffer(&byte, 1));
      if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
    }
  });
  int received = 0;
  bool in_order = true;
  int stalls = 0;
  while (received < kMessages && stalls == 0) {
    read(out_);
    run_until(out_);
    if (!out_.done || out_.ec) {
      ++stalls;
      break;
    }
    for (size_t k = 0; k < out_.n; ++k) {
      in_order = in_order && buf_[k] == static_cast<char>('a' + (received + k) % 26);
    }
    received += static_cast<int>(out_.n);
  }
  writer.join();
  EXPECT_EQ(stalls, 0) << "a read waited a second with bytes pending, after " << received;
  EXPECT_EQ(received, kMessages);
  EXPECT_TRUE(in_order);
}

}  // namespace
}  // namespace kvgate::http
