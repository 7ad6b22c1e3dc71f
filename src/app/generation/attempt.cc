// Attempt: the request on one worker, over a pooled connection (sent again at once on a fresh one
// when the engine had closed the pooled one under it), watched for a veto of the worker and for
// the client leaving; its answer goes to the relay.
#include "app/cache_report.h"
#include "app/generation/leg.h"
#include "app/worker_exchange.h"
#include "boost/asio/this_coro.hpp"

namespace kvgate::app {
namespace net = boost::asio;
using workers::Outcome;

std::string veto_message(const workers::Worker& w, workers::VetoKind kind) {
  switch (kind) {
    case workers::VetoKind::kWedged:
      return "worker " + w.url() + " stopped producing tokens (wedged); the stream was ended";
    case workers::VetoKind::kUnreachable:
      return "worker " + w.url() + " became unreachable";
    case workers::VetoKind::kUnhealthy:
      return "worker " + w.url() + " failed its health checks";
    case workers::VetoKind::kShutdown:
      return "the gateway is shutting down and its grace period ended; the request was cut short";
  }
  return "worker " + w.url() + " was taken out of routing";
}

void vetoed(const GenerationParts& parts, Dispatch& dispatch, VetoWatch& veto,
            workers::Worker& worker, Attempt& a) {
  dispatch.set(Outcome::kCancelled);  // the liveness tracker already judged the worker
  parts.metrics.vetoed_attempt();
  a.vetoed = a.retry = true;
  a.failure = absl::UnavailableError(veto_message(worker, *veto.fired()));
}

void client_abort(const GenerationParts& parts, Generation& g, Leg& leg) {
  leg.dispatch.set(Outcome::kCancelled);
  parts.metrics.error(ErrorReason::kClientAbort);
  g.status = 499;
  leg.a.done = true;
}

net::awaitable<Attempt> attempt(const GenerationParts& parts, Generation& g,
                                workers::Worker& worker, const policy::Decision& d) {
  g.worker_url = worker.url();
  ++g.record.attempts;
  Attempt a;
  g.upstream.headers[0].second = authorization_for(g.req, worker, parts.config);
  const std::optional<DpRank> rank =
      d.rank >= 0 ? std::optional<DpRank>(static_cast<DpRank>(d.rank)) : std::nullopt;
  g.upstream.headers[1].second = rank ? std::to_string(*rank) : std::string();
  const uint64_t tokens = g.parsed.tokens.size();
  const uint64_t predicted = predicted_cached_tokens(d.matched_blocks, tokens, g.block_size);
  const uint64_t confirmed =
      predicted_cached_tokens(d.matched_blocks - d.pending_blocks, tokens, g.block_size);
  policy::Policy& policy = parts.decode_policy != nullptr ? *parts.decode_policy : parts.policy;
  // A pair's decode computes none of the prompt (its prefill worker does): nothing queues there
  // for it. (Its first token still waits for the prefill: the liveness rule's allowance stays.)
  const bool paired = !g.prefill_url.empty();
  Dispatch dispatch(worker, policy, g.route_request, g.parsed.stream, rank,
                    paired ? 0 : tokens - predicted, tokens - confirmed);
  const net::any_io_executor executor = co_await net::this_coro::executor;
  VetoWatch veto(worker, executor);
  // A breaker's trial goes out on a fresh connection: a pooled one the worker closed while idle
  // would fail the trial for the pool's sake, not the worker's.
  UpstreamPool::Source source = worker.breaker().state() == workers::BreakerState::kClosed
                                    ? UpstreamPool::Source::kPooled
                                    : UpstreamPool::Source::kFresh;
  for (;;) {
    g.live_upstream = nullptr;  // (a stale connection's, dropped at the end of its pass)
    auto lease = co_await parts.upstream.acquire(worker, source);
    if (veto.fired()) {
      vetoed(parts, dispatch, veto, worker, a);
      break;
    }
    if (!lease.ok()) {
      worker.liveness().note_connect_failed();
      a.failure = lease.status();
      a.retry = true;
      dispatch.set(Outcome::kConnectFailed);
      break;
    }
    http::Connection& conn = *lease->conn;
    veto.watch(&conn);
    g.live_upstream = &conn;
    // A client that goes away while the worker works closes the upstream connection, so the
    // engine aborts the request instead of computing an answer nobody reads (a released
    // connection is no longer the lease's and is left alone).
    const http::DisconnectWatch watch = g.res.watch_disconnect([&lease] {
      if (lease->conn) lease->conn->close();
    });
    Leg leg{worker, rank, confirmed, dispatch, veto, *lease, watch, a};
    // A whole answer (non-streamed), or the head of a stream. (Either branch sets it; a status
    // without a message allocates nothing.)
    Result<http::ClientResponse> head = absl::UnknownError("");
    if (g.parsed.stream) {
      head = co_await conn.start_streaming(g.upstream, parts.config.first_byte_timeout);
    } else {
      head = co_await conn.send(g.upstream);
    }
    if (watch.fired()) {
      client_abort(parts, g, leg);
      break;
    }
    if (veto.fired()) {
      vetoed(parts, dispatch, veto, worker, a);
      break;
    }
    if (!head.ok()) {
      // The worker closed a pooled connection just as the request went out (its keep-alive timer
      // won the race with the pool's): nothing ran, so send it again at once on a fresh
      // connection to the same worker. This is the pool's miss, not the worker's failure, and the
      // breaker never hears of it. A fresh connection fails for real.
      if (lease->reused && conn.closed_by_peer()) {
        parts.metrics.stale_connection_retry();
        source = UpstreamPool::Source::kFresh;
        continue;
      }
      a.failure = head.status();
      a.retry = !absl::IsDeadlineExceeded(head.status());
      dispatch.set(outcome_of_failure(head.status()));
      break;
    }
    worker.liveness().note_contact();
    co_await relay(parts, g, leg, *head);
    break;
  }
  g.live_upstream = nullptr;
  co_return a;
}

}  // namespace kvgate::app
