// Admit: whether this gateway takes the request now. Not while it drains (a load balancer sends
// it to another replica), not when the request has passed this gateway before (a loop), and with
// --max-concurrent-requests only in its turn (by its class, then its tenant's fair share).
#include "app/generation/stages.h"
#include "app/worker_exchange.h"

namespace kvgate::app {
namespace net = boost::asio;

net::awaitable<bool> admit(const GenerationParts& parts, Generation& g,
                           AdmissionGate::Ticket* ticket) {
  if (parts.draining.load(std::memory_order_relaxed)) {
    http::Response err = error_answer(
        parts, ErrorReason::kDraining, 503,
        "this gateway is shutting down and takes no new requests; send it to another replica");
    co_await reply(g, std::move(err));
    co_return false;
  }
  if (is_loop(g.req.header(kHopsHeader), parts.instance_id)) {
    http::Response err =
        error_answer(parts, ErrorReason::kLoop, 508,
                     "request loop: this gateway already forwarded this request (a worker URL "
                     "leads back to a gateway)");
    co_await reply(g, std::move(err));
    co_return false;
  }
  identify(parts, g);
  if (!parts.admission.enabled()) co_return true;
  // Named first: g++ 12 may destroy a temporary inside a co_await twice.
  const Applicant who{.priority = g.priority, .tenant = g.record.tenant};
  const Status entered = co_await parts.admission.enter(ticket, g.res, who);
  if (entered.ok()) {
    const double waited = to_seconds(parts.clock.now() - g.start);
    parts.metrics.admission_wait(g.priority, waited);
    g.record.queued_ms = waited * 1e3;
    co_return true;
  }
  if (absl::IsCancelled(entered)) {  // the client left while queued
    parts.metrics.error(ErrorReason::kClientAbort);
    g.status = 499;
    co_return false;
  }
  http::Response err = error_answer(
      parts,
      absl::IsResourceExhausted(entered) ? ErrorReason::kQueueFull : ErrorReason::kQueueTimeout,
      429, std::string(message_of(entered)) + "; retry later");
  err.headers.emplace_back("retry-after", "1");
  co_await reply(g, std::move(err));
  co_return false;
}

}  // namespace kvgate::app
