#include "kvgate/http/timed_socket.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "http/detail/read_readiness.h"

namespace kvgate::http {

TimedSocket::TimedSocket(boost::asio::ip::tcp::socket socket)
    : state_(std::make_shared<State>(std::move(socket))) {
  state_->marks_drained = detail::marks_drained(state_->socket);
}

void TimedSocket::note_read_started(State& s) {
  // The completion cannot have run yet: Asio never calls a handler inside the initiation.
  s.read_queued = s.marks_drained && detail::read_is_queued(s.socket);
}

void TimedSocket::note_read_done(State& s, const boost::system::error_code& ec, size_t got,
                                 size_t asked) {
  // A queued read completes from the reactor's dispatch of the socket's edge, before its next
  // epoll wait: no edge can have been collected since the receive, so the flag may be cleared.
  if (s.read_queued && !ec && got < asked) detail::mark_drained(s.socket);
  s.read_queued = false;
}

void TimedSocket::expires_after(clock::duration d) {
  State& s = *state_;
  s.deadline = clock::now() + d;
  s.expired = false;
  // A later deadline waits for the timer to fire at the earlier one, which then waits again.
  if (s.deadline < s.armed) arm(state_);
}

void TimedSocket::expires_never() {
  State& s = *state_;
  s.deadline = clock::time_point::max();
  s.expired = false;
  if (s.armed != clock::time_point::max()) {
    s.armed = clock::time_point::max();
    s.timer.cancel();
  }
}

void TimedSocket::close() {
  State& s = *state_;
  boost::system::error_code ignored;
  s.socket.close(ignored);
  s.armed = clock::time_point::max();
  s.timer.cancel();
}

size_t TimedSocket::write_now(std::span<const boost::asio::const_buffer> buffers,
                              boost::system::error_code& ec) {
  State& s = *state_;
  ec = {};
  if (s.expired || s.timed_out || !s.socket.is_open()) return 0;
  std::array<iovec, 8> iov{};
  const size_t n = std::min(buffers.size(), iov.size());
  for (size_t i = 0; i < n; ++i) {
    iov[i] = {const_cast<void*>(buffers[i].data()), buffers[i].size()};
  }
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = n;
  for (;;) {
    const ssize_t sent = ::sendmsg(s.socket.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent >= 0) return static_cast<size_t>(sent);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = boost::system::error_code(errno, boost::asio::error::get_system_category());
    }
    return 0;
  }
}

void TimedSocket::arm(const std::shared_ptr<State>& s) {
  s->armed = s->deadline;
  s->timer.expires_at(s->deadline);  // cancels the wait for the later deadline, if any
  s->timer.async_wait([weak = std::weak_ptr<State>(s)](const boost::system::error_code& ec) {
    on_timer(weak, ec);
  });
}

void TimedSocket::on_timer(const std::weak_ptr<State>& weak, const boost::system::error_code& ec) {
  if (ec == boost::asio::error::operation_aborted) return;  // re-armed, ended or closed
  const std::shared_ptr<State> s = weak.lock();
  if (!s) return;
  s->armed = clock::time_point::max();
  if (s->deadline == clock::time_point::max()) return;
  if (clock::now() < s->deadline) {
    arm(s);  // the deadline moved later while the timer waited
    return;
  }
  if (s->pending == 0) {
    s->expired = true;
    return;
  }
  s->timed_out = true;
  boost::system::error_code ignored;
  s->socket.close(ignored);
}

}  // namespace kvgate::http
