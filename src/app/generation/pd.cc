// Prefill/decode disaggregation: one attempt of a pair. The client gets the decode's answer,
// relayed as any attempt's; the prefill's is read to its end here and checked. A failed prefill
// is held to blame and the pair retried.
//
// SGLang's protocol (--pd-protocol sglang): the request goes to both at once, both bodies carrying
// bootstrap_host and bootstrap_port (the prefill's) and a fresh random bootstrap_room; the decode
// fetches the room's KV cache from the prefill. A prefill that fails cuts the decode (which would
// otherwise wait for a room that never comes); a decode that fails cuts the prefill.
//
// Which: what the prefill's engine says it speaks (its /server_info: SGLang's disaggregation_mode,
// or a vLLM NixlConnector), else --pd-protocol.
//
// vLLM's (--pd-protocol vllm, NixlConnector over HTTP): the prefill first, with
// kv_transfer_params {"do_remote_decode": true, ...}, max_tokens 1 and no stream; then the decode
// with the client's own request and the kv_transfer_params the prefill answered (its engine id,
// block ids and side-channel address), from which the decode pulls the blocks.
#include <simdjson.h>

#include <random>

#include "app/cache_report.h"
#include "app/generation/stages.h"
#include "app/stream_events.h"
#include "app/worker_exchange.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"
#include "kvgate/workers/load.h"

namespace kvgate::app {
namespace net = boost::asio;
using workers::Outcome;

namespace {

std::shared_ptr<spdlog::logger> pd_log() {
  static auto l = log::get("pd");
  return l;
}

// A room number as SGLang's router draws them: uniform in [0, 2^63 - 1].
uint64_t fresh_room() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng() >> 1;
}

// `body` (a JSON object) with the bootstrap fields (any the client sent replaced). A batch of
// `batch` prompts gets a list of each, a room per prompt, as SGLang's router sends them.
std::optional<std::string> with_bootstrap(std::string_view body, std::string_view host,
                                          uint16_t port, uint32_t batch) {
  std::string fields;
  JsonWriter w(&fields);
  const auto each = [&](std::string_view key, const auto& write_one) {
    w.key(key);
    if (batch > 1) w.begin_array();
    for (uint32_t i = 0; i < batch; ++i) write_one();
    if (batch > 1) w.end_array();
  };
  each("bootstrap_host", [&] { w.value(host); });
  each("bootstrap_port", [&] {
    if (port != 0) {
      w.value(static_cast<uint64_t>(port));
    } else {
      w.null();
    }
  });
  each("bootstrap_room", [&] { w.value(fresh_room()); });
  static constexpr std::string_view kOwn[] = {"bootstrap_host", "bootstrap_port", "bootstrap_room"};
  const bool has_own = body.find("\"bootstrap_") != std::string_view::npos;
  return with_members(body, fields,
                      has_own ? std::span(kOwn) : std::span<const std::string_view>());
}

// What vLLM's prefill is asked: the prompt's KV kept for a remote decode, one token, whole.
std::optional<std::string> vllm_prefill_body(std::string_view body, bool chat) {
  static constexpr std::string_view kReplaced[] = {"kv_transfer_params", "stream", "stream_options",
                                                   "max_tokens", "max_completion_tokens"};
  std::string members =
      R"("kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,)"
      R"("remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null},)"
      R"("stream":false,"max_tokens":1)";
  if (chat) members += R"(,"max_completion_tokens":1)";
  return with_members(body, members, kReplaced);
}

// The kv_transfer_params object of a prefill's answer, as JSON; empty when it has none.
std::string kv_transfer_params_of(std::string_view answer) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc, params;
  if (parser.parse(answer.data(), answer.size()).get(doc) != simdjson::SUCCESS ||
      doc["kv_transfer_params"].get(params) != simdjson::SUCCESS || !params.is_object()) {
    return {};
  }
  return simdjson::minify(params);
}

// The prefill side of one pair: its own exchange, on the request's executor, beside the decode's
// attempt. `finished` is cancelled when it ends, so the attempt's side can wait for it.
struct PrefillSide {
  explicit PrefillSide(const net::any_io_executor& ex) : finished(ex) {
    finished.expires_at(net::steady_timer::time_point::max());
  }
  bool done = false;
  MonoTime done_at{};                // when its answer ended (or failed)
  bool abandoned = false;            // the decode failed first: the prefill is not sent
  Status failure;                    // OK: the prefill answered and its answer ended cleanly
  http::Connection* conn = nullptr;  // while its exchange runs: cut it when the decode fails
  net::steady_timer finished;
};

// The prefill's answer read to its end on `conn` and checked; with `answer`, kept there (at most
// kMostAnswerBytes of it). `bad_answer`: the failure is what the worker answered, not the
// connection's.
constexpr size_t kMostAnswerBytes = 1 << 20;
net::awaitable<Status> read_prefill_answer(const GenerationParts& parts, http::Connection& conn,
                                           const http::ClientResponse& head, std::string* answer,
                                           bool* bad_answer) {
  ErrorEventScan errors;
  for (;;) {
    auto piece = co_await conn.next_piece(parts.config.stream_idle_timeout);
    if (!piece.ok()) co_return piece.status();
    if (piece->empty()) break;
    errors.scan(*piece);
    if (answer != nullptr && answer->size() + piece->size() <= kMostAnswerBytes) {
      answer->append(*piece);
    }
  }
  if (head.status == 200 && !errors.found()) co_return absl::OkStatus();
  *bad_answer = true;
  co_return absl::UnavailableError("the prefill worker answered " + std::to_string(head.status) +
                                   (errors.found() ? " with an error event" : ""));
}

// The prefill's exchange on `worker`: the request sent (once more on a fresh connection when the
// worker had closed the pooled one while idle, as the decode's attempt does) and its answer read
// and checked; the outcome told to `dispatch`.
net::awaitable<Status> exchange_prefill(const GenerationParts& parts, workers::Worker& worker,
                                        const http::ClientRequest& request, PrefillSide& side,
                                        Dispatch& dispatch, std::string* answer) {
  UpstreamPool::Source source = worker.breaker().state() == workers::BreakerState::kClosed
                                    ? UpstreamPool::Source::kPooled
                                    : UpstreamPool::Source::kFresh;
  for (;;) {
    auto lease = co_await parts.upstream.acquire(worker, source);
    if (side.abandoned) {
      dispatch.set(Outcome::kCancelled);
      co_return absl::CancelledError("the decode failed before the prefill was sent");
    }
    if (!lease.ok()) {
      worker.liveness().note_connect_failed();
      dispatch.set(Outcome::kConnectFailed);
      co_return lease.status();
    }
    side.conn = lease->conn.get();
    auto head = co_await side.conn->start_streaming(request, parts.config.first_byte_timeout);
    if (!head.ok() && lease->reused && side.conn->closed_by_peer()) {
      side.conn = nullptr;
      parts.metrics.stale_connection_retry();
      source = UpstreamPool::Source::kFresh;
      continue;
    }
    bool bad_answer = false;
    // (Not a co_await inside ?: , which g++ 12 mishandles.)
    Status read = head.status();
    if (head.ok())
      read = co_await read_prefill_answer(parts, *side.conn, *head, answer, &bad_answer);
    side.conn = nullptr;
    if (!read.ok()) {
      dispatch.set(!bad_answer           ? outcome_of_failure(read)
                   : head->status != 200 ? outcome_of_status(head->status)
                                         : Outcome::kServerError);
      co_return read;
    }
    worker.liveness().note_contact();
    dispatch.prefilled();
    dispatch.set(Outcome::kSuccess);
    parts.upstream.release(worker.id(), std::move(lease->conn));
    co_return absl::OkStatus();
  }
}

// The prefill side of a pair: its exchange, then its end told. On failure, the decode's
// connection (the attempt's, in g.live_upstream) is cut.
net::awaitable<void> run_prefill(const GenerationParts& parts, Generation& g,
                                 std::shared_ptr<workers::Worker> worker, policy::Decision d,
                                 http::ClientRequest request, PrefillSide& side,
                                 std::string* answer = nullptr) {
  const std::optional<DpRank> rank =
      d.rank >= 0 ? std::optional<DpRank>(static_cast<DpRank>(d.rank)) : std::nullopt;
  request.headers[0].second = authorization_for(g.req, *worker, parts.config);
  request.headers[1].second = rank ? std::to_string(*rank) : std::string();
  Dispatch dispatch(*worker, parts.policy, g.route_request, g.parsed.stream, rank,
                    g.parsed.tokens.size(), g.parsed.tokens.size());
  const MonoTime started = parts.clock.now();
  Status failure = co_await exchange_prefill(parts, *worker, request, side, dispatch, answer);
  parts.metrics.pd_prefill_seconds(to_seconds(parts.clock.now() - started));
  if (side.abandoned) {  // cut because its decode failed: not the prefill's failure
    failure = absl::CancelledError("the decode failed first");
    dispatch.set(Outcome::kCancelled);
  } else if (!failure.ok()) {
    parts.metrics.pd_prefill_failed();
    KVGATE_LOG_EVERY_MS(pd_log(), spdlog::level::warn, 1000, "prefill on {} failed: {}",
                        worker->url(), message_of(failure));
    // The decode waits for a room that will never come: cut it.
    if (g.live_upstream != nullptr) g.live_upstream->close();
  }
  side.failure = std::move(failure);
  side.done = true;
  side.done_at = parts.clock.now();
  side.finished.cancel();
}

// A streamed pair's hand-over and decode times, once both sides answered whole.
void time_pair(const GenerationParts& parts, const Generation& g, const PrefillSide& side,
               const Attempt& a) {
  if (!a.done || !side.done || !side.failure.ok() || !g.first_token_at) return;
  const MonoTime first = *g.first_token_at;
  // A decode that began before the prefill's answer ended (SGLang's pairs run at once, and the
  // KV can arrive before the prefill's own answer does) hid its hand-over: 0.
  const double transfer = first > side.done_at ? to_seconds(first - side.done_at) : 0.0;
  parts.metrics.pd_streamed(transfer, to_seconds(parts.clock.now() - first));
}

// The upstream request's body while one pair runs: the pair's own (with its bootstrap room or
// transfer params), the request's own again when the pair ends, so a retry, as a pair or on a
// decode worker alone, starts from the client's body and never carries an old pair's fields.
class PairBody {
 public:
  explicit PairBody(http::ClientRequest& upstream)
      : upstream_(upstream), body_(std::move(upstream.body)), view_(upstream.body_view) {}
  ~PairBody() {
    upstream_.body = std::move(body_);
    upstream_.body_view = view_;
  }
  PairBody(const PairBody&) = delete;
  PairBody& operator=(const PairBody&) = delete;
  // What the pair's bodies are made from: the request's own upstream body (the client's, with the
  // gateway's own changes such as the usage it asks for).
  std::string_view own() const { return view_.empty() ? std::string_view(body_) : view_; }
  void set(std::string body) {
    upstream_.body = std::move(body);
    upstream_.body_view = {};
  }

 private:
  http::ClientRequest& upstream_;
  std::string body_;
  std::string_view view_;
};

// An attempt that ends before any worker was asked: the request's body is not a JSON object.
Attempt not_an_object() {
  Attempt a;
  a.failure = absl::InvalidArgumentError("the request body is not a JSON object");
  return a;
}

// SGLang's pair: both at once.
net::awaitable<Attempt> sglang_pair(const GenerationParts& parts, Generation& g,
                                    std::shared_ptr<workers::Worker> prefill,
                                    const policy::Decision& prefill_decision,
                                    workers::Worker& decode, const policy::Decision& d,
                                    PairFault* fault) {
  const std::shared_ptr<const workers::WorkerInfo> info = prefill->info();
  PairBody pair_body(g.upstream);
  std::optional<std::string> body =
      with_bootstrap(pair_body.own(), prefill->host(), info->bootstrap_port, g.parsed.batch);
  if (!body) co_return not_an_object();
  pair_body.set(std::move(*body));
  const net::any_io_executor executor = co_await net::this_coro::executor;
  PrefillSide side(executor);
  net::co_spawn(executor,
                run_prefill(parts, g, std::move(prefill), prefill_decision, g.upstream, side),
                net::detached);
  g.decode_waits_for_room = true;
  Attempt a = co_await attempt(parts, g, decode, d);
  g.decode_waits_for_room = false;
  if (!side.done && !a.done) {  // the decode failed: the prefill's work is for nothing
    side.abandoned = true;
    if (side.conn != nullptr) side.conn->close();
  }
  if (!side.done) {
    boost::system::error_code ec;
    co_await side.finished.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  time_pair(parts, g, side, a);
  const bool prefill_failed = !side.failure.ok() && !side.abandoned;
  // A decode that timed out (504) waited for its room: a late prefill may be the cause even when
  // its answer came in first (the room was ready just after the decode gave up).
  const bool decode_timed_out = !a.done && a.answer && a.answer->status == 504;
  *fault = prefill_failed                       ? PairFault::kPrefill
           : side.abandoned || decode_timed_out ? PairFault::kEither
                                                : PairFault::kDecode;
  if (prefill_failed && !a.done) {
    a.failure = side.failure;
    a.answer.reset();
    a.retry = true;
  }
  co_return a;
}

// vLLM's pair: the prefill, then the decode with what the prefill answered.
net::awaitable<Attempt> vllm_pair(const GenerationParts& parts, Generation& g,
                                  std::shared_ptr<workers::Worker> prefill,
                                  const policy::Decision& prefill_decision, workers::Worker& decode,
                                  const policy::Decision& d, PairFault* fault) {
  PairBody pair_body(g.upstream);
  std::optional<std::string> prefill_body =
      vllm_prefill_body(pair_body.own(), g.route == ApiRoute::kChatCompletions);
  if (!prefill_body) co_return not_an_object();
  http::ClientRequest to_prefill = g.upstream;
  to_prefill.body = std::move(*prefill_body);
  to_prefill.body_view = {};
  const net::any_io_executor executor = co_await net::this_coro::executor;
  PrefillSide side(executor);
  std::string answer;
  co_await run_prefill(parts, g, std::move(prefill), prefill_decision, std::move(to_prefill), side,
                       &answer);
  const std::string params = side.failure.ok() ? kv_transfer_params_of(answer) : std::string();
  if (side.failure.ok() && params.empty()) {
    parts.metrics.pd_prefill_failed();
    side.failure = absl::UnavailableError(
        "the prefill worker answered without kv_transfer_params: is it an engine started with a "
        "KV connector (vLLM --kv-transfer-config)?");
  }
  *fault = side.failure.ok() ? PairFault::kDecode : PairFault::kPrefill;
  if (!side.failure.ok()) {
    Attempt a;
    a.failure = side.failure;
    a.retry = true;
    co_return a;
  }
  static constexpr std::string_view kReplaced[] = {"kv_transfer_params"};
  std::optional<std::string> body =
      with_members(pair_body.own(), "\"kv_transfer_params\":" + params, kReplaced);
  if (!body) co_return not_an_object();
  pair_body.set(std::move(*body));
  Attempt a = co_await attempt(parts, g, decode, d);
  time_pair(parts, g, side, a);
  co_return a;
}

}  // namespace

net::awaitable<Attempt> pd_attempt(const GenerationParts& parts, Generation& g,
                                   std::shared_ptr<workers::Worker> prefill,
                                   const policy::Decision& prefill_decision,
                                   workers::Worker& decode, const policy::Decision& d,
                                   PairFault* fault) {
  parts.metrics.pd_pair();
  Attempt a;
  // The protocol the prefill's engine says it speaks, else the fleet's flag.
  const workers::PdWire wire = prefill->info()->pd_wire;
  if (wire == workers::PdWire::kVllm ||
      (wire == workers::PdWire::kUnknown &&
       parts.config.pd_protocol == GatewayConfig::PdProtocol::kVllm)) {
    a = co_await vllm_pair(parts, g, std::move(prefill), prefill_decision, decode, d, fault);
  } else {
    a = co_await sglang_pair(parts, g, std::move(prefill), prefill_decision, decode, d, fault);
  }
  co_return a;
}

namespace {

// The blocks of the prompt's chain the decode worker `d` chose (its rank when pinned) holds: a
// cache-aware decode policy's own figure, else the KV index's.
uint32_t decode_held_blocks(const GenerationParts& parts, const Generation& g,
                            const policy::Decision& d) {
  const workers::WorkerInfo& info = *g.fleet->infos[d.worker];
  uint32_t depth = d.matched_blocks;
  if (depth != 0 || info.holders.empty() || parts.index == nullptr || g.chain.empty()) return depth;
  thread_local std::vector<index::HolderMatch> matches;
  matches.clear();
  parts.index->lookup(g.chain, matches);
  for (const index::HolderMatch& m : matches) {
    for (size_t h = 0; h < info.holders.size(); ++h) {
      const bool rank_ok = d.rank < 0 || (h < info.holder_ranks.size() &&
                                          info.holder_ranks[h] == static_cast<DpRank>(d.rank));
      if (info.holders[h] == m.holder && rank_ok) depth = std::max(depth, m.any_depth);
    }
  }
  return depth;
}

// The routing figures of worker `w`, or of its rank `rank` when pinned (>= 0).
workers::Worker::RoutingFigures figures_of(const workers::Worker& w, int32_t rank) {
  return rank >= 0 ? w.routing_figures(static_cast<DpRank>(rank)) : w.routing_figures();
}

// Expected milliseconds before a worker with figures `f` starts a prompt of which it lacks
// `uncached` tokens: its queued prefill (the engine's count or this gateway fleet's, whichever is
// more) and those tokens, at its prefill rate (the learned one with --measured-prefill-rate, else
// the prior).
double expected_wait_ms(const GenerationParts& parts, const workers::Worker::RoutingFigures& f,
                        uint64_t uncached) {
  const policy::CacheAwareConfig& cost = parts.config.cache_aware;
  const double rate = f.priced_prefill_rate(cost.measured_prefill_rate,
                                            static_cast<float>(cost.prefill_tokens_per_second));
  return static_cast<double>(f.queued_ahead() + uncached) / std::max(rate, 1.0) * 1e3;
}

}  // namespace

std::optional<LocalPrefill> local_prefill(const GenerationParts& parts, const Generation& g,
                                          const policy::Decision& prefill_d,
                                          const policy::Decision& d) {
  const GatewayConfig& c = parts.config;
  const bool by_cache = c.pd_local_prefill_by_cache();
  const bool by_wait = c.pd_local_prefill_by_wait();
  if (!(by_cache || by_wait) || d.worker < 0 || prefill_d.worker < 0) return std::nullopt;
  const uint64_t prompt = g.parsed.tokens.size();
  const auto tokens_of = [&](uint32_t blocks) {
    return std::min<uint64_t>(uint64_t{blocks} * g.block_size, prompt);
  };
  LocalPrefill local;
  local.held_tokens = tokens_of(decode_held_blocks(parts, g, d));
  const uint64_t uncached = prompt - local.held_tokens;
  const bool few_left = c.pd_local_prefill_tokens > 0 && uncached <= c.pd_local_prefill_tokens;
  const bool most_held = c.pd_local_prefill_share > 0 && prompt > 0 &&
                         static_cast<double>(local.held_tokens) >=
                             c.pd_local_prefill_share * static_cast<double>(prompt);
  if (local.held_tokens > 0 && (few_left || most_held)) {
    local.reason = LocalPrefill::Reason::kHeld;
    return local;
  }
  if (!by_wait) return std::nullopt;
  const workers::Worker::RoutingFigures decode = figures_of(*g.fleet->workers[d.worker], d.rank);
  // A decode worker at the overload thresholds (its KV pool nearly full, or requests waiting in
  // its engine) takes no prompt alone for the wait: its KV room is for its pairs' transfers, which
  // an engine without room refuses or makes wait.
  const workers::OverloadRule overload(c.cache_aware.overload);
  if (overload.overloaded(decode.kv_usage_ppm, decode.waiting, decode.fleet_in_flight,
                          decode.prefilling)) {
    return std::nullopt;
  }
  local.local_wait_ms = expected_wait_ms(parts, decode, uncached);
  local.pair_wait_ms =
      expected_wait_ms(parts, figures_of(*g.fleet->workers[prefill_d.worker], prefill_d.rank),
                       prompt - tokens_of(prefill_d.matched_blocks));
  // (Strictly sooner: on an idle fleet the pair wins the tie, its decode streams undisturbed.)
  if (!(local.local_wait_ms < c.pd_local_prefill_wait_ratio * local.pair_wait_ms)) {
    return std::nullopt;
  }
  local.reason = LocalPrefill::Reason::kSooner;
  return local;
}

}  // namespace kvgate::app
