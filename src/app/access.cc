#include "app/access.h"

#include <cstdint>

namespace kvgate::app {
namespace net = boost::asio;

bool constant_time_equals(std::string_view a, std::string_view b) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  uint8_t diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    const uint8_t y = i < b.size() ? static_cast<uint8_t>(b[i]) : 0;
    diff |= static_cast<uint8_t>(x ^ y);
  }
  return diff == 0;
}

std::string_view bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kScheme[i]) return {};
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

namespace {

bool from_loopback_address(const http::Request& req) {
  const net::ip::address a = req.remote.address();
  if (a.is_v4()) return a.to_v4() == net::ip::address_v4::loopback();
  const net::ip::address_v6 v6 = a.to_v6();
  if (v6.is_v4_mapped()) {
    return net::ip::make_address_v4(net::ip::v4_mapped, v6) == net::ip::address_v4::loopback();
  }
  return v6.is_loopback();
}

http::Response unauthorized(std::string_view message) {
  http::Response r = http::Response::error(401, message, "invalid_request_error");
  r.headers.emplace_back("www-authenticate", "Bearer");
  return r;
}

}  // namespace

std::optional<http::Response> AccessGuard::check(Access access, const http::Request& req) const {
  const Keys& keys = keys_.get();
  switch (access) {
    case Access::kOpen:
      return std::nullopt;
    case Access::kClient: {
      if (keys.api.empty() && !keys.table) return std::nullopt;
      const std::string_view token = bearer_token(req.header("authorization"));
      if (token.empty()) {
        return unauthorized(
            "You didn't provide an API key. Send it as \"Authorization: Bearer <key>\".");
      }
      const bool known = (!keys.api.empty() && constant_time_equals(token, keys.api)) ||
                         (keys.table && keys.table->find(token) != nullptr);
      if (!known) return unauthorized("Incorrect API key provided.");
      return std::nullopt;
    }
    case Access::kControl: {
      if (keys.admin.empty()) {
        if (from_loopback_address(req)) return std::nullopt;
        return http::Response::error(
            403,
            "control routes answer only on this host (127.0.0.1 or ::1) unless kvgate runs with "
            "--admin-api-key",
            "permission_error");
      }
      const std::string_view token = bearer_token(req.header("authorization"));
      if (token.empty() || !constant_time_equals(token, keys.admin)) {
        return unauthorized(
            "This route needs the admin API key (--admin-api-key) as a Bearer token.");
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

AccessGuard::Caller AccessGuard::caller(const http::Request& req) const {
  const Keys& keys = keys_.get();
  if (!keys.table) return {};
  const std::string_view token = bearer_token(req.header("authorization"));
  if (token.empty()) return {};
  return {.table = keys.table, .entry = keys.table->find(token)};
}

http::Handler AccessGuard::wrap(Access access, http::Handler handler) const {
  if (access == Access::kOpen) return handler;
  return [this, access, handler = std::move(handler)](
             const http::Request& req, http::Responder& res) -> net::awaitable<void> {
    std::optional<http::Response> refusal = check(access, req);
    if (refusal) {
      (void)co_await res.send(std::move(*refusal));
      co_return;
    }
    co_await handler(req, res);
  };
}

}  // namespace kvgate::app
