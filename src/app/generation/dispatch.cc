// Dispatch: attempts on the workers the policy picks until one answers. A worker that fails
// before anything reached the client is excluded and the request goes to another, after a
// backoff (at once when a veto took the worker away); a timeout is not retried (the request may
// still run there). When no worker is left the client gets the last worker's error answer, or
// what went wrong.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

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
  if (d.branch == policy::Branch::kAllOverloaded) {  // a sheddable request, refused first
    http::Response r = error_answer(
        parts, ErrorReason::kShed, 429,
        "every worker is overloaded and this request's class is sheddable; retry later");
    r.headers.emplace_back("retry-after", "1");
    return r;
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

// Where the next attempt goes: a worker, or in a disaggregated fleet (parts.decode_policy) a
// prefill worker and a decode worker. `none`: the decision that found no worker (no_worker_answer).
struct Choice {
  policy::Decision d;  // the worker's (the decode's in a pair)
  std::shared_ptr<workers::Worker> worker;
  policy::Decision prefill_d;
  std::shared_ptr<workers::Worker> prefill;  // null: not a pair
  std::optional<policy::Decision> none;
  // The decision the cache decided: the prefill's in a pair (its prompt is computed there).
  const policy::Decision& cache_decision() const { return prefill ? prefill_d : d; }
};

// Why the decode worker serves a request alone, for x-kvgate-decision and /debug/route.
std::string explain_local_prefill(const LocalPrefill& local, uint64_t prompt_tokens) {
  if (local.reason == LocalPrefill::Reason::kHeld) {
    return "the decode worker holds " + std::to_string(local.held_tokens) + " of " +
           std::to_string(prompt_tokens) + " prompt tokens";
  }
  char text[160];
  std::snprintf(text, sizeof text,
                "sooner on the decode worker (expected wait %.0f ms, holding %llu of %llu prompt "
                "tokens) than as a pair (%.0f ms)",
                local.local_wait_ms, static_cast<unsigned long long>(local.held_tokens),
                static_cast<unsigned long long>(prompt_tokens), local.pair_wait_ms);
  return text;
}

Choice choose(const GenerationParts& parts, Generation& g) {
  Choice c;
  if (parts.decode_policy != nullptr) {
    // The prefill side first: the access log keeps its decision.
    c.prefill_d = decide(parts, g, parts.policy, workers::WorkerRole::kPrefill);
    if (c.prefill_d.worker < 0) {
      c.none = c.prefill_d;
      return c;
    }
    c.prefill = g.fleet->workers[c.prefill_d.worker];
    c.d = decide(parts, g, *parts.decode_policy, workers::WorkerRole::kDecode, /*record=*/false);
    if (g.explain && c.d.worker >= 0) {
      g.decision += "; decode: " + g.fleet->workers[c.d.worker]->url();
      g.record.decision = g.decision;
    }
    if (const std::optional<LocalPrefill> local = local_prefill(parts, g, c.prefill_d, c.d)) {
      // The decode worker prefills the prompt itself, nothing is moved.
      parts.metrics.pd_local_prefill(local->reason == LocalPrefill::Reason::kSooner);
      c.prefill.reset();
      if (g.explain) {
        g.decision += "; local prefill: " + explain_local_prefill(*local, g.parsed.tokens.size());
        g.record.decision = g.decision;
      }
    }
  } else {
    c.d = decide(parts, g);
  }
  if (c.d.worker < 0) {
    c.none = c.d;
    return c;
  }
  // With every worker overloaded, sheddable requests are the ones refused.
  const policy::Decision& gate = c.prefill ? c.prefill_d : c.d;
  if (g.priority == Priority::kSheddable && gate.branch == policy::Branch::kAllOverloaded) {
    c.none = gate;
    c.none->worker = -1;
    return c;
  }
  c.worker = g.fleet->workers[c.d.worker];
  return c;
}

// Takes each chosen worker's breaker trial (a closed breaker always gives one); false, with the
// worker whose trial was taken counted as tried, when one is not to be had.
bool take_trials(Generation& g, const Choice& c) {
  for (const auto* w : {&c.prefill, &c.worker}) {
    if (*w && !(*w)->breaker().try_begin_trial()) {
      g.tried.push_back((*w)->id());  // its breaker's one trial is taken: choose again
      return false;
    }
  }
  return true;
}

}  // namespace

net::awaitable<void> dispatch(const GenerationParts& parts, Generation& g) {
  for (uint32_t attempt_no = 0; attempt_no <= parts.config.max_retries;) {
    if (parts.shutting_down.load(std::memory_order_relaxed)) {
      http::Response err = error_answer(parts, ErrorReason::kDraining, 503, kShutdownMessage);
      co_await reply(g, std::move(err));
      co_return;
    }
    const Choice c = choose(parts, g);
    if (c.none) {
      http::Response answer = no_worker_answer(parts, g, *c.none);
      co_await reply(g, std::move(answer));
      co_return;
    }
    if (!g.prompt_counted) {  // once per request, whatever its retries
      g.prompt_counted = true;
      parts.metrics.prompt_routed(g.parsed.tokens.size(),
                                  predicted_cached_tokens(c.cache_decision().matched_blocks,
                                                          g.parsed.tokens.size(), g.block_size));
    }
    if (!take_trials(g, c)) continue;
    PairFault fault = PairFault::kDecode;
    Attempt a;
    g.prefill_url = c.prefill ? c.prefill->url() : std::string();
    if (c.prefill) {
      a = co_await pd_attempt(parts, g, c.prefill, c.prefill_d, *c.worker, c.d, &fault);
    } else {
      a = co_await attempt(parts, g, *c.worker, c.d);
    }
    // A failed pair is the prefill's doing when the prefill failed (it cut the decode).
    workers::Worker* const worker = fault == PairFault::kPrefill ? c.prefill.get() : c.worker.get();
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
    // (A pair whose decode gave up while its prefill still ran: either may be at fault, say a
    // prefill too slow for the decode's transfer timeout. Neither is held to blame; the retry
    // takes another of each.)
    if (!a.vetoed && fault != PairFault::kEither) worker->count_retryable_failure();
    g.tried.push_back(worker->id());
    if (fault == PairFault::kEither) g.tried.push_back(c.prefill->id());
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
