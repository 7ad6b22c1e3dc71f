// The generation path: parse, hash, route, forward (retrying elsewhere while nothing reached the
// client), stream back with backpressure, and account for the request's end on every path.
#include <algorithm>
#include <cstdint>
#include <random>

#include "app/attempt.h"
#include "app/cache_report.h"
#include "app/gateway_impl.h"
#include "app/stream_guard.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/beast/core/string.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"
#include "kvgate/policy/explain.h"

namespace kvgate::app {
namespace net = boost::asio;
using workers::Outcome;

namespace {

// The data-parallel rank a request is pinned to: vLLM's OpenAI server and SGLang both honour it.
constexpr std::string_view kRankHeader = "x-data-parallel-rank";
// Bodies larger than this are parsed on the gateway's parse thread, not on an executor.
constexpr size_t kInlineParseBytes = 1 << 20;
// Every gateway a request passed names itself here; a gateway that finds its own name (a worker
// URL that leads back to it, two gateways pointed at each other) refuses the request instead of
// sending it round until the file handles run out.
constexpr std::string_view kHopsHeader = "x-kvgate-hops";
constexpr size_t kMaxHops = 8;

// Whether `hops` (a comma-separated list of gateway ids) names `self` or is already too long.
bool is_loop(std::string_view hops, std::string_view self) {
  if (hops.empty()) return false;
  size_t n = 0;
  for (size_t start = 0; start <= hops.size(); ++n) {
    size_t comma = hops.find(',', start);
    if (comma == std::string_view::npos) comma = hops.size();
    std::string_view id = hops.substr(start, comma - start);
    while (!id.empty() && id.front() == ' ') id.remove_prefix(1);
    if (id == self) return true;
    start = comma + 1;
  }
  return n >= kMaxHops;
}

thread_local policy::Scratch tl_scratch;

std::shared_ptr<spdlog::logger> proxy_log() {
  static auto l = log::get("proxy");
  return l;
}

// The client's x-request-id when it sent a usable one (printable, at most 128 bytes), else 32 hex
// digits made here.
std::string request_id_of(const http::Request& req) {
  const std::string_view given = req.header(kRequestIdHeader);
  if (!given.empty() && given.size() <= 128 &&
      std::all_of(given.begin(), given.end(), [](char ch) { return ch > 0x20 && ch < 0x7f; })) {
    return std::string(given);
  }
  thread_local std::mt19937_64 rng(std::random_device{}());
  // 32 hex digits written by hand: this runs on every request without an id.
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string id(32, '0');
  for (size_t half = 0; half < 2; ++half) {
    uint64_t bits = rng();
    for (size_t i = 0; i < 16; ++i, bits >>= 4) id[half * 16 + 15 - i] = kDigits[bits & 0xf];
  }
  return id;
}

constexpr std::string_view kShutdownMessage =
    "this gateway is shutting down and its grace period ended before the request did; retry it";

// Counts a generation request for the whole of its handler, so a drain knows when none is left.
class ActiveGeneration {
 public:
  explicit ActiveGeneration(std::atomic<int64_t>& n) : n_(n) { n_.fetch_add(1); }
  ~ActiveGeneration() { n_.fetch_sub(1); }
  ActiveGeneration(const ActiveGeneration&) = delete;
  ActiveGeneration& operator=(const ActiveGeneration&) = delete;

 private:
  std::atomic<int64_t>& n_;
};

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

// The request as the worker gets it. Its body is the client's own bytes (not copied: `req`
// outlives every attempt). Header 0 is the authorization slot (authorization_for), header 1 the
// data-parallel rank's (empty headers are not sent).
http::ClientRequest upstream_request(const http::Request& req, std::string_view self,
                                     std::string_view request_id) {
  http::ClientRequest c;
  c.method = http::Verb::post;
  c.target = std::string(req.target());
  c.body_view = req.body();
  // The body parsed as JSON, whatever the client called it: engines refuse anything else (curl -d
  // sends application/x-www-form-urlencoded).
  c.content_type = "application/json";
  c.headers.reserve(6);                                    // at most the six below: one allocation
  c.headers.emplace_back("authorization", std::string());  // set per attempt
  c.headers.emplace_back(std::string(kRankHeader), std::string());  // set per attempt
  c.headers.emplace_back(std::string(kRequestIdHeader), std::string(request_id));
  for (std::string_view h : {"traceparent", "tracestate"}) {
    const std::string_view v = req.header(h);
    if (!v.empty()) c.headers.emplace_back(std::string(h), std::string(v));
  }
  const std::string_view hops = req.header(kHopsHeader);
  c.headers.emplace_back(
      std::string(kHopsHeader),
      hops.empty() ? std::string(self) : std::string(hops) + "," + std::string(self));
  return c;
}

// The body of a refused stream (an error document), at most 1 MiB of it.
net::awaitable<std::string> read_error_body(http::Connection& conn) {
  std::string body;
  for (;;) {
    auto piece = co_await conn.next_piece();
    if (!piece.ok() || piece->empty()) break;
    if (body.size() > (1 << 20)) {
      conn.close();  // not read to its end: the connection cannot be reused
      break;
    }
    body.append(*piece);
  }
  co_return body;
}

// Whether a content type is SSE's (parameters aside); an answer that names none is taken as one.
bool is_event_stream(std::string_view ct) {
  constexpr std::string_view kSse = "text/event-stream";
  if (ct.empty()) return true;
  if (ct.size() < kSse.size() || !boost::beast::iequals(ct.substr(0, kSse.size()), kSse)) {
    return false;
  }
  return ct.size() == kSse.size() || ct[kSse.size()] == ';' || ct[kSse.size()] == ' ';
}

std::string sse_error(std::string_view message, unsigned code) {
  std::string body;
  JsonWriter w(&body);
  w.begin_object().key("error").begin_object();
  w.member("message", message)
      .member("type", "upstream_error")
      .key("param")
      .null()
      .member("code", code);
  w.end_object().end_object();
  return body;
}

}  // namespace

std::string authorization_for(const http::Request& req, const workers::Worker& w,
                              const GatewayConfig& config) {
  if (!w.authorization().empty()) return w.authorization();
  if (config.forwards_client_authorization()) return std::string(req.header("authorization"));
  return {};
}

http::Response forwarded(unsigned status, const http::ClientResponse& head, std::string body,
                         const std::string& worker, std::optional<DpRank> rank) {
  http::Response r;
  r.status = status;
  // Assigned, not replaced: the default's room takes the usual "application/json".
  const std::string_view ct = head.header("content-type");
  if (!ct.empty()) r.content_type.assign(ct);
  r.body = std::move(body);
  r.headers.reserve(4);  // these two, and the request id and decision the reply adds
  r.headers.emplace_back(std::string(kWorkerHeader), worker);
  if (rank) r.headers.emplace_back(std::string(kRankAnswerHeader), std::to_string(*rank));
  return r;
}

net::awaitable<void> GatewayImpl::serve_generation(ApiRoute route, const http::Request& req,
                                                   http::Responder& res) {
  const MonoTime t0 = clock_.now();
  unsigned final_status = 0;
  // The client's request id, or one made here: sent to the worker, returned on every answer.
  const std::string request_id = request_id_of(req);
  // --decision-headers: the last decision's text (rec.decision views it), on the answer when asked.
  const bool explain = wants_decision(decision_headers_, req.header(kExplainRequestHeader));
  std::string decision;
  const auto reply = [&](http::Response r) -> net::awaitable<void> {
    final_status = r.status;
    r.headers.emplace_back(std::string(kRequestIdHeader), request_id);
    if (explain && !decision.empty())
      r.headers.emplace_back(std::string(kDecisionHeader), decision);
    (void)co_await res.send(std::move(r));  // a failed write is the client's loss, nothing to do
  };
  // Error answers are built first and then sent: kvgate never puts a temporary inside a co_await
  // expression (g++ 12 destroys some of them twice).
  const auto error_answer = [&](ErrorReason reason, unsigned status, std::string_view message) {
    metrics_->error(reason);
    http::Response r = http::Response::error(status, message);
    if (status == 503) r.headers.emplace_back("retry-after", "1");
    return r;
  };

  // The end of every request: its metrics and its access-log line.
  AccessRecord rec{.method = "POST", .path = req.path(), .request_id = request_id};
  std::string worker_url;  // the last worker tried (rec.worker views it)
  const auto done = [&] {
    const unsigned status = final_status == 0 ? 500 : final_status;
    const double seconds = to_seconds(clock_.now() - t0);
    metrics_->request_done(route, status, seconds);
    if (!access_log_->enabled()) return;
    rec.status = status;
    rec.duration_ms = seconds * 1e3;
    rec.worker = worker_url;
    access_log_->write(rec);
  };

  const ActiveGeneration active(active_generations_);
  if (draining_.load(std::memory_order_relaxed)) {
    {
      http::Response err = error_answer(
          ErrorReason::kDraining, 503,
          "this gateway is shutting down and takes no new requests; send it to another replica");
      co_await reply(std::move(err));
    }
    done();
    co_return;
  }
  if (is_loop(req.header(kHopsHeader), instance_id_)) {
    {
      http::Response err =
          error_answer(ErrorReason::kLoop, 508,
                       "request loop: this gateway already forwarded this request (a worker URL "
                       "leads back to a gateway)");
      co_await reply(std::move(err));
    }
    done();
    co_return;
  }
  // --max-concurrent-requests: wait for a slot, or be refused.
  AdmissionGate::Ticket admitted;
  if (admission_->enabled()) {
    const Status entered = co_await admission_->enter(&admitted, res);
    if (absl::IsCancelled(entered)) {  // the client left while queued
      metrics_->error(ErrorReason::kClientAbort);
      final_status = 499;
      done();
      co_return;
    }
    if (!entered.ok()) {
      {
        http::Response err =
            error_answer(absl::IsResourceExhausted(entered) ? ErrorReason::kQueueFull
                                                            : ErrorReason::kQueueTimeout,
                         429, std::string(message_of(entered)) + "; retry later");
        err.headers.emplace_back("retry-after", "1");
        co_await reply(std::move(err));
      }
      done();
      co_return;
    }
  }
  auto fleet = workers_.snapshot();
  // The longest context any worker serves bounds the prompt (a longer one runs nowhere).
  const size_t max_prompt_tokens = this->max_prompt_tokens(*fleet);
  ParsedRequest p;
  Status parsed;
  if (req.body().size() <= kInlineParseBytes) {
    parsed = parse_request(route, req.body(), tokenizers_, max_prompt_tokens, &p, req.body_room());
  } else {
    // A large body is parsed on the parse thread, one at a time: the executors keep serving
    // (health checks among them) and only one large parse holds its memory at once.
    const auto parse = [&]() -> net::awaitable<Status> {
      co_return parse_request(route, req.body(), tokenizers_, max_prompt_tokens, &p,
                              req.body_room());
    };
    auto parsing = net::co_spawn(parse_context_, parse(), net::use_awaitable);
    parsed = co_await std::move(parsing);
  }
  if (!parsed.ok()) {
    {
      http::Response err = error_answer(
          absl::IsOutOfRange(parsed) ? ErrorReason::kPromptTooLong : ErrorReason::kBadRequest, 400,
          message_of(parsed));
      co_await reply(std::move(err));
    }
    done();
    co_return;
  }
  rec.model = p.model;
  if (!p.model.empty() && !fleet->knows_model(p.model)) {
    metrics_->error(ErrorReason::kUnknownModel);
    http::Response r =
        http::Response::error(404, "The model '" + p.model + "' does not exist", "not_found_error");
    co_await reply(std::move(r));
    done();
    co_return;
  }

  const uint32_t block_size = routing_block_size(*fleet);
  // The chain lives in a per-thread buffer: keep a copy, the coroutine may resume elsewhere.
  const std::span<const SeqHash> chain = prompt_chain(p, *fleet);
  const std::vector<SeqHash> my_chain(chain.begin(), chain.end());
  std::vector<WorkerId> tried;
  policy::RouteRequest rr = route_request(req, p, my_chain, *fleet);
  rr.explain = explain || access_log_->enabled();  // the decision is told (below)
  http::ClientRequest upstream_req = upstream_request(req, instance_id_, request_id);
  // A stream whose client did not ask for usage: the engine is asked (its usage says what it
  // found cached) and the usage event is kept from the client.
  const bool strip_usage = p.stream && !p.has_stream_options &&
                           config_.policy == policy::PolicyKind::kCacheAware &&
                           (route == ApiRoute::kCompletions || route == ApiRoute::kChatCompletions);
  if (strip_usage) {
    if (std::optional<std::string> body = with_stream_usage(req.body())) {
      upstream_req.body = std::move(*body);
      upstream_req.body_view = {};
    }
  }
  // A chat answer is encoded after it is sent, ready for the client's next turn, which resends
  // it (answer_memory.h).
  const bool remember_answer = answers_ != nullptr && route == ApiRoute::kChatCompletions &&
                               tokenizers_.for_model(p.model).has_chat_template();
  std::optional<http::Response> last_answer;
  Status last_failure;

  bool prompt_counted = false;

  for (uint32_t attempt = 0; attempt <= config_.max_retries;) {
    if (shutting_down_.load(std::memory_order_relaxed)) {
      http::Response err = error_answer(ErrorReason::kDraining, 503, kShutdownMessage);
      co_await reply(std::move(err));
      break;
    }
    fleet = workers_.snapshot();
    rr.exclude = tried;
    const MonoTime td = clock_.now();
    const policy::Decision d = policy_->select(rr, *fleet, tl_scratch);
    const double decision_seconds = to_seconds(clock_.now() - td);
    metrics_->decision(d.branch, decision_seconds);
    rec.routed = true;
    rec.decision_us = decision_seconds * 1e6;
    rec.matched_blocks = d.matched_blocks;
    rec.rank = d.rank;
    rec.branch = policy::branch_name(d.branch);
    // Why it went there, told before anything suspends: the explanation reads this thread's
    // scratch, which the next decision on this thread overwrites.
    if (explain || access_log_->enabled()) {
      decision = decision_text(policy_->name(),
                               policy::explain(rr, d, *fleet, tl_scratch, cost_model(), kHeaderTop),
                               *fleet);
      rec.decision = decision;
    }
    if (d.worker < 0) {
      if (d.branch == policy::Branch::kShed) {
        http::Response err =
            error_answer(ErrorReason::kShed, 503, "every worker is overloaded; retry later");
        co_await reply(std::move(err));
      } else if (last_answer) {
        co_await reply(std::move(*last_answer));
      } else if (!tried.empty()) {
        const bool timeout = absl::IsDeadlineExceeded(last_failure);
        {
          http::Response err = error_answer(
              timeout ? ErrorReason::kUpstreamTimeout : ErrorReason::kUpstreamConnect,
              timeout ? 504 : 502,
              "no worker could serve the request: " + std::string(message_of(last_failure)));
          co_await reply(std::move(err));
        }
      } else {
        http::Response err = error_answer(ErrorReason::kNoWorker, 503,
                                          "no routable worker for this request; retry later");
        co_await reply(std::move(err));
      }
      break;
    }
    // The prompt tokens the index predicts the chosen worker holds.
    const uint64_t predicted_cached =
        predicted_cached_tokens(d.matched_blocks, p.tokens.size(), block_size);
    if (!prompt_counted) {  // once per request, whatever its retries
      prompt_counted = true;
      metrics_->prompt_routed(p.tokens.size(), predicted_cached);
    }
    const std::shared_ptr<workers::Worker> worker = fleet->workers[d.worker];
    if (!worker->breaker().try_begin_trial()) {
      tried.push_back(worker->id());  // its breaker's one trial is taken: choose again
      continue;
    }
    worker_url = worker->url();
    ++rec.attempts;
    Attempt a;
    upstream_req.headers[0].second = authorization_for(req, *worker, config_);
    const std::optional<DpRank> rank =
        d.rank >= 0 ? std::optional<DpRank>(static_cast<DpRank>(d.rank)) : std::nullopt;
    upstream_req.headers[1].second = rank ? std::to_string(*rank) : std::string();
    {
      Dispatch dispatch(*worker, *policy_, rr, p.stream, rank, p.tokens.size() - predicted_cached);
      const net::any_io_executor executor = co_await net::this_coro::executor;
      VetoWatch veto(*worker, executor);
      workers::LivenessTracker& liveness = worker->liveness();
      // A breaker's trial goes out on a fresh connection: a pooled one the worker closed while
      // idle would fail the trial for the pool's sake, not the worker's.
      UpstreamPool::Source source = worker->breaker().state() == workers::BreakerState::kClosed
                                        ? UpstreamPool::Source::kPooled
                                        : UpstreamPool::Source::kFresh;
      // What the engine says it found cached, against the index's prediction for this worker
      // (cache_aware decides by the prediction; other policies make none).
      const auto note_cache_report = [&](std::string_view answer) {
        if (config_.policy != policy::PolicyKind::kCacheAware) return;
        note_cached_tokens(*worker, predicted_cached, answer, *proxy_log());
      };
      const auto vetoed = [&] {
        dispatch.set(Outcome::kCancelled);  // the liveness tracker already judged the worker
        metrics_->vetoed_attempt();
        a.vetoed = a.retry = true;
        a.failure = absl::UnavailableError(veto_message(*worker, *veto.fired()));
      };
      for (;;) {
        auto lease = co_await upstream_->acquire(*worker, source);
        if (veto.fired()) {
          vetoed();
          break;
        }
        if (!lease.ok()) {
          liveness.note_connect_failed();
          a.failure = lease.status();
          a.retry = true;
          dispatch.set(Outcome::kConnectFailed);
          break;
        }
        http::Connection& conn = *lease->conn;
        veto.watch(&conn);
        // A client that goes away while the worker works closes the upstream connection, so the
        // engine aborts the request instead of computing an answer nobody reads (a released
        // connection is no longer the lease's and is left alone).
        const http::DisconnectWatch watch = res.watch_disconnect([&lease] {
          if (lease->conn) lease->conn->close();
        });
        auto client_abort = [&] {
          dispatch.set(Outcome::kCancelled);
          metrics_->error(ErrorReason::kClientAbort);
          final_status = 499;
          a.done = true;
        };
        // A whole answer (non-streamed), or the head of a stream. (Either branch sets it; a status
        // without a message allocates nothing.)
        Result<http::ClientResponse> head = absl::UnknownError("");
        if (p.stream) {
          head = co_await conn.start_streaming(upstream_req, config_.first_byte_timeout);
        } else {
          head = co_await conn.send(upstream_req);
        }
        if (watch.fired()) {
          client_abort();
          break;
        }
        if (veto.fired()) {
          vetoed();
          break;
        }
        if (!head.ok()) {
          // The worker closed a pooled connection just as the request went out (its keep-alive
          // timer won the race with the pool's): nothing ran, so send it again at once on a fresh
          // connection to the same worker. This is the pool's miss, not the worker's failure, and
          // the breaker never hears of it. A fresh connection fails for real.
          if (lease->reused && conn.closed_by_peer()) {
            metrics_->stale_connection_retry();
            source = UpstreamPool::Source::kFresh;
            continue;
          }
          a.failure = head.status();
          a.retry = !absl::IsDeadlineExceeded(head.status());
          dispatch.set(outcome_of_failure(head.status()));
          break;
        }
        liveness.note_contact();
        const std::string_view ct = head->header("content-type");
        if (p.stream && head->status == 200 && !is_event_stream(ct)) {
          // A worker that answers a stream with something else is broken (or not an engine):
          // counted against its breaker now, and the request goes elsewhere.
          conn.close();
          metrics_->error(ErrorReason::kNotEventStream);
          a.failure = absl::UnavailableError("worker " + worker->url() +
                                             " answered a streamed request with content type '" +
                                             std::string(ct) + "', not text/event-stream");
          a.retry = true;
          dispatch.set(Outcome::kServerError);
          break;
        }
        if (!p.stream || head->status != 200) {
          dispatch.prefilled();
          // An answer to forward whole: a non-streamed one, or a worker refusing a stream.
          std::string body = std::move(head->body);
          if (p.stream) body = co_await read_error_body(conn);
          if (!p.stream && head->status == 200) liveness.note_progress();
          dispatch.set(outcome_of_status(head->status));
          if (head->status == 200) note_cache_report(body);
          if (remember_answer && !p.stream && head->status == 200) {
            answers_->submit(std::string(req.body()), body, /*stream=*/false);
          }
          http::Response answer =
              forwarded(head->status, *head, std::move(body), worker->url(), rank);
          veto.watch(nullptr);
          upstream_->release(worker->id(), std::move(lease->conn));
          if (retryable_status(answer.status)) {
            a.answer = std::move(answer);
            a.retry = true;
            break;
          }
          co_await reply(std::move(answer));
          a.done = true;
          break;
        }
        // The stream's first piece, before anything reaches the client: engines send a stream's
        // head at once and its first token after queueing and prefill, so until that token the
        // request can still go elsewhere (a veto, or a worker that dies mid-prefill).
        auto piece = co_await conn.next_piece(config_.first_byte_timeout);
        if (watch.fired()) {
          client_abort();
          break;
        }
        if (veto.fired()) {
          vetoed();
          break;
        }
        if (!piece.ok()) {
          a.failure = piece.status();
          a.retry = !absl::IsDeadlineExceeded(piece.status());
          dispatch.set(outcome_of_failure(piece.status()));
          break;
        }
        // From here on bytes reach the client: no more retries.
        dispatch.prefilled();
        a.done = true;
        veto.client_started();
        // Progress is an event with data, not a byte (stream_guard.h).
        StreamGuard guard(t0, clock_.now(), config_.request_timeout, config_.stream_idle_timeout,
                          config_.max_answer_bytes);
        if (guard.add(*piece, clock_.now())) liveness.note_progress();
        // (Built outside the co_await: g++ 12 miscompiles initializer lists inside one.)
        // An SSE stream must reach the client piece by piece: no-cache, and no buffering by an
        // nginx in front (X-Accel-Buffering).
        std::vector<http::Header> stream_headers = {{std::string(kWorkerHeader), worker->url()},
                                                    {"cache-control", "no-cache"},
                                                    {"x-accel-buffering", "no"},
                                                    {std::string(kRequestIdHeader), request_id}};
        if (rank)
          stream_headers.emplace_back(std::string(kRankAnswerHeader), std::to_string(*rank));
        if (explain) stream_headers.emplace_back(std::string(kDecisionHeader), decision);
        // The head is held and leaves with the first piece, in one write.
        const Status started = co_await res.start_stream(200, ct.empty() ? "text/event-stream" : ct,
                                                         stream_headers, /*hold=*/true);
        if (!started.ok()) {
          conn.close();
          client_abort();
          break;
        }
        final_status = 200;
        const double ttft = to_seconds(clock_.now() - t0);
        metrics_->ttft(ttft);
        rec.ttft_ms = ttft * 1e3;
        StreamTail tail;     // the stream's usage is its last event
        UsageStrip strip;    // with strip_usage
        AnswerCapture said;  // with remember_answer
        for (;;) {
          const StreamEnd bound = guard.check(clock_.now());
          if (bound != StreamEnd::kNone) {
            conn.close();  // not read to its end: the engine stops, the connection is not reused
            piece = absl::DeadlineExceededError(std::string(stream_end_reason(bound)));
          }
          if (!piece.ok()) {
            // The worker failed mid-stream, passed a bound, or a veto cut it: end the client's
            // stream with an error event.
            const std::string why =
                veto.fired() ? veto_message(*worker, *veto.fired())
                : bound != StreamEnd::kNone
                    ? "worker " + worker->url() + ": " + std::string(stream_end_reason(bound))
                    : "the worker failed mid-stream: " + std::string(message_of(piece.status()));
            dispatch.set(veto.fired()                    ? Outcome::kCancelled
                         : bound == StreamEnd::kTooLarge ? Outcome::kServerError
                                                         : outcome_of_failure(piece.status()));
            metrics_->error(veto.fired() == workers::VetoKind::kShutdown ? ErrorReason::kDraining
                            : veto.fired()                  ? ErrorReason::kWorkerVetoed
                            : bound == StreamEnd::kSilent   ? ErrorReason::kStreamSilent
                            : bound == StreamEnd::kDeadline ? ErrorReason::kStreamDeadline
                            : bound == StreamEnd::kTooLarge ? ErrorReason::kAnswerTooLarge
                                                            : ErrorReason::kUpstreamMidStream);
            KVGATE_LOG_EVERY_MS(proxy_log(), spdlog::level::warn, 1000, "stream from {} ended: {}",
                                worker->url(), why);
            const bool shutdown = veto.fired() == workers::VetoKind::kShutdown;
            const std::string event = sse_error(why, shutdown ? 503 : 502);
            (void)co_await res.write_sse(event);
            (void)co_await res.finish();
            final_status = shutdown ? 503 : 502;
            break;
          }
          std::string_view out;
          if (!piece->empty()) {
            tail.add(*piece);
            if (remember_answer) said.add(*piece);
            out = strip_usage ? strip.feed(*piece) : std::string_view(*piece);
          }
          if (piece->empty() || conn.body_complete()) {
            // The end, here with the stream's last bytes when they arrived with it (an engine
            // writes its last events and the end together): they and the terminator leave in one
            // write.
            if (!piece->empty()) (void)co_await conn.next_piece();  // the end, without a read
            note_cache_report(tail.view());
            if (remember_answer) {
              if (std::optional<std::string> bytes = said.take()) {
                answers_->submit(std::string(req.body()), std::move(*bytes), /*stream=*/true);
              }
            }
            const std::string_view rest = strip_usage ? strip.rest() : std::string_view();
            std::string joined;  // only for an unterminated last event (rare)
            if (!rest.empty()) joined.append(out).append(rest);
            const std::string_view last = rest.empty() ? out : std::string_view(joined);
            dispatch.set(Outcome::kSuccess);
            (void)co_await res.finish(last);
            veto.watch(nullptr);
            upstream_->release(worker->id(), std::move(lease->conn));
            break;
          }
          if (!out.empty() && !(co_await res.write(out)).ok()) {
            // The client went away: drop the upstream connection so the engine aborts the request.
            conn.close();
            client_abort();
            break;
          }
          piece = co_await conn.next_piece(guard.next_wait(clock_.now()));
          if (watch.fired()) {
            client_abort();
            break;
          }
          if (piece.ok() && guard.add(*piece, clock_.now())) liveness.note_progress();
        }
        break;
      }
    }
    if (a.done) break;
    if (a.vetoed && shutting_down_.load(std::memory_order_relaxed)) {
      http::Response err = error_answer(ErrorReason::kDraining, 503, kShutdownMessage);
      co_await reply(std::move(err));
      break;
    }
    if (!a.retry) {
      // A timeout: the request may still be running there; do not send it twice.
      {
        http::Response err = error_answer(ErrorReason::kUpstreamTimeout, 504,
                                          "worker " + worker->url() + " did not answer in time: " +
                                              std::string(message_of(a.failure)));
        co_await reply(std::move(err));
      }
      break;
    }
    if (!a.vetoed) worker->count_retryable_failure();
    tried.push_back(worker->id());
    if (a.answer) last_answer = std::move(a.answer);
    if (!a.failure.ok()) last_failure = a.failure;
    ++attempt;
    if (attempt > config_.max_retries) {
      if (last_answer) {
        co_await reply(std::move(*last_answer));
      } else {
        {
          http::Response err = error_answer(
              ErrorReason::kUpstreamConnect, 502,
              "no worker could serve the request: " + std::string(message_of(last_failure)));
          co_await reply(std::move(err));
        }
      }
      break;
    }
    metrics_->retry();
    if (a.vetoed) continue;  // the worker was taken out of routing: the next one at once
    // Exponential backoff with jitter before the next worker.
    const double base = static_cast<double>(config_.retry_initial_backoff.count()) *
                        double(1u << std::min(attempt - 1, 16u));
    const double capped = std::min(base, static_cast<double>(config_.retry_max_backoff.count()));
    // Seeded once per thread, used only here: a generator per request costs a microsecond.
    thread_local std::mt19937_64 jitter(std::random_device{}());
    const double ms = capped * std::uniform_real_distribution<double>(0.5, 1.0)(jitter);
    net::steady_timer timer(co_await net::this_coro::executor);
    timer.expires_after(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
    boost::system::error_code ec;
    co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  done();
}

}  // namespace kvgate::app
