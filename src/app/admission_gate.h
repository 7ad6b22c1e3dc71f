// AdmissionGate: at most `max_concurrent` generation requests run at once; the next `queue_size`
// wait, first come first served, up to `queue_timeout`; the rest are refused at once.
//
// The SGLang model gateway's --max-concurrent-requests / --queue-size / --queue-timeout-secs. The
// per-worker overload gate already sheds what no worker can take; this bounds what one gateway
// lets in at all (its memory, its upstream connections), whatever the fleet's size.
//
//   AdmissionGate::Ticket t;
//   Status s = co_await gate.enter(&t, res);  // OK: admitted until `t` goes
//   // ResourceExhausted: the queue is full; DeadlineExceeded: waited queue_timeout;
//   // Cancelled: the client left while waiting
//
// Threading: enter() from any executor (a waiter is woken on its own); a Ticket may be released
// on any thread. max_concurrent == 0 admits everything without counting.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>

#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/awaitable.hpp"
#include "boost/asio/steady_timer.hpp"
#include "kvgate/core/result.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/server.h"

namespace kvgate::app {

struct AdmissionStats {
  uint64_t running = 0;
  uint64_t queued = 0;
  uint64_t refused_queue_full = 0;
  uint64_t refused_timeout = 0;
  uint64_t abandoned = 0;  // clients that left while queued
};

class AdmissionGate {
 public:
  AdmissionGate(size_t max_concurrent, size_t queue_size, std::chrono::milliseconds queue_timeout);
  AdmissionGate(const AdmissionGate&) = delete;
  AdmissionGate& operator=(const AdmissionGate&) = delete;

  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : gate_(o.gate_) { o.gate_ = nullptr; }
    Ticket& operator=(Ticket&& o) noexcept;
    ~Ticket() { release(); }
    void release();

   private:
    friend class AdmissionGate;
    AdmissionGate* gate_ = nullptr;
  };

  bool enabled() const { return max_concurrent_ > 0; }
  // Admits the caller (filling `ticket`) or says why not; waits in the queue when every slot is
  // taken. `res` is watched so a client that leaves stops waiting.
  boost::asio::awaitable<Status> enter(Ticket* ticket, http::Responder& res);
  AdmissionStats stats() const;

 private:
  struct Waiter {
    explicit Waiter(const boost::asio::any_io_executor& ex) : timer(ex) {}
    boost::asio::steady_timer timer;  // used on its executor only
    bool granted = false;             // under mu_
  };
  void leave();

  const size_t max_concurrent_;
  const size_t queue_size_;
  const std::chrono::milliseconds queue_timeout_;
  mutable Mutex mu_;
  size_t running_ KVGATE_GUARDED_BY(mu_) = 0;
  std::deque<std::shared_ptr<Waiter>> queue_ KVGATE_GUARDED_BY(mu_);
  uint64_t refused_queue_full_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t refused_timeout_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t abandoned_ KVGATE_GUARDED_BY(mu_) = 0;
};

}  // namespace kvgate::app
