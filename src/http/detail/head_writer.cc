#include "http/detail/head_writer.h"

#include <charconv>
#include <cstring>

#include "boost/beast/core/string.hpp"
#include "boost/beast/http/status.hpp"

namespace kvgate::http::detail {
namespace {

// Two memchr scans: find_first_of("\r\n") instead calls memchr on the two-character set once per
// character of `s`, which measured as the largest libc cost of writing a head.
// (An empty view may have no data pointer, which memchr must not be given.)
bool splits_head(std::string_view s) {
  return !s.empty() && (std::memchr(s.data(), '\r', s.size()) != nullptr ||
                        std::memchr(s.data(), '\n', s.size()) != nullptr);
}

void append_number(std::string& out, size_t n) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, end);
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

// Whether `name` is given again later: in `headers` after index i, or in `added`.
bool given_later(std::string_view name, std::span<const Header> headers, size_t i,
                 std::span<const Header> added) {
  for (size_t j = i + 1; j < headers.size(); ++j) {
    if (boost::beast::iequals(headers[j].first, name)) return true;
  }
  for (const Header& h : added) {
    if (boost::beast::iequals(h.first, name)) return true;
  }
  return false;
}

bool given(std::string_view name, std::span<const Header> headers, std::span<const Header> added) {
  for (const Header& h : headers) {
    if (boost::beast::iequals(h.first, name)) return true;
  }
  for (const Header& h : added) {
    if (boost::beast::iequals(h.first, name)) return true;
  }
  return false;
}

// `headers` then `added`, each name once (its last value), none that would split the head.
void append_fields(std::string& out, std::span<const Header> headers, std::span<const Header> added,
                   bool skip_empty) {
  for (size_t i = 0; i < headers.size(); ++i) {
    const auto& [k, v] = headers[i];
    if ((skip_empty && v.empty()) || splits_head(k) || splits_head(v)) continue;
    if (given_later(k, headers, i, added)) continue;
    append_field(out, k, v);
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const auto& [k, v] = added[i];
    if ((skip_empty && v.empty()) || splits_head(k) || splits_head(v)) continue;
    if (given_later(k, added, i, {})) continue;
    append_field(out, k, v);
  }
}

}  // namespace

bool status_has_no_body(unsigned status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

void append_response_head(std::string& out, unsigned status, std::string_view server,
                          std::string_view content_type, std::span<const Header> headers,
                          std::span<const Header> added, bool keep_alive,
                          std::optional<size_t> content_length) {
  out.append("HTTP/1.1 ");
  append_number(out, status);
  out.push_back(' ');
  const std::string_view reason =
      boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
  out.append(reason.empty() ? std::string_view("Unknown") : reason).append("\r\n");
  if (!server.empty()) append_field(out, "Server", server);
  if (!content_type.empty() && !splits_head(content_type) &&
      !given("content-type", headers, added)) {
    append_field(out, "Content-Type", content_type);
  }
  append_fields(out, headers, added, /*skip_empty=*/false);
  if (!status_has_no_body(status)) {
    if (content_length) {
      out.append("Content-Length: ");
      append_number(out, *content_length);
      out.append("\r\n");
    } else {
      out.append("Transfer-Encoding: chunked\r\n");
    }
  }
  if (!keep_alive) out.append("Connection: close\r\n");
  out.append("\r\n");
}

void append_request_head(std::string& out, Verb method, std::string_view target,
                         std::string_view host, std::string_view user_agent,
                         std::string_view content_type, std::span<const Header> headers,
                         size_t content_length, bool send_length) {
  out.append(boost::beast::http::to_string(method)).push_back(' ');
  out.append(target).append(" HTTP/1.1\r\n");
  append_field(out, "Host", host);
  if (!user_agent.empty()) append_field(out, "User-Agent", user_agent);
  if (!content_type.empty() && !given("content-type", headers, {})) {
    append_field(out, "Content-Type", content_type);
  }
  append_fields(out, headers, {}, /*skip_empty=*/true);
  if (send_length) {
    out.append("Content-Length: ");
    append_number(out, content_length);
    out.append("\r\n");
  }
  out.append("\r\n");
}

}  // namespace kvgate::http::detail
