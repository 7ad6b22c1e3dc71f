#include "app/admission_gate.h"

#include <algorithm>

#include "boost/asio/post.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"

namespace kvgate::app {
namespace net = boost::asio;

AdmissionGate::AdmissionGate(AdmissionOptions options) : options_(options) {}

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

net::awaitable<Status> AdmissionGate::enter(Ticket* ticket, http::Responder& res, Applicant who) {
  if (!enabled()) co_return absl::OkStatus();
  const net::any_io_executor executor = co_await net::this_coro::executor;
  std::shared_ptr<Waiter> waiter;
  {
    MutexLock l(&mu_);
    // A free slot its class may take, and nobody of its class or better waiting for one.
    const bool ahead =
        std::any_of(queues_.begin(), queues_.begin() + static_cast<int>(who.priority) + 1,
                    [](const Queue& q) { return !q.empty(); });
    if (!ahead && fits(who.priority, running_)) {
      ++running_;
      ticket->gate_ = this;
      co_return absl::OkStatus();
    }
    if (queued() >= options_.queue_size && !shed_for(who.priority)) {
      ++refused_queue_full_;
      co_return absl::ResourceExhaustedError("the gateway's request queue is full");
    }
    const auto now = std::chrono::steady_clock::now();
    waiter = std::make_shared<Waiter>(executor, who, now);
    waiter->timer.expires_after(options_.queue_timeout);
    // A tenant that starts waiting begins at the least counter of those waiting.
    double least = -1;
    for (const Queue& q : queues_) {
      for (const auto& w : q) {
        const double v = served_[w->tenant];
        least = least < 0 ? v : std::min(least, v);
      }
    }
    double& mine = served_[waiter->tenant];
    if (least >= 0) mine = std::max(mine, least);
    queues_[static_cast<size_t>(who.priority)].push_back(waiter);
    ++waited_;
  }
  // Woken by the timer (queue_timeout), by leave() handing this waiter a slot, by a better
  // class shedding it, or by the client closing its connection; which one it was is decided
  // under the lock.
  const http::DisconnectWatch watch = res.watch_disconnect([waiter] { waiter->timer.cancel(); });
  boost::system::error_code ec;
  co_await waiter->timer.async_wait(net::redirect_error(net::use_awaitable, ec));
  MutexLock l(&mu_);
  if (waiter->granted) {  // leave() passed its slot on: running_ already counts this request
    ticket->gate_ = this;
    co_return absl::OkStatus();
  }
  if (waiter->shed) {  // already off its queue
    co_return absl::ResourceExhaustedError(
        "the gateway's request queue is full and a request of a higher priority took this one's "
        "place");
  }
  remove(waiter);
  if (watch.fired()) {
    ++abandoned_;
    co_return absl::CancelledError("the client closed the connection while queued");
  }
  ++refused_timeout_;
  co_return absl::DeadlineExceededError("waited the gateway's queue timeout for a free slot");
}

bool AdmissionGate::fits(Priority p, size_t running) const {
  const size_t reserved = p == Priority::kCritical ? 0 : options_.reserved_critical;
  return running + reserved < options_.max_concurrent;
}

size_t AdmissionGate::queued() const {
  size_t n = 0;
  for (const Queue& q : queues_) n += q.size();
  return n;
}

size_t AdmissionGate::least_served(const Queue& q) const {
  size_t best = 0;
  double best_served = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    const auto it = served_.find(q[i]->tenant);
    const double v = it == served_.end() ? 0 : it->second;
    if (i == 0 || v < best_served) {
      best = i;
      best_served = v;
    }
  }
  return best;
}

std::shared_ptr<AdmissionGate::Waiter> AdmissionGate::pick(size_t running) {
  const auto take = [&](Queue& q, size_t i) {
    std::shared_ptr<Waiter> w = std::move(q[i]);
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
    return w;
  };
  // Past the starvation bound: the oldest such waiter of a lower class, as if critical.
  if (options_.starvation.count() > 0 && fits(Priority::kCritical, running)) {
    const auto now = std::chrono::steady_clock::now();
    Queue* oldest = nullptr;
    for (size_t c = 1; c < queues_.size(); ++c) {
      Queue& q = queues_[c];
      if (q.empty() || now - q.front()->since < options_.starvation) continue;
      if (oldest == nullptr || q.front()->since < oldest->front()->since) oldest = &q;
    }
    if (oldest != nullptr) {
      ++promoted_;
      return take(*oldest, 0);
    }
  }
  for (size_t c = 0; c < queues_.size(); ++c) {
    Queue& q = queues_[c];
    if (q.empty()) continue;
    if (!fits(static_cast<Priority>(c), running)) return nullptr;  // worse classes fit less
    return take(q, least_served(q));
  }
  return nullptr;
}

bool AdmissionGate::shed_for(Priority p) {
  for (size_t c = queues_.size(); c-- > static_cast<size_t>(p) + 1;) {
    Queue& q = queues_[c];
    if (q.empty()) continue;
    std::shared_ptr<Waiter> victim = std::move(q.back());
    q.pop_back();
    victim->shed = true;
    ++shed_;
    wake(victim);
    return true;
  }
  return false;
}

void AdmissionGate::remove(const std::shared_ptr<Waiter>& w) {
  Queue& q = queues_[static_cast<size_t>(w->priority)];
  const auto it = std::find(q.begin(), q.end(), w);
  if (it != q.end()) q.erase(it);
}

void AdmissionGate::wake(const std::shared_ptr<Waiter>& w) {
  // The timer is touched only on its own executor.
  net::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
}

void AdmissionGate::leave() {
  std::shared_ptr<Waiter> next;
  {
    MutexLock l(&mu_);
    // The slot passes to the next waiter, which stays counted in running_.
    next = pick(running_ - 1);
    if (next == nullptr) {
      --running_;
      return;
    }
    next->granted = true;
  }
  wake(next);
}

void AdmissionGate::charge(std::string_view tenant, double service) {
  if (!enabled()) return;
  MutexLock l(&mu_);
  served_[std::string(tenant)] += service;
}

AdmissionStats AdmissionGate::stats() const {
  MutexLock l(&mu_);
  AdmissionStats s{.running = running_,
                   .queued = queued(),
                   .refused_queue_full = refused_queue_full_,
                   .refused_timeout = refused_timeout_,
                   .abandoned = abandoned_,
                   .shed = shed_,
                   .promoted = promoted_,
                   .waited = waited_};
  for (size_t c = 0; c < queues_.size(); ++c) s.queued_by_class[c] = queues_[c].size();
  return s;
}

}  // namespace kvgate::app
