// TimedSocket: a TCP socket whose reads and writes share one deadline, as on beast::tcp_stream,
// kept by one timer per connection.
//
// beast::tcp_stream starts a timer wait with every read and write and cancels it when the
// operation completes: two timer-queue operations and a cancelled handler to run per operation,
// most of a proxy's bookkeeping on a small request. Here expires_after() only records the
// deadline; the one timer is re-armed when a deadline moves earlier than the one it waits for,
// and when it fires early (the deadline moved later meanwhile) it waits again. A request served on
// a kept-alive connection moves its deadline earlier about once (from the keep-alive wait's to
// the read's), so it costs one re-arm instead of one per operation.
//
// Semantics, as beast::tcp_stream's: an operation pending when its deadline passes fails with
// beast::error::timeout and the socket is closed; one started after the deadline passed, with no
// new expires_after() since, fails with timeout too. Unlike there, a deadline holds its timer's
// wait between operations, until expires_never() or close(): an io_context run until it has no
// work left waits for it, so a connection that goes idle ends its deadline (the client does when
// an exchange ends).
//
// Reads skip the receive Asio tries before it waits when the socket is known to be drained: a
// read that waited for its bytes and got fewer than it asked for marks it so (see
// src/http/detail/read_readiness.h), on contexts run by one thread.
//
// Threading: like a socket, one thread (the connection's executor) at a time. The timer's handler
// runs on the socket's executor; every operation must be started there too (the gateway's
// connections never leave the context that opened them).
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <utility>

#include "boost/asio/associated_executor.hpp"
#include "boost/asio/async_result.hpp"
#include "boost/asio/bind_executor.hpp"
#include "boost/asio/buffer.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/error.hpp"

namespace kvgate::http {

class TimedSocket {
 public:
  using executor_type = boost::asio::ip::tcp::socket::executor_type;
  using clock = std::chrono::steady_clock;

  explicit TimedSocket(boost::asio::ip::tcp::socket socket);
  TimedSocket(TimedSocket&&) noexcept = default;
  TimedSocket& operator=(TimedSocket&&) noexcept = default;
  // Closes the socket too, as beast::tcp_stream does: an operation still pending (its handler
  // holds the state) ends now instead of waiting without a deadline.
  ~TimedSocket() {
    if (state_) close();
  }

  executor_type get_executor() { return state_->socket.get_executor(); }
  boost::asio::ip::tcp::socket& socket() { return state_->socket; }

  // Operations pending or started from now on fail with timeout once `d` has passed.
  void expires_after(clock::duration d);
  // No deadline (and no timer wait) until the next expires_after().
  void expires_never();
  // Closes the socket (pending operations complete with an error) and ends the timer's wait.
  void close();

  // Sends what the kernel takes of `buffers` now, in order, without waiting: the bytes sent, 0
  // when the send buffer is full or the deadline has passed (an asynchronous write then waits or
  // reports the timeout). A connection error goes to `ec`. An answer that fits the send buffer,
  // almost every one, leaves without an operation's round through the executor. Not while
  // another write is pending.
  size_t write_now(std::span<const boost::asio::const_buffer> buffers,
                   boost::system::error_code& ec);

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    return boost::asio::async_initiate<ReadToken, void(boost::system::error_code, size_t)>(
        Initiate<true>{state_}, token, buffers);
  }
  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    return boost::asio::async_initiate<WriteToken, void(boost::system::error_code, size_t)>(
        Initiate<false>{state_}, token, buffers);
  }

 private:
  struct State {
    explicit State(boost::asio::ip::tcp::socket s)
        : socket(std::move(s)), timer(socket.get_executor()) {}
    boost::asio::ip::tcp::socket socket;
    boost::asio::steady_timer timer;
    clock::time_point deadline = clock::time_point::max();
    clock::time_point armed = clock::time_point::max();  // what the timer waits for (max: none)
    int pending = 0;                                     // operations in flight
    bool expired = false;        // the deadline passed with nothing pending: the next one fails
    bool timed_out = false;      // the deadline closed the socket under a pending operation
    bool marks_drained = false;  // short reads may mark the socket drained (one-thread context)
    bool read_queued = false;    // the pending read waited in the reactor's queue
  };

  // After a read's initiation: whether it waits for its bytes (only such reads mark).
  static void note_read_started(State& s);
  // In a read's completion, before its handler: marks the socket drained after a short read.
  static void note_read_done(State& s, const boost::system::error_code& ec, size_t got,
                             size_t asked);

  static void arm(const std::shared_ptr<State>& s);
  static void on_timer(const std::weak_ptr<State>& weak, const boost::system::error_code& ec);
  // What an operation's error becomes: a timeout when the deadline closed the socket under it.
  static boost::system::error_code outcome(const State& s, boost::system::error_code ec) {
    return ec && s.timed_out ? boost::system::error_code(boost::beast::error::timeout) : ec;
  }

  template <bool kRead>
  struct Initiate {
    std::shared_ptr<State> state;
    template <class Handler, class Buffers>
    void operator()(Handler&& handler, const Buffers& buffers) const {
      State& s = *state;
      const auto ex = boost::asio::get_associated_executor(handler, s.socket.get_executor());
      if (s.expired || s.timed_out) {
        // The deadline passed before this operation began.
        s.timed_out = true;
        boost::system::error_code ignored;
        s.socket.close(ignored);
        boost::asio::post(ex, [h = std::move(handler)]() mutable {
          std::move(h)(boost::system::error_code(boost::beast::error::timeout), size_t{0});
        });
        return;
      }
      ++s.pending;
      const size_t asked = kRead ? boost::asio::buffer_size(buffers) : 0;
      auto done =
          boost::asio::bind_executor(ex, [state = state, h = std::move(handler), asked](
                                             boost::system::error_code ec, size_t n) mutable {
            --state->pending;
            if constexpr (kRead) {
              note_read_done(*state, ec, n, asked);
            } else {
              (void)asked;  // writes do not use it
            }
            const boost::system::error_code result = outcome(*state, ec);
            state.reset();
            std::move(h)(result, n);
          });
      if constexpr (kRead) {
        s.socket.async_read_some(buffers, std::move(done));
        note_read_started(s);
      } else {
        s.socket.async_write_some(buffers, std::move(done));
      }
    }
  };

  std::shared_ptr<State> state_;
};

}  // namespace kvgate::http
