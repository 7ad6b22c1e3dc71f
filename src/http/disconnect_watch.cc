// DisconnectWatch: one readiness wait on the client socket while its handler waits elsewhere.
//
// The socket becomes readable when the client sends bytes or closes. A non-blocking MSG_PEEK tells
// the two apart without consuming anything: 0 bytes is the client's FIN, an error a reset; bytes
// are a next request, which the connection's own read loop will read after this response.
//
// On a TLS connection the bytes cannot be told apart by looking (TLS 1.3 sends even its closing
// alert as an application-data record), so there the watch reads through TLS into the session's
// input buffer: an error or the client's close_notify is the close, and decrypted bytes are a next
// request, left in the buffer for the read loop.
//
// The wait starts at the next tick of its context's WatchArming (every kArmDelay while watches
// are waiting for it), not when the watch is made. A wait costs a system call to start (Asio
// re-registers the socket so that a close that came before it is seen) and a cancellation to
// end; most proxied requests that end within a few milliseconds never needed either.
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <utility>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "http/detail/session.h"
#include "kvgate/http/server.h"

namespace kvgate::http {

struct DisconnectWatchState {
  std::function<void()> on_close;
  bool active = true;
  bool fired = false;
  bool waiting = false;  // the socket wait (or TLS read) has started: ending it cancels it
};

namespace {

using tcp = boost::asio::ip::tcp;
constexpr std::chrono::milliseconds kArmDelay{10};

void fire(DisconnectWatchState& state) {
  state.active = false;
  state.fired = true;
  // Moved out first: on_close may destroy the watch (and with it the last other reference).
  std::function<void()> on_close = std::move(state.on_close);
  if (on_close) on_close();
}

void arm(std::shared_ptr<detail::Session> session, std::shared_ptr<DisconnectWatchState> state);

// A TLS connection became readable: read what it carries.
void read_tls(std::shared_ptr<detail::Session> session,
              std::shared_ptr<DisconnectWatchState> state) {
  detail::Session& s = *session;
  s.stream.async_read_some(
      s.input.prepare(4096), [session = std::move(session), state = std::move(state)](
                                 boost::system::error_code ec, size_t n) mutable {
        session->input.commit(n);  // whether or not the watch has ended: these bytes are a request
        if (!state->active || ec == boost::asio::error::operation_aborted) return;
        if (ec) {
          fire(*state);
        } else if (n == 0) {
          arm(std::move(session), std::move(state));  // a record with no data (a key update)
        }
      });
}

void arm(std::shared_ptr<detail::Session> session, std::shared_ptr<DisconnectWatchState> state) {
  tcp::socket& socket = session->stream.socket();
  socket.async_wait(tcp::socket::wait_read, [session, state](boost::system::error_code ec) mutable {
    if (!state->active || ec) return;  // ended, cancelled, or the socket was closed under us
    if (session->stream.tls() != nullptr) {
      read_tls(std::move(session), std::move(state));
      return;
    }
    char byte;
    const ssize_t n =
        ::recv(session->stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;  // a next request: not a disconnect
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      arm(session, state);  // a spurious wake-up
      return;
    }
    fire(*state);
  });
}

// The watches of one io_context that wait for their socket wait to start. Like everything on an
// IoPool context, it runs on that context's one thread: no lock.
class WatchArming final : public boost::asio::execution_context::service {
 public:
  static inline boost::asio::execution_context::id id;  // Asio's key for the service
  // Every session's context is an io_context (IoPool's).
  explicit WatchArming(boost::asio::execution_context& ctx)
      : service(ctx), timer_(static_cast<boost::asio::io_context&>(ctx)) {}

  static WatchArming& of(detail::Session& session) {
    return boost::asio::use_service<WatchArming>(
        boost::asio::query(session.stream.get_executor(), boost::asio::execution::context));
  }

  void add(std::shared_ptr<detail::Session> session, std::shared_ptr<DisconnectWatchState> state) {
    waiting_.push_back({std::move(session), std::move(state)});
    if (ticking_) return;
    ticking_ = true;
    timer_.expires_after(kArmDelay);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) tick();
    });
  }

 private:
  struct Entry {
    std::shared_ptr<detail::Session> session;
    std::shared_ptr<DisconnectWatchState> state;
  };

  void shutdown() override {
    waiting_.clear();
    timer_.cancel();
  }

  void tick() {
    ticking_ = false;
    due_.swap(waiting_);  // both keep their capacity: no allocation per tick
    for (Entry& e : due_) {
      if (!e.state->active) continue;  // ended before its wait began
      e.state->waiting = true;
      arm(std::move(e.session), std::move(e.state));
    }
    due_.clear();
  }

  boost::asio::steady_timer timer_;
  bool ticking_ = false;
  std::vector<Entry> waiting_;
  std::vector<Entry> due_;
};

}  // namespace

DisconnectWatch::DisconnectWatch(std::shared_ptr<detail::Session> session,
                                 std::shared_ptr<DisconnectWatchState> state)
    : session_(std::move(session)), state_(std::move(state)) {}

DisconnectWatch::DisconnectWatch(DisconnectWatch&& o) noexcept
    : session_(std::move(o.session_)),
      sink_(std::exchange(o.sink_, nullptr)),
      state_(std::move(o.state_)) {}

DisconnectWatch& DisconnectWatch::operator=(DisconnectWatch&& o) noexcept {
  if (this != &o) {
    end();
    session_ = std::move(o.session_);
    sink_ = std::exchange(o.sink_, nullptr);
    state_ = std::move(o.state_);
  }
  return *this;
}

DisconnectWatch::~DisconnectWatch() { end(); }

bool DisconnectWatch::fired() const { return state_ && state_->fired; }

void DisconnectWatch::end() {
  if (!state_) return;
  if (state_->active) {
    state_->active = false;
    state_->on_close = nullptr;
    if (sink_ != nullptr) {
      sink_->unwatch();
      sink_ = nullptr;
      state_.reset();
      return;
    }
    // Only the wait (or on TLS the watch's read) is outstanding on this socket now (the handler
    // writes nothing while it is suspended elsewhere and the read loop waits for the handler), so
    // this cancels just that. A watch whose wait never began has nothing to cancel.
    if (state_->waiting) {
      boost::system::error_code ec;
      session_->stream.socket().cancel(ec);
    }
  }
  state_.reset();
  session_.reset();
}

DisconnectWatch Responder::watch_disconnect(std::function<void()> on_close) {
  auto state = std::make_shared<DisconnectWatchState>();
  state->on_close = std::move(on_close);
  if (sink_ != nullptr) {
    sink_->watch([state] {
      if (state->active) fire(*state);
    });
    DisconnectWatch watch(nullptr, state);
    watch.sink_ = sink_;
    return watch;
  }
  std::shared_ptr<detail::Session> session = session_->shared_from_this();
  WatchArming::of(*session).add(session, state);
  return DisconnectWatch(std::move(session), std::move(state));
}

}  // namespace kvgate::http
