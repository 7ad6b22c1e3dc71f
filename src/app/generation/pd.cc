// Prefill/decode disaggregation, SGLang's protocol: the request goes to a prefill worker and a
// decode worker at once, both bodies carrying bootstrap_host and bootstrap_port (the prefill's)
// and a fresh random bootstrap_room; the decode fetches the room's KV cache from the prefill and
// generates. The client gets the decode's answer (relayed as any attempt's); the prefill's is read
// to its end here and checked. A prefill that fails cuts the decode (which would otherwise wait
// for a room that never comes) and the pair is retried, the prefill held to blame; a decode that
// fails cuts the prefill.
#include <random>

#include "app/cache_report.h"
#include "app/generation/stages.h"
#include "app/worker_exchange.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"

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

// `body` (a JSON object) with the bootstrap fields first.
std::string with_bootstrap(std::string_view body, std::string_view host, uint16_t port,
                           uint64_t room) {
  std::string fields;
  JsonWriter w(&fields);
  w.begin_object().member("bootstrap_host", host);
  if (port != 0) {
    w.member("bootstrap_port", static_cast<uint64_t>(port));
  } else {
    w.key("bootstrap_port").null();
  }
  w.member("bootstrap_room", room).end_object();
  const size_t open = body.find('{');
  std::string out;
  out.reserve(body.size() + fields.size());
  out.append(fields, 0, fields.size() - 1);  // without its closing brace
  const std::string_view rest = body.substr(open + 1);
  const bool empty = rest.find_first_not_of(" \t\r\n") == std::string_view::npos ||
                     rest[rest.find_first_not_of(" \t\r\n")] == '}';
  if (!empty) out.push_back(',');
  out.append(rest);
  return out;
}

// Whether an SSE stream's bytes hold an error event (an engine that failed mid-stream).
bool has_error_event(std::string_view bytes) {
  return bytes.find("data: {\"error\"") != std::string_view::npos ||
         bytes.find("data:{\"error\"") != std::string_view::npos;
}

// The prefill side of one pair: its own exchange, on the request's executor, beside the decode's
// attempt. `finished` is cancelled when it ends, so the attempt's side can wait for it.
struct PrefillSide {
  explicit PrefillSide(const net::any_io_executor& ex) : finished(ex) {
    finished.expires_at(net::steady_timer::time_point::max());
  }
  bool done = false;
  Status failure;                    // OK: the prefill answered and its answer ended cleanly
  http::Connection* conn = nullptr;  // while its exchange runs: cut it when the decode fails
  net::steady_timer finished;
};

// The prefill's exchange: the request sent, its answer read to the end and checked. On failure,
// the decode's connection (the attempt's, in g.live_upstream) is cut.
net::awaitable<void> run_prefill(const GenerationParts& parts, Generation& g,
                                 std::shared_ptr<workers::Worker> worker, policy::Decision d,
                                 http::ClientRequest request, PrefillSide& side) {
  const std::optional<DpRank> rank =
      d.rank >= 0 ? std::optional<DpRank>(static_cast<DpRank>(d.rank)) : std::nullopt;
  request.headers[0].second = authorization_for(g.req, *worker, parts.config);
  request.headers[1].second = rank ? std::to_string(*rank) : std::string();
  Dispatch dispatch(*worker, parts.policy, g.route_request, g.parsed.stream, rank,
                    g.parsed.tokens.size());
  Status failure;
  auto lease = co_await parts.upstream.acquire(*worker, UpstreamPool::Source::kPooled);
  if (!lease.ok()) {
    worker->liveness().note_connect_failed();
    failure = lease.status();
    dispatch.set(Outcome::kConnectFailed);
  } else {
    side.conn = lease->conn.get();
    auto head = co_await side.conn->start_streaming(request, parts.config.first_byte_timeout);
    bool error_event = false;
    for (;;) {
      if (!head.ok()) break;
      auto piece = co_await side.conn->next_piece(parts.config.stream_idle_timeout);
      if (!piece.ok()) {
        head = piece.status();
        break;
      }
      if (piece->empty()) break;
      error_event |= has_error_event(*piece);
    }
    side.conn = nullptr;
    if (!head.ok()) {
      failure = head.status();
      dispatch.set(outcome_of_failure(failure));
    } else if (head->status != 200 || error_event) {
      failure =
          absl::UnavailableError("the prefill worker answered " + std::to_string(head->status) +
                                 (error_event ? " with an error event" : ""));
      dispatch.set(head->status != 200 ? outcome_of_status(head->status) : Outcome::kServerError);
    } else {
      worker->liveness().note_contact();
      dispatch.prefilled();
      dispatch.set(Outcome::kSuccess);
      parts.upstream.release(worker->id(), std::move(lease->conn));
    }
  }
  if (!failure.ok()) {
    parts.metrics.pd_prefill_failed();
    KVGATE_LOG_EVERY_MS(pd_log(), spdlog::level::warn, 1000, "prefill on {} failed: {}",
                        worker->url(), message_of(failure));
    // The decode waits for a room that will never come: cut it.
    if (g.live_upstream != nullptr) g.live_upstream->close();
  }
  side.failure = std::move(failure);
  side.done = true;
  side.finished.cancel();
}

}  // namespace

net::awaitable<Attempt> pd_attempt(const GenerationParts& parts, Generation& g,
                                   std::shared_ptr<workers::Worker> prefill,
                                   const policy::Decision& prefill_decision,
                                   workers::Worker& decode, const policy::Decision& d,
                                   bool* prefill_failed) {
  parts.metrics.pd_pair();
  const std::shared_ptr<const workers::WorkerInfo> info = prefill->info();
  const std::string body =
      with_bootstrap(g.req.body(), prefill->host(), info->bootstrap_port, fresh_room());
  g.upstream.body = body;
  g.upstream.body_view = {};
  const net::any_io_executor executor = co_await net::this_coro::executor;
  PrefillSide side(executor);
  net::co_spawn(executor,
                run_prefill(parts, g, std::move(prefill), prefill_decision, g.upstream, side),
                net::detached);
  Attempt a = co_await attempt(parts, g, decode, d);
  if (!side.done && !a.done && side.conn != nullptr) side.conn->close();  // the decode failed
  if (!side.done) {
    boost::system::error_code ec;
    co_await side.finished.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  *prefill_failed = !side.failure.ok();
  if (*prefill_failed && !a.done) {
    a.failure = side.failure;
    a.answer.reset();
    a.retry = true;
  }
  co_return a;
}

}  // namespace kvgate::app
