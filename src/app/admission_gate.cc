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
    prefilling_ = o.prefilling_;
    o.gate_ = nullptr;
    o.prefilling_ = false;
  }
  return *this;
}

void AdmissionGate::Ticket::prefill_done() {
  if (gate_ != nullptr && prefilling_) gate_->leave(/*slot=*/false, /*prefilling=*/true);
  prefilling_ = false;
}

void AdmissionGate::Ticket::release() {
  if (gate_ != nullptr) gate_->leave(/*slot=*/true, prefilling_);
  gate_ = nullptr;
  prefilling_ = false;
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
    if (!ahead && fits(who.priority, running_) && prefill_room(who.priority, prefill_places())) {
      ++running_;
      if (bounds_prefills()) ++prefilling_;
      ticket->gate_ = this;
      ticket->prefilling_ = bounds_prefills();
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
        const double v = shares_[w->tenant].served;
        least = least < 0 ? v : std::min(least, v);
      }
    }
    Share& mine = shares_[waiter->tenant];
    if (least >= 0) mine.served = std::max(mine.served, least);
    ++mine.waiting;
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
  if (waiter->granted) {  // grant() counted it in running_ (and prefilling_)
    ticket->gate_ = this;
    ticket->prefilling_ = bounds_prefills();
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

namespace {

// Whether one more request of class `p` finds a place of `total`, `taken` taken and `reserved`
// kept for critical requests.
bool room_for(Priority p, size_t taken, size_t reserved, size_t total) {
  return taken + (p == Priority::kCritical ? 0 : reserved) < total;
}

}  // namespace

bool AdmissionGate::fits(Priority p, size_t running) const {
  if (options_.max_concurrent == 0) return true;  // only the prefill bound counts
  return room_for(p, running, options_.reserved_critical, options_.max_concurrent);
}

size_t AdmissionGate::queued() const {
  size_t n = 0;
  for (const Queue& q : queues_) n += q.size();
  return n;
}

size_t AdmissionGate::least_served(const Queue& q) const {
  size_t best = 0;
  Share best_share;
  for (size_t i = 0; i < q.size(); ++i) {
    const auto it = shares_.find(q[i]->tenant);
    const Share share = it == shares_.end() ? Share{} : it->second;
    if (i == 0 || share.served < best_share.served ||
        (share.served == best_share.served && share.waiting < best_share.waiting)) {
      best = i;
      best_share = share;
    }
  }
  return best;
}

std::shared_ptr<AdmissionGate::Waiter> AdmissionGate::take(Queue& q, size_t i) {
  std::shared_ptr<Waiter> w = std::move(q[i]);
  q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
  --shares_[w->tenant].waiting;
  return w;
}

std::shared_ptr<AdmissionGate::Waiter> AdmissionGate::pick(size_t running, size_t places) {
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
    // (Worse classes fit less.)
    const auto priority = static_cast<Priority>(c);
    if (!fits(priority, running) || !prefill_room(priority, places)) return nullptr;
    return take(q, least_served(q));
  }
  return nullptr;
}

bool AdmissionGate::shed_for(Priority p) {
  for (size_t c = queues_.size(); c-- > static_cast<size_t>(p) + 1;) {
    Queue& q = queues_[c];
    if (q.empty()) continue;
    std::shared_ptr<Waiter> victim = take(q, q.size() - 1);
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
  if (it != q.end()) take(q, static_cast<size_t>(it - q.begin()));
}

void AdmissionGate::wake(const std::shared_ptr<Waiter>& w) {
  // The timer is touched only on its own executor.
  net::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
}

size_t AdmissionGate::prefill_places() const {
  return bounds_prefills() ? std::max<size_t>(options_.prefill_capacity(), 1) : SIZE_MAX;
}

bool AdmissionGate::prefill_room(Priority p, size_t places) const {
  if (!bounds_prefills()) return true;
  // (Never every place: a reserve past the fleet's capacity would starve the other classes.)
  return room_for(p, prefilling_, std::min(options_.reserved_critical_prefills, places - 1),
                  places);
}

std::vector<std::shared_ptr<AdmissionGate::Waiter>> AdmissionGate::grant() {
  std::vector<std::shared_ptr<Waiter>> granted;
  // (The fleet is asked its capacity once: each asking walks it.)
  const size_t places = prefill_places();
  while (prefill_room(Priority::kCritical, places)) {
    std::shared_ptr<Waiter> next = pick(running_, places);
    if (next == nullptr) break;
    ++running_;
    if (bounds_prefills()) ++prefilling_;
    next->granted = true;
    granted.push_back(std::move(next));
  }
  return granted;
}

void AdmissionGate::leave(bool slot, bool prefilling) {
  std::vector<std::shared_ptr<Waiter>> granted;
  {
    MutexLock l(&mu_);
    if (slot) --running_;
    if (prefilling) --prefilling_;
    granted = grant();
  }
  for (const auto& w : granted) wake(w);
}

void AdmissionGate::charge(std::string_view tenant, double service) {
  if (!enabled()) return;
  MutexLock l(&mu_);
  shares_[std::string(tenant)].served += service;
}

AdmissionStats AdmissionGate::stats() const {
  MutexLock l(&mu_);
  AdmissionStats s{.running = running_,
                   .prefilling = prefilling_,
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
