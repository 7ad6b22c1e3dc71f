#include "app/cors.h"

#include <algorithm>

namespace kvgate::app {
namespace {

namespace net = boost::asio;

constexpr std::string_view kMethods = "GET, POST, DELETE, OPTIONS";
constexpr std::string_view kDefaultHeaders = "authorization, content-type, x-request-id";
constexpr std::string_view kExposed =
    "x-request-id, x-kvgate-worker, x-kvgate-dp-rank, x-kvgate-prefill-worker, "
    "x-kvgate-error-source";
constexpr std::string_view kMaxAgeSeconds = "600";

}  // namespace

Cors::Cors(std::vector<std::string> allowed_origins) : allowed_(std::move(allowed_origins)) {
  // An origin is scheme://host[:port] with no path: drop a trailing slash an operator typed.
  for (auto& o : allowed_) {
    while (!o.empty() && o.back() == '/') o.pop_back();
  }
  std::erase(allowed_, std::string());
  any_ = std::find(allowed_.begin(), allowed_.end(), "*") != allowed_.end();
}

bool Cors::allows(std::string_view origin) const {
  if (origin.empty()) return false;
  return any_ || std::find(allowed_.begin(), allowed_.end(), origin) != allowed_.end();
}

http::Handler Cors::wrap(http::Handler handler) const {
  if (!enabled()) return handler;
  return [this, handler = std::move(handler)](const http::Request& req,
                                              http::Responder& res) -> net::awaitable<void> {
    const std::string_view origin = req.header("origin");
    if (allows(origin)) {
      res.add_header("access-control-allow-origin", any_ ? "*" : std::string(origin));
      res.add_header("access-control-expose-headers", std::string(kExposed));
      res.add_header("vary", "Origin");
    }
    co_await handler(req, res);
  };
}

http::Response Cors::preflight(const http::Request& req) const {
  const std::string_view origin = req.header("origin");
  if (!allows(origin)) {
    return http::Response::error(
        403, "the origin '" + std::string(origin) + "' is not in --cors-allowed-origins");
  }
  http::Response r;
  r.status = 204;
  r.content_type = "text/plain";
  r.headers.emplace_back("access-control-allow-origin", any_ ? "*" : std::string(origin));
  r.headers.emplace_back("access-control-allow-methods", std::string(kMethods));
  const std::string_view asked = req.header("access-control-request-headers");
  r.headers.emplace_back("access-control-allow-headers",
                         std::string(asked.empty() ? kDefaultHeaders : asked));
  r.headers.emplace_back("access-control-max-age", std::string(kMaxAgeSeconds));
  r.headers.emplace_back("vary", "Origin");
  return r;
}

}  // namespace kvgate::app
