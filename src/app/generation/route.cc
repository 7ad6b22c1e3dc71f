// Route: what a decision is asked (the prompt's block chain, the routing request) and what the
// chosen worker will be sent, then each decision, counted and, when asked, explained.
#include "app/cache_report.h"
#include "app/generation/stages.h"
#include "app/worker_exchange.h"
#include "kvgate/policy/explain.h"

namespace kvgate::app {
namespace {

thread_local policy::Scratch tl_scratch;

}  // namespace

void prepare_route(const GenerationParts& parts, Generation& g) {
  const workers::FleetSnapshot& fleet = *g.fleet;
  g.block_size = parts.routing.block_size(fleet);
  // The chain lives in a per-thread buffer: keep a copy, the coroutine may resume elsewhere.
  const std::span<const SeqHash> chain = parts.routing.prompt_chain(g.parsed, fleet);
  g.chain.assign(chain.begin(), chain.end());
  g.route_request = parts.routing.route_request(g.req, g.parsed, g.chain, fleet);
  g.route_request.explain = g.explain;
  g.upstream =
      upstream_request(g.req, parts.instance_id, g.request_id, parts.config.forward_headers);
  // A stream whose client did not ask for usage: the engine is asked (its usage says what it
  // found cached) and the usage event is kept from the client.
  g.strip_usage = g.parsed.stream && !g.parsed.has_stream_options &&
                  parts.config.policy == policy::PolicyKind::kCacheAware &&
                  (g.route == ApiRoute::kCompletions || g.route == ApiRoute::kChatCompletions);
  if (g.strip_usage) {
    if (std::optional<std::string> body = with_stream_usage(g.req.body())) {
      g.upstream.body = std::move(*body);
      g.upstream.body_view = {};
    }
  }
  // A chat answer is encoded after it is sent, ready for the client's next turn, which resends
  // it (answer_memory.h).
  g.remember_answer = parts.answers != nullptr && g.route == ApiRoute::kChatCompletions &&
                      parts.tokenizers.for_model(g.parsed.model).has_chat_template();
}

policy::Decision decide(const GenerationParts& parts, Generation& g, policy::Policy& policy,
                        workers::WorkerRole role, bool record) {
  g.fleet = parts.workers.snapshot();
  g.route_request.exclude = g.tried;
  g.route_request.role = role;
  const MonoTime started = parts.clock.now();
  const policy::Decision d = policy.select(g.route_request, *g.fleet, tl_scratch);
  const double seconds = to_seconds(parts.clock.now() - started);
  parts.metrics.decision(d.branch, seconds, d.pending_blocks > 0);
  if (!record) return d;
  AccessRecord& rec = g.record;
  rec.routed = true;
  rec.decision_us = seconds * 1e6;
  rec.matched_blocks = d.matched_blocks;
  rec.rank = d.rank;
  rec.branch = policy::branch_name(d.branch);
  // Why it went there, only when asked, and told before anything suspends: the explanation reads
  // this thread's scratch, which the next decision on this thread overwrites.
  if (g.explain) {
    g.decision = decision_text(policy.name(),
                               policy::explain(g.route_request, d, *g.fleet, tl_scratch,
                                               parts.routing.cost_model(), kHeaderTop),
                               *g.fleet);
    rec.decision = g.decision;
  }
  return d;
}

}  // namespace kvgate::app
