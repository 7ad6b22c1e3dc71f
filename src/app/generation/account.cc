// The generation path's answers and its end: what the client is sent (with its request id, and
// the decision when told), and each request's metrics and access-log line.

#include "app/generation/stages.h"
#include "app/worker_exchange.h"

namespace kvgate::app {
namespace net = boost::asio;

std::string request_id_of(const http::Request& req) {
  // The server's id for it (client routes), else the client's or a new one (other front ends).
  if (!req.request_id.empty()) return req.request_id;
  return http::request_id_or_new(req.header(kRequestIdHeader));
}

net::awaitable<void> reply(Generation& g, http::Response r) {
  g.status = r.status;
  r.headers.emplace_back(std::string(kRequestIdHeader), g.request_id);
  if (g.explain && !g.decision.empty()) {
    r.headers.emplace_back(std::string(kDecisionHeader), g.decision);
  }
  (void)co_await g.res.send(std::move(r));  // a failed write is the client's loss, nothing to do
}

http::Response error_answer(const GenerationParts& parts, ErrorReason reason, unsigned status,
                            std::string_view message) {
  parts.metrics.error(reason);
  http::Response r = http::Response::error(status, message);
  if (status == 503) r.headers.emplace_back("retry-after", "1");
  return r;
}

void account(const GenerationParts& parts, Generation& g) {
  const unsigned status = g.status == 0 ? 500 : g.status;
  const double seconds = to_seconds(parts.clock.now() - g.start);
  const size_t model = parts.metrics.model_slot(g.parsed.model, g.fleet.get());
  parts.metrics.request_done(g.route, status, seconds, model);
  charge_output(parts, g);
  if (g.completion_tokens > 0) parts.metrics.completion_tokens(model, g.completion_tokens);
  if (!parts.access_log.enabled()) return;
  g.record.status = status;
  g.record.duration_ms = seconds * 1e3;
  g.record.worker = g.worker_url;
  g.record.prefill_worker = g.prefill_url;
  g.client = peer_address(g.req);  // (only when a line is written: it allocates)
  g.record.client = g.client;
  if (g.completion_tokens > 0)
    g.record.completion_tokens = static_cast<int64_t>(g.completion_tokens);
  parts.access_log.write(g.record);
}

}  // namespace kvgate::app
