#include "app/worker_exchange.h"

namespace kvgate::app {
namespace {

constexpr size_t kMaxHops = 8;

}  // namespace

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

}  // namespace kvgate::app
