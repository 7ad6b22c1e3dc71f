// Relay: an attempt's answer to the client. A whole answer is forwarded (a retryable one kept for
// the retry loop), a stream relayed piece by piece with backpressure. Until a stream's first
// piece reaches the client the attempt can still fail over (a veto, a worker that dies in its
// prefill); after it, a failure ends the client's stream with an SSE error event.
#include "app/answer_memory.h"
#include "app/cache_report.h"
#include "app/generation/leg.h"
#include "app/stream_events.h"
#include "app/stream_guard.h"
#include "app/worker_exchange.h"
#include "boost/asio/this_coro.hpp"
#include "boost/beast/core/string.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"

namespace kvgate::app {
namespace net = boost::asio;
using workers::Outcome;

namespace {

std::shared_ptr<spdlog::logger> proxy_log() {
  static auto l = log::get("proxy");
  return l;
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

// What the engine's usage says: the tokens it generated (charged to the caller's limit), and
// what it found cached, against the index's prediction for this worker (cache_aware decides by
// the prediction; other policies make none).
void note_usage(const GenerationParts& parts, Generation& g, Leg& leg, std::string_view answer) {
  g.completion_tokens = reported_count(answer, "\"completion_tokens\"").value_or(0);
  if (parts.config.policy != policy::PolicyKind::kCacheAware) return;
  note_cached_tokens(leg.worker, leg.predicted_cached, answer, *proxy_log());
}

// The headers naming where a stream runs: its worker, rank and a pair's prefill worker.
void name_worker(const Generation& g, const Leg& leg, std::vector<http::Header>& headers) {
  headers.emplace_back(std::string(kWorkerHeader), leg.worker.url());
  if (leg.rank) headers.emplace_back(std::string(kRankAnswerHeader), std::to_string(*leg.rank));
  if (!g.prefill_url.empty()) {
    headers.emplace_back(std::string(kPrefillWorkerHeader), g.prefill_url);
  }
}

// An answer to forward whole: a non-streamed one, or a worker refusing a stream. A retryable one
// (408, 429, 5xx) is kept for the retry loop instead.
net::awaitable<void> relay_whole(const GenerationParts& parts, Generation& g, Leg& leg,
                                 http::ClientResponse& head) {
  leg.dispatch.prefilled();
  std::string body = std::move(head.body);
  if (g.parsed.stream) body = co_await read_error_body(leg.conn());
  if (!g.parsed.stream && head.status == 200) leg.worker.liveness().note_progress();
  const bool room_late = g.decode_waits_for_room && head.status == 504;
  leg.dispatch.set(room_late ? Outcome::kCancelled : outcome_of_status(head.status));
  if (head.status == 200) note_usage(parts, g, leg, body);
  if (g.remember_answer && !g.parsed.stream && head.status == 200) {
    parts.answers->submit(std::string(g.req.body()), body, /*stream=*/false);
  }
  http::Response answer =
      forwarded(head.status, head, std::move(body), g.name_worker ? leg.worker.url() : "",
                g.name_worker ? leg.rank : std::nullopt);
  if (g.name_worker && !g.prefill_url.empty()) {
    answer.headers.emplace_back(std::string(kPrefillWorkerHeader), g.prefill_url);
  }
  leg.veto.watch(nullptr);
  parts.upstream.release(leg.worker.id(), std::move(leg.lease.conn));
  if (retryable_status(answer.status)) {
    leg.a.answer = std::move(answer);
    leg.a.retry = true;
    co_return;
  }
  co_await reply(g, std::move(answer));
  leg.a.done = true;
}

// The stream's observers: its usage and the usage event the gateway asked for, kept from the
// client (StreamEvents, which copies next to nothing), and a chat answer kept for the next turn
// (AnswerCapture, a copy: the answer is kept). What they copied and what went out are counted.
struct StreamObservers {
  explicit StreamObservers(bool strip_usage) : events(strip_usage) {}
  StreamEvents events;
  AnswerCapture said;
  uint64_t relayed = 0;
  uint64_t said_bytes = 0;
  void count(GatewayMetrics& metrics) const {
    metrics.stream_bytes(relayed, events.bytes_copied() + said_bytes);
  }
};

// Ends the client's stream with an error event: the worker failed mid-stream (`piece`'s error),
// the stream passed one of its bounds, or a veto cut it.
net::awaitable<void> end_with_error(const GenerationParts& parts, Generation& g, Leg& leg,
                                    const Status& failure, StreamEnd bound) {
  const std::optional<workers::VetoKind> veto = leg.veto.fired();
  const std::string why =
      veto ? veto_message(leg.worker, *veto)
      : bound != StreamEnd::kNone
          ? "worker " + leg.worker.url() + ": " + std::string(stream_end_reason(bound))
          : "the worker failed mid-stream: " + std::string(message_of(failure));
  leg.dispatch.set(veto                            ? Outcome::kCancelled
                   : bound == StreamEnd::kTooLarge ? Outcome::kServerError
                                                   : outcome_of_failure(failure));
  parts.metrics.error(veto == workers::VetoKind::kShutdown ? ErrorReason::kDraining
                      : veto                               ? ErrorReason::kWorkerVetoed
                      : bound == StreamEnd::kSilent        ? ErrorReason::kStreamSilent
                      : bound == StreamEnd::kDeadline      ? ErrorReason::kStreamDeadline
                      : bound == StreamEnd::kTooLarge      ? ErrorReason::kAnswerTooLarge
                                                           : ErrorReason::kUpstreamMidStream);
  KVGATE_LOG_EVERY_MS(proxy_log(), spdlog::level::warn, 1000, "stream from {} ended: {}",
                      leg.worker.url(), why);
  const bool shutdown = veto == workers::VetoKind::kShutdown;
  const std::string event = sse_error(why, shutdown ? 503 : 502);
  (void)co_await g.res.write_sse(event);
  (void)co_await g.res.finish();
  g.status = shutdown ? 503 : 502;
}

// The stream's end, with its last bytes when they arrived with it (an engine writes its last
// events and the end together): they and the terminator leave in one write.
net::awaitable<void> finish_stream(const GenerationParts& parts, Generation& g, Leg& leg,
                                   StreamObservers& seen, std::string_view out, bool had_bytes) {
  if (had_bytes) (void)co_await leg.conn().next_piece();  // the end, without a read
  note_usage(parts, g, leg, seen.events.usage());
  if (g.remember_answer) {
    if (std::optional<std::string> bytes = seen.said.take()) {
      parts.answers->submit(std::string(g.req.body()), std::move(*bytes), /*stream=*/true);
    }
  }
  const std::string_view rest = seen.events.rest();
  std::string joined;  // only for an unterminated last event (rare)
  if (!rest.empty()) joined.append(out).append(rest);
  const std::string_view last = rest.empty() ? out : std::string_view(joined);
  seen.relayed += last.size();
  leg.dispatch.set(Outcome::kSuccess);
  (void)co_await g.res.finish(last);
  leg.veto.watch(nullptr);
  parts.upstream.release(leg.worker.id(), std::move(leg.lease.conn));
}

// The stream from its first piece (already read) to its end, within its bounds.
net::awaitable<void> relay_pieces(const GenerationParts& parts, Generation& g, Leg& leg,
                                  Result<std::string_view>& piece) {
  // Progress is an event with data, not a byte (stream_guard.h).
  StreamGuard guard(g.start, parts.clock.now(), parts.config.request_timeout,
                    parts.config.stream_idle_timeout, parts.config.max_answer_bytes);
  if (guard.add(*piece, parts.clock.now())) leg.worker.liveness().note_progress();
  StreamObservers seen(g.strip_usage);
  const auto counted = [&] { seen.count(parts.metrics); };
  for (;;) {
    const StreamEnd bound = guard.check(parts.clock.now());
    if (bound != StreamEnd::kNone) {
      leg.conn().close();  // not read to its end: the engine stops, the connection is not reused
      piece = absl::DeadlineExceededError(std::string(stream_end_reason(bound)));
    }
    if (!piece.ok()) {
      co_await end_with_error(parts, g, leg, piece.status(), bound);
      counted();
      co_return;
    }
    std::string_view out;
    if (!piece->empty()) {
      if (g.remember_answer) {
        seen.said.add(*piece);
        seen.said_bytes += piece->size();
      }
      out = seen.events.feed(*piece);
    }
    if (piece->empty() || leg.conn().body_complete()) {
      co_await finish_stream(parts, g, leg, seen, out, !piece->empty());
      counted();
      co_return;
    }
    if (!out.empty() && !(co_await g.res.write(out)).ok()) {
      // The client went away: drop the upstream connection so the engine aborts the request.
      leg.conn().close();
      client_abort(parts, g, leg);
      counted();
      co_return;
    }
    seen.relayed += out.size();
    piece = co_await leg.conn().next_piece(guard.next_wait(parts.clock.now()));
    if (leg.watch.fired()) {
      client_abort(parts, g, leg);
      counted();
      co_return;
    }
    if (piece.ok() && guard.add(*piece, parts.clock.now())) leg.worker.liveness().note_progress();
  }
}

// A stream: its first piece before anything reaches the client (engines send a stream's head at
// once and its first token after queueing and prefill, so until that token the request can still
// go elsewhere), then the client's head with that piece, then the rest.
net::awaitable<void> relay_stream(const GenerationParts& parts, Generation& g, Leg& leg,
                                  const http::ClientResponse& head) {
  auto piece = co_await leg.conn().next_piece(parts.config.first_byte_timeout);
  if (leg.watch.fired()) {
    client_abort(parts, g, leg);
    co_return;
  }
  if (leg.veto.fired()) {
    vetoed(parts, leg.dispatch, leg.veto, leg.worker, leg.a);
    co_return;
  }
  if (!piece.ok()) {
    leg.a.failure = piece.status();
    leg.a.retry = !absl::IsDeadlineExceeded(piece.status());
    leg.dispatch.set(outcome_of_failure(piece.status()));
    co_return;
  }
  // From here on bytes reach the client: no more retries.
  leg.dispatch.prefilled();
  leg.a.done = true;
  leg.veto.client_started();
  const std::string_view ct = head.header("content-type");
  // (Built outside the co_await: g++ 12 miscompiles initializer lists inside one.) An SSE stream
  // must reach the client piece by piece: no-cache, and no buffering by an nginx in front
  // (X-Accel-Buffering).
  std::vector<http::Header> stream_headers = {{"cache-control", "no-cache"},
                                              {"x-accel-buffering", "no"},
                                              {std::string(kRequestIdHeader), g.request_id}};
  if (g.name_worker) name_worker(g, leg, stream_headers);
  if (g.explain) stream_headers.emplace_back(std::string(kDecisionHeader), g.decision);
  // The head is held and leaves with the first piece, in one write.
  const Status started = co_await g.res.start_stream(200, ct.empty() ? "text/event-stream" : ct,
                                                     stream_headers, /*hold=*/true);
  if (!started.ok()) {
    leg.conn().close();
    client_abort(parts, g, leg);
    co_return;
  }
  g.status = 200;
  g.first_token_at = parts.clock.now();
  if (g.ticket != nullptr) g.ticket->prefill_done();
  const double ttft = to_seconds(*g.first_token_at - g.start);
  parts.metrics.ttft(ttft);
  g.record.ttft_ms = ttft * 1e3;
  co_await relay_pieces(parts, g, leg, piece);
}

}  // namespace

// The worker's answer: a stream answered with something else than SSE fails the attempt (the
// worker is broken, or not an engine: counted against its breaker now, and the request goes
// elsewhere); a whole answer is forwarded; a stream relayed.
net::awaitable<void> relay(const GenerationParts& parts, Generation& g, Leg& leg,
                           http::ClientResponse& head) {
  const std::string_view ct = head.header("content-type");
  if (g.parsed.stream && head.status == 200 && !is_event_stream(ct)) {
    leg.conn().close();
    parts.metrics.error(ErrorReason::kNotEventStream);
    leg.a.failure = absl::UnavailableError("worker " + leg.worker.url() +
                                           " answered a streamed request with content type '" +
                                           std::string(ct) + "', not text/event-stream");
    leg.a.retry = true;
    leg.dispatch.set(Outcome::kServerError);
    co_return;
  }
  if (!g.parsed.stream || head.status != 200) {
    co_await relay_whole(parts, g, leg, head);
  } else {
    co_await relay_stream(parts, g, leg, head);
  }
}

}  // namespace kvgate::app
