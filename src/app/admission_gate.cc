#include "app/admission_gate.h"

#include "boost/asio/post.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"

namespace kvgate::app {
namespace net = boost::asio;

AdmissionGate::AdmissionGate(size_t max_concurrent, size_t queue_size,
                             std::chrono::milliseconds queue_timeout)
    : max_concurrent_(max_concurrent), queue_size_(queue_size), queue_timeout_(queue_timeout) {}

AdmissionGate::Ticket& AdmissionGate::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    gate_ = o.gate_;
    o.gate_ = nullptr;
  }
  return *this;
}

void AdmissionGate::Ticket::release() {
  if (gate_ != nullptr) gate_->leave();
  gate_ = nullptr;
}

net::awaitable<Status> AdmissionGate::enter(Ticket* ticket, http::Responder& res) {
  if (!enabled()) co_return absl::OkStatus();
  const net::any_io_executor executor = co_await net::this_coro::executor;
  std::shared_ptr<Waiter> waiter;
  {
    MutexLock l(&mu_);
    if (running_ < max_concurrent_) {
      ++running_;
      ticket->gate_ = this;
      co_return absl::OkStatus();
    }
    if (queue_.size() >= queue_size_) {
      ++refused_queue_full_;
      co_return absl::ResourceExhaustedError("the gateway's request queue is full");
    }
    waiter = std::make_shared<Waiter>(executor);
    waiter->timer.expires_after(queue_timeout_);
    queue_.push_back(waiter);
  }
  // Woken by the timer (queue_timeout), by leave() handing this waiter a slot, or by the client
  // closing its connection; which one it was is decided under the lock.
  const http::DisconnectWatch watch = res.watch_disconnect([waiter] { waiter->timer.cancel(); });
  boost::system::error_code ec;
  co_await waiter->timer.async_wait(net::redirect_error(net::use_awaitable, ec));
  MutexLock l(&mu_);
  if (waiter->granted) {  // leave() passed its slot on: running_ already counts this request
    ticket->gate_ = this;
    co_return absl::OkStatus();
  }
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (*it == waiter) {
      queue_.erase(it);
      break;
    }
  }
  if (watch.fired()) {
    ++abandoned_;
    co_return absl::CancelledError("the client closed the connection while queued");
  }
  ++refused_timeout_;
  co_return absl::DeadlineExceededError("waited the gateway's queue timeout for a free slot");
}

void AdmissionGate::leave() {
  std::shared_ptr<Waiter> next;
  {
    MutexLock l(&mu_);
    if (queue_.empty()) {
      --running_;
      return;
    }
    // The slot passes to the longest waiter, which stays counted in running_.
    next = std::move(queue_.front());
    queue_.pop_front();
    next->granted = true;
  }
  // The timer is touched only on its own executor.
  net::post(next->timer.get_executor(), [next] { next->timer.cancel(); });
}

AdmissionStats AdmissionGate::stats() const {
  MutexLock l(&mu_);
  return {.running = running_,
          .queued = queue_.size(),
          .refused_queue_full = refused_queue_full_,
          .refused_timeout = refused_timeout_,
          .abandoned = abandoned_};
}

}  // namespace kvgate::app
