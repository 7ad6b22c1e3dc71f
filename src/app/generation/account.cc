// The generation path's answers and its end: what the client is sent (with its request id, and
// the decision when told), and each request's metrics and access-log line.
#include <algorithm>
#include <random>

#include "app/generation/stages.h"
#include "app/worker_exchange.h"

namespace kvgate::app {
namespace net = boost::asio;

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
  parts.metrics.request_done(g.route, status, seconds);
  charge_output(parts, g);
  if (!parts.access_log.enabled()) return;
  g.record.status = status;
  g.record.duration_ms = seconds * 1e3;
  g.record.worker = g.worker_url;
  g.record.prefill_worker = g.prefill_url;
  parts.access_log.write(g.record);
}

}  // namespace kvgate::app
