// Identify and limit: who the caller is by its key (--api-keys-file, app/tenants.h), its priority
// class, the models it may use, and its rate limits, after the body is parsed (the model and the
// prompt's tokens are known). A refusal is OpenAI's: 404 for a model the key may not use, 429 with
// Retry-After and the x-ratelimit-* headers when a bucket ran out.
#include <cmath>

#include "app/generation/stages.h"

namespace kvgate::app {
namespace net = boost::asio;

namespace {

// "1s", "6m0s", "250ms": how OpenAI writes its x-ratelimit-reset-* durations.
std::string reset_text(std::chrono::milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + "ms";
  const int64_t s = (d.count() + 999) / 1000;
  if (s < 60) return std::to_string(s) + "s";
  return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
}

void limit_headers(http::Response& r, std::string_view kind, const TokenBucket& bucket,
                   const TokenBucket::Take& t) {
  const std::string k(kind);
  r.headers.emplace_back("x-ratelimit-limit-" + k, std::to_string(bucket.per_minute()));
  r.headers.emplace_back("x-ratelimit-remaining-" + k,
                         std::to_string(static_cast<uint64_t>(std::floor(t.limit_remaining))));
  r.headers.emplace_back("x-ratelimit-reset-" + k, reset_text(t.wait));
}

// The class a request asks for (x-kvgate-priority, or SMG's x-smg-priority), else its key's.
Priority priority_of(const Generation& g) {
  for (std::string_view h : {"x-kvgate-priority", "x-smg-priority"}) {
    if (std::optional<Priority> p = parse_priority(g.req.header(h))) return *p;
  }
  return g.caller.entry != nullptr ? g.caller.entry->priority : Priority::kStandard;
}

// Fair share counts what the fleet computes for a tenant: its prompt as soon as the request is let
// through (so its requests still running count against it; charged at the end, a tenant with many
// requests in flight would look under-served), its output tokens at their weight when it ends.
// (identify() named the tenant in the access record.)
void charge_prompt(const GenerationParts& parts, const Generation& g) {
  parts.admission.charge(g.record.tenant, static_cast<double>(g.parsed.tokens.size()));
}

}  // namespace

void identify(const GenerationParts& parts, Generation& g) {
  g.caller = parts.access.caller(g.req);
  g.priority = priority_of(g);
  const KeyEntry* key = g.caller.entry;
  g.record.tenant = key != nullptr ? std::string_view(key->tenant) : std::string_view();
  g.record.priority = priority_name(g.priority);
}

net::awaitable<bool> limit(const GenerationParts& parts, Generation& g) {
  const KeyEntry* key = g.caller.entry;
  if (key == nullptr) {
    charge_prompt(parts, g);
    co_return true;
  }
  if (!key->may_use(g.parsed.model)) {
    http::Response err = error_answer(
        parts, ErrorReason::kModelNotAllowed, 404,
        "The model `" + g.parsed.model + "` does not exist or you do not have access to it.");
    co_await reply(g, std::move(err));
    co_return false;
  }
  const auto now = std::chrono::steady_clock::now();
  const uint64_t prompt = g.parsed.tokens.size();
  TokenBucket::Take requests{.ok = true};
  TokenBucket::Take tokens{.ok = true};
  if (key->requests) requests = key->requests->take(1, now);
  if (requests.ok && key->tokens) {
    tokens = key->tokens->take(prompt, now);
    if (!tokens.ok && key->requests) key->requests->charge(-1, now);  // not admitted after all
  }
  if (requests.ok && tokens.ok) {
    charge_prompt(parts, g);
    co_return true;
  }
  if (key->series) key->series->rate_limited->Increment();
  const bool by_requests = !requests.ok;
  http::Response err = error_answer(
      parts, ErrorReason::kRateLimited, 429,
      std::string("Rate limit reached for ") + (by_requests ? "requests" : "tokens") +
          " per minute on this key (tenant " + key->tenant + "). Please try again in " +
          reset_text(by_requests ? requests.wait : tokens.wait) + ".");
  const std::chrono::milliseconds wait = by_requests ? requests.wait : tokens.wait;
  err.headers.emplace_back("retry-after", std::to_string((wait.count() + 999) / 1000));
  if (key->requests) limit_headers(err, "requests", *key->requests, requests);
  if (key->tokens) limit_headers(err, "tokens", *key->tokens, tokens);
  co_await reply(g, std::move(err));
  co_return false;
}

void charge_output(const GenerationParts& parts, const Generation& g) {
  const KeyEntry* key = g.caller.entry;
  if (g.completion_tokens > 0) {
    parts.admission.charge(g.record.tenant, parts.config.fair_share_output_weight *
                                                static_cast<double>(g.completion_tokens));
  }
  if (key != nullptr && key->series && g.status != 429) {
    const TenantSeries& t = *key->series;
    t.requests[static_cast<size_t>(g.priority)]->Increment();
    t.prompt_tokens->Increment(static_cast<double>(g.parsed.tokens.size()));
    t.output_tokens->Increment(static_cast<double>(g.completion_tokens));
  }
  if (key == nullptr || !key->tokens || g.completion_tokens == 0) return;
  key->tokens->charge(static_cast<int64_t>(g.completion_tokens), std::chrono::steady_clock::now());
}

}  // namespace kvgate::app
