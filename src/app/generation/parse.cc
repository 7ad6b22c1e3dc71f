// Parse: the client's body (or its typed request) into a ParsedRequest (src/app/request_model.h),
// its prompt bounded by the longest context any worker serves, and its model one the fleet serves.
#include "app/generation/stages.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/use_awaitable.hpp"

namespace kvgate::app {
namespace net = boost::asio;
namespace {

// Bodies larger than this are parsed on the gateway's parse thread, not on an executor.
constexpr size_t kInlineParseBytes = 1 << 20;

Status parse_now(const GenerationParts& parts, Generation& g, size_t max_prompt_tokens) {
  if (g.typed != nullptr) {
    return parse_typed_request(*g.typed, parts.tokenizers, max_prompt_tokens, &g.parsed);
  }
  return parse_request(g.route, g.req.body(), parts.tokenizers, max_prompt_tokens, &g.parsed,
                       g.req.body_room());
}

net::awaitable<Status> parse_body(const GenerationParts& parts, Generation& g,
                                  size_t max_prompt_tokens) {
  if (g.req.body().size() <= kInlineParseBytes) co_return parse_now(parts, g, max_prompt_tokens);
  // A large body is parsed on the parse thread, one at a time: the executors keep serving
  // (health checks among them) and only one large parse holds its memory at once.
  const auto on_parse_thread = [&]() -> net::awaitable<Status> {
    co_return parse_now(parts, g, max_prompt_tokens);
  };
  auto parsing = net::co_spawn(parts.parse_context, on_parse_thread(), net::use_awaitable);
  co_return co_await std::move(parsing);
}

}  // namespace

net::awaitable<bool> parse(const GenerationParts& parts, Generation& g) {
  g.fleet = parts.workers.snapshot();
  // The longest context any worker serves bounds the prompt (a longer one runs nowhere).
  const Status parsed = co_await parse_body(parts, g, parts.routing.max_prompt_tokens(*g.fleet));
  if (!parsed.ok()) {
    http::Response err = error_answer(
        parts, absl::IsOutOfRange(parsed) ? ErrorReason::kPromptTooLong : ErrorReason::kBadRequest,
        400, message_of(parsed));
    co_await reply(g, std::move(err));
    co_return false;
  }
  g.record.model = g.parsed.model;
  g.record.prompt_tokens = static_cast<int64_t>(g.parsed.tokens.size());
  if (!g.parsed.model.empty() && !g.fleet->knows_model(g.parsed.model)) {
    parts.metrics.error(ErrorReason::kUnknownModel);
    http::Response r = http::Response::error(
        404, "The model '" + g.parsed.model + "' does not exist", "not_found_error");
    co_await reply(g, std::move(r));
    co_return false;
  }
  co_return true;
}

}  // namespace kvgate::app
