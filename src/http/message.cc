#include "kvgate/http/message.h"

#include <algorithm>
#include <random>

#include "http/detail/token_chars.h"
#include "kvgate/core/json_writer.h"

namespace kvgate::http {

std::string_view Request::path() const {
  std::string_view t = target();
  size_t q = t.find('?');
  return q == std::string_view::npos ? t : t.substr(0, q);
}

std::string_view Request::query() const {
  std::string_view t = target();
  size_t q = t.find('?');
  return q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
}

std::optional<std::string_view> Request::query_param(std::string_view key) const {
  std::string_view q = query();
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    size_t eq = part.find('=');
    std::string_view k = part.substr(0, eq);
    if (k == key) return eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

Response Response::json(unsigned status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response Response::text(unsigned status, std::string body, std::string content_type) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

Response Response::error(unsigned status, std::string_view message, std::string_view type) {
  if (type.empty()) type = error_type_for(status);
  Response r;
  r.status = status;
  JsonWriter w(&r.body);
  w.begin_object().key("error").begin_object();
  w.member("message", message).member("type", type);
  w.key("param").null();
  w.member("code", status);
  w.end_object().end_object();
  return r;
}

std::string_view error_type_for(unsigned status) {
  switch (status) {
    case 400:
    case 413:
    case 414:
    case 422:
    case 431:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 405:
      return "method_not_allowed";
    case 429:
      return "rate_limit_error";
    case 502:
    case 504:
      return "upstream_error";  // a worker failed or did not answer
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return detail::kToken[static_cast<unsigned char>(c)];
  });
}

std::string request_id_or_new(std::string_view given) {
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

}  // namespace kvgate::http
