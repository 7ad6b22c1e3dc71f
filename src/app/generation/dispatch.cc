// Dispatch: attempts on the workers the policy picks until one answers. A worker that fails
// before anything reached the client is excluded and the request goes to another, after a
// backoff (at once when a veto took the worker away); a timeout is not retried (the request may
// still run there). When no worker is left the client gets the last worker's error answer, or
// what went wrong.
#include <algorithm>
#include <random>

#include "app/cache_report.h"
#include "app/generation/stages.h"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"

namespace kvgate::app {
namespace net = boost::asio;
namespace {

constexpr std::string_view kShutdownMessage =
    "this gateway is shutting down and its grace period ended before the request did; retry it";

// The answer when the policy finds no worker (`d.worker` < 0): shed, the last worker's answer,
// the last failure, or no routable worker at all.
http::Response no_worker_answer(const GenerationParts& parts, Generation& g,
                                const policy::Decision& d) {
  if (d.branch == policy::Branch::kShed) {
    return error_answer(parts, ErrorReason::kShed, 503, "every worker is overloaded; retry later");
  }
  if (g.last_answer) return std::move(*g.last_answer);
  if (!g.tried.empty()) {
    const bool timeout = absl::IsDeadlineExceeded(g.last_failure);
    return error_answer(
        parts, timeout ? ErrorReason::kUpstreamTimeout : ErrorReason::kUpstreamConnect,
        timeout ? 504 : 502,
        "no worker could serve the request: " + std::string(message_of(g.last_failure)));
  }
  return error_answer(parts, ErrorReason::kNoWorker, 503,
                      "no routable worker for this request; retry later");
}

// The answer when the attempts ran out.
http::Response out_of_attempts(const GenerationParts& parts, Generation& g) {
  if (g.last_answer) return std::move(*g.last_answer);
  return error_answer(
      parts, ErrorReason::kUpstreamConnect, 502,
      "no worker could serve the request: " + std::string(message_of(g.last_failure)));
}

// Exponential backoff with jitter before attempt `attempt` (1 for the first retry).
net::awaitable<void> back_off(const GatewayConfig& config, uint32_t attempt) {
  const double base = static_cast<double>(config.retry_initial_backoff.count()) *
                      double(1u << std::min(attempt - 1, 16u));
  const double capped = std::min(base, static_cast<double>(config.retry_max_backoff.count()));
  // Seeded once per thread, used only here: a generator per request costs a microsecond.
  thread_local std::mt19937_64 jitter(std::random_device{}());
  const double ms = capped * std::uniform_real_distribution<double>(0.5, 1.0)(jitter);
  net::steady_timer timer(co_await net::this_coro::executor);
  timer.expires_after(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
  boost::system::error_code ec;
  co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
}

}  // namespace

net::awaitable<void> dispatch(const GenerationParts& parts, Generation& g) {
  for (uint32_t attempt_no = 0; attempt_no <= parts.config.max_retries;) {
    if (parts.shutting_down.load(std::memory_order_relaxed)) {
      http::Response err = error_answer(parts, ErrorReason::kDraining, 503, kShutdownMessage);
      co_await reply(g, std::move(err));
      co_return;
    }
    const policy::Decision d = decide(parts, g);
    if (d.worker < 0) {
      http::Response answer = no_worker_answer(parts, g, d);
      co_await reply(g, std::move(answer));
      co_return;
    }
    if (!g.prompt_counted) {  // once per request, whatever its retries
      g.prompt_counted = true;
      parts.metrics.prompt_routed(
          g.parsed.tokens.size(),
          predicted_cached_tokens(d.matched_blocks, g.parsed.tokens.size(), g.block_size));
    }
    const std::shared_ptr<workers::Worker> worker = g.fleet->workers[d.worker];
    if (!worker->breaker().try_begin_trial()) {
      g.tried.push_back(worker->id());  // its breaker's one trial is taken: choose again
      continue;
    }
    const Attempt a = co_await attempt(parts, g, *worker, d);
    if (a.done) co_return;
    if (a.vetoed && parts.shutting_down.load(std::memory_order_relaxed)) {
      http::Response err = error_answer(parts, ErrorReason::kDraining, 503, kShutdownMessage);
      co_await reply(g, std::move(err));
      co_return;
    }
    if (!a.retry) {
      // A timeout: the request may still be running there; do not send it twice.
      http::Response err = error_answer(parts, ErrorReason::kUpstreamTimeout, 504,
                                        "worker " + worker->url() + " did not answer in time: " +
                                            std::string(message_of(a.failure)));
      co_await reply(g, std::move(err));
      co_return;
    }
    if (!a.vetoed) worker->count_retryable_failure();
    g.tried.push_back(worker->id());
    if (a.answer) g.last_answer = std::move(a.answer);
    if (!a.failure.ok()) g.last_failure = a.failure;
    if (++attempt_no > parts.config.max_retries) {
      http::Response answer = out_of_attempts(parts, g);
      co_await reply(g, std::move(answer));
      co_return;
    }
    parts.metrics.retry();
    if (!a.vetoed) co_await back_off(parts.config, attempt_no);  // a veto: the next one at once
  }
}

}  // namespace kvgate::app
