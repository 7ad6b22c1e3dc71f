// AdmissionGate: at most `max_concurrent` generation requests run at once; the next `queue_size`
// wait, up to `queue_timeout`; the rest are refused at once.
//
// The SGLang model gateway's --max-concurrent-requests / --queue-size / --queue-timeout-secs. The
// per-worker overload gate already sheds what no worker can take; this bounds what one gateway
// lets in at all (its memory, its upstream connections), whatever the fleet's size.
//
// With `prefill_capacity`, a request also takes a place among those waiting for their first token,
// which it gives back at that token (Ticket::prefill_done) or its end: past the capacity the next
// request waits here rather than in an engine's queue, where it would be computed beside another
// prompt and its class and fair share would no longer count.
//
// Who goes next when a slot frees: a waiter past the starvation bound (oldest first), else the
// best class with a waiter (critical, standard, sheddable; app/tenants.h), and within it the
// tenant that has received the least service so far (a virtual token counter: charge() adds each
// request's prompt tokens as it is let through and its weighted output tokens when it ends; a
// tenant that starts waiting begins at the least counter of those waiting, so idle time is not
// banked, and of equal counters the tenant with fewer waiting goes first), first come first
// served within a tenant. `reserved_critical` slots (and `reserved_critical_prefills` places among
// the prefilling) admit only critical requests. With the queue full, a request of a better class
// takes the place of the newest waiter of the worst class (which gets ResourceExhausted: shed);
// one of the worst class is refused.
//
//   AdmissionGate::Ticket t;
//   Status s = co_await gate.enter(&t, res, {.priority = p, .tenant = "team-a"});
//   // OK: admitted until `t` goes. ResourceExhausted: the queue is full (or it was shed);
//   // DeadlineExceeded: waited queue_timeout; Cancelled: the client left while waiting
//
// Threading: enter() from any executor (a waiter is woken on its own); a Ticket may be released
// on any thread; charge() and stats() from any thread; prefill_capacity is called under the
// gate's lock. max_concurrent == 0 without prefill_capacity admits everything without counting.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "app/tenants.h"

#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/awaitable.hpp"
#include "boost/asio/steady_timer.hpp"
#include "kvgate/core/result.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/server.h"

namespace kvgate::app {

struct AdmissionStats {
  uint64_t running = 0;
  uint64_t prefilling = 0;  // of running, waiting for their first token (with prefill_capacity)
  uint64_t queued = 0;
  std::array<uint64_t, 3> queued_by_class{};  // by Priority
  uint64_t refused_queue_full = 0;
  uint64_t refused_timeout = 0;
  uint64_t abandoned = 0;  // clients that left while queued
  uint64_t shed = 0;       // waiters whose place a request of a better class took
  uint64_t promoted = 0;   // waiters admitted ahead of their class for waiting too long
  uint64_t waited = 0;     // requests that found no free slot and joined the queue
};

struct AdmissionOptions {
  size_t max_concurrent = 0;
  size_t queue_size = 100;
  std::chrono::milliseconds queue_timeout{60'000};
  size_t reserved_critical = 0;  // slots only critical requests take
  // A waiter waiting longer than this goes before every class (0: never).
  std::chrono::milliseconds starvation{0};
  // How many admitted requests may be waiting for their first token at once (empty: no bound),
  // asked whenever a request would be admitted: --worker-max-prefilling times the workers that
  // take prompts. Past it the next request waits here, in its class and fair-share order, instead
  // of in an engine's queue, where it would be computed beside the others.
  std::function<size_t()> prefill_capacity;
  // Of those places, how many only critical requests take (never all of them): a critical prompt
  // that arrives while other classes' prompts fill the fleet starts at once, not after one of them.
  size_t reserved_critical_prefills = 0;
};

// Who asks for a slot.
struct Applicant {
  Priority priority = Priority::kStandard;
  std::string_view tenant;  // "" for requests without a tenant (one pool)
};

class AdmissionGate {
 public:
  explicit AdmissionGate(AdmissionOptions options);
  AdmissionGate(const AdmissionGate&) = delete;
  AdmissionGate& operator=(const AdmissionGate&) = delete;

  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : gate_(o.gate_), prefilling_(o.prefilling_) {
      o.gate_ = nullptr;
      o.prefilling_ = false;
    }
    Ticket& operator=(Ticket&& o) noexcept;
    ~Ticket() { release(); }
    // The request's first token came: its place among the prefilling requests passes on.
    void prefill_done();
    void release();

   private:
    friend class AdmissionGate;
    AdmissionGate* gate_ = nullptr;
    bool prefilling_ = false;
  };

  bool enabled() const { return options_.max_concurrent > 0 || bounds_prefills(); }
  bool bounds_prefills() const { return static_cast<bool>(options_.prefill_capacity); }
  // Admits the caller (filling `ticket`) or says why not; waits in the queue when no slot its
  // class may take is free. `res` is watched so a client that leaves stops waiting.
  boost::asio::awaitable<Status> enter(Ticket* ticket, http::Responder& res, Applicant who = {});
  // Adds a finished request's service to its tenant's counter (fair share).
  void charge(std::string_view tenant, double service);
  AdmissionStats stats() const;

 private:
  struct Waiter {
    Waiter(const boost::asio::any_io_executor& ex, Applicant who,
           std::chrono::steady_clock::time_point at)
        : timer(ex), priority(who.priority), tenant(who.tenant), since(at) {}
    boost::asio::steady_timer timer;  // used on its executor only
    const Priority priority;
    const std::string tenant;
    const std::chrono::steady_clock::time_point since;
    bool granted = false;  // under mu_
    bool shed = false;     // under mu_: a better class took its place
  };
  using Queue = std::vector<std::shared_ptr<Waiter>>;  // arrival order
  // Whether a request of `p` may take a slot with `running` others running.
  bool fits(Priority p, size_t running) const;
  // The waiter to admit with `running` others running and `places` among the prefilling, taken
  // off its queue; null for none.
  std::shared_ptr<Waiter> pick(size_t running, size_t places) KVGATE_REQUIRES(mu_);
  // The position in `q` of the waiter whose tenant has received the least service (of equals,
  // the one with the fewest requests waiting: a tenant just lifted to the others' counter goes
  // before the backlog it was lifted to).
  size_t least_served(const Queue& q) const KVGATE_REQUIRES(mu_);
  // Makes room for `p` in a full queue by shedding the newest waiter of a worse class.
  bool shed_for(Priority p) KVGATE_REQUIRES(mu_);
  void remove(const std::shared_ptr<Waiter>& w) KVGATE_REQUIRES(mu_);
  // Takes the waiter at `i` off `q`.
  std::shared_ptr<Waiter> take(Queue& q, size_t i) KVGATE_REQUIRES(mu_);
  size_t queued() const KVGATE_REQUIRES(mu_);
  // The places among the prefilling (prefill_capacity, asked now; SIZE_MAX without a bound), and
  // whether one more request of class `p` may take one of `places`.
  size_t prefill_places() const KVGATE_REQUIRES(mu_);
  bool prefill_room(Priority p, size_t places) const KVGATE_REQUIRES(mu_);
  // Hands free slots to waiters, in turn; returns them to wake.
  std::vector<std::shared_ptr<Waiter>> grant() KVGATE_REQUIRES(mu_);
  static void wake(const std::shared_ptr<Waiter>& w);
  // A ticket gives back its slot (`slot`) and its place among the prefilling (`prefilling`).
  void leave(bool slot, bool prefilling);

  const AdmissionOptions options_;
  mutable Mutex mu_;
  size_t running_ KVGATE_GUARDED_BY(mu_) = 0;
  size_t prefilling_ KVGATE_GUARDED_BY(mu_) = 0;        // counted only with prefill_capacity
  std::array<Queue, 3> queues_ KVGATE_GUARDED_BY(mu_);  // by Priority
  struct Share {
    double served = 0;   // the virtual token counter
    size_t waiting = 0;  // its requests in the queue
  };
  absl::flat_hash_map<std::string, Share> shares_ KVGATE_GUARDED_BY(mu_);  // by tenant
  uint64_t refused_queue_full_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t refused_timeout_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t abandoned_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t shed_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t promoted_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t waited_ KVGATE_GUARDED_BY(mu_) = 0;
};

}  // namespace kvgate::app
