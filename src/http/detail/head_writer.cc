#include "http/detail/head_writer.h"

#include <charconv>
#include <cstdint>
#include <cstring>

#include "boost/beast/core/string.hpp"
#include "boost/beast/http/status.hpp"
#include "http/detail/words.h"

namespace kvgate::http::detail {
namespace {

// A head is written in one pass through a cursor into room made beforehand for its longest form
// (then cut to what was written): per piece one memcpy, where appending to the string checked its
// capacity and called memcpy for each of a field's four pieces, about a third of writing a head
// (callgrind).
class Cursor {
 public:
  explicit Cursor(char* at) : at_(at) {}
  void put(std::string_view s) {
    if (s.empty()) return;  // an empty view may have no data pointer, which memcpy must not get
    std::memcpy(at_, s.data(), s.size());
    at_ += s.size();
  }
  void field(std::string_view name, std::string_view value) {
    put(name);
    put(": ");
    put(value);
    put("\r\n");
  }
  void number(size_t n) { at_ = std::to_chars(at_, at_ + kNumberRoom, n).ptr; }
  char* at() const { return at_; }

  static constexpr size_t kNumberRoom = 20;  // the digits of the largest size_t
  static constexpr size_t kFieldExtra = 4;   // ": " and CRLF

 private:
  char* at_;
};

// Whether `s` holds CR or LF, tested a word at a time (a zero byte after XOR with each; exact for
// "any byte", which is all this asks): a string of 4 bytes or more as words that may overlap, so
// no byte loop runs for the tail. Names and values are mostly short, where two memchr calls each
// cost more than this whole test.
bool splits_head(std::string_view s) {
  const auto holds = [](uint64_t w) { return (has_byte(w, '\r') | has_byte(w, '\n')) != 0; };
  const char* const p = s.data();
  const size_t n = s.size();
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (holds(load_word(p + i))) return true;
    }
    return holds(load_word(p + n - 8));
  }
  if (n >= 4) {
    uint32_t head;
    uint32_t tail;
    std::memcpy(&head, p, 4);
    std::memcpy(&tail, p + n - 4, 4);
    return holds(uint64_t{head} << 32 | tail);
  }
  for (size_t i = 0; i < n; ++i) {
    if (p[i] == '\r' || p[i] == '\n') return true;
  }
  return false;
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

// The room every field of `headers` takes at most.
size_t fields_room(std::span<const Header> headers) {
  size_t n = 0;
  for (const auto& [k, v] : headers) n += k.size() + v.size() + Cursor::kFieldExtra;
  return n;
}

// `headers` then `added`, each name once (its last value), none that would split the head.
void put_fields(Cursor& out, std::span<const Header> headers, std::span<const Header> added,
                bool skip_empty) {
  for (size_t i = 0; i < headers.size(); ++i) {
    const auto& [k, v] = headers[i];
    if ((skip_empty && v.empty()) || splits_head(k) || splits_head(v)) continue;
    if (given_later(k, headers, i, added)) continue;
    out.field(k, v);
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const auto& [k, v] = added[i];
    if ((skip_empty && v.empty()) || splits_head(k) || splits_head(v)) continue;
    if (given_later(k, added, i, {})) continue;
    out.field(k, v);
  }
}

// Grows `out` by `room`, hands a cursor at the old end to `write`, and cuts `out` to what it
// wrote.
template <typename Write>
void append_within(std::string& out, size_t room, const Write& write) {
  const size_t at = out.size();
  out.resize(at + room);
  Cursor cursor(out.data() + at);
  write(cursor);
  out.resize(static_cast<size_t>(cursor.at() - out.data()));
}

}  // namespace

bool status_has_no_body(unsigned status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

void append_response_head(std::string& out, unsigned status, std::string_view server,
                          std::string_view content_type, std::span<const Header> headers,
                          std::span<const Header> added, bool keep_alive,
                          std::optional<size_t> content_length) {
  std::string_view reason =
      boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
  if (reason.empty()) reason = "Unknown";
  constexpr std::string_view kChunked = "Transfer-Encoding: chunked\r\n";
  constexpr std::string_view kClose = "Connection: close\r\n";
  const size_t room = std::string_view("HTTP/1.1  \r\n").size() + Cursor::kNumberRoom +
                      reason.size() + std::string_view("Server").size() + server.size() +
                      std::string_view("Content-Type").size() + content_type.size() +
                      2 * Cursor::kFieldExtra + fields_room(headers) + fields_room(added) +
                      std::string_view("Content-Length: \r\n").size() + Cursor::kNumberRoom +
                      kChunked.size() + kClose.size() + 2;
  append_within(out, room, [&](Cursor& c) {
    c.put("HTTP/1.1 ");
    c.number(status);
    c.put(" ");
    c.put(reason);
    c.put("\r\n");
    if (!server.empty()) c.field("Server", server);
    if (!content_type.empty() && !splits_head(content_type) &&
        !given("content-type", headers, added)) {
      c.field("Content-Type", content_type);
    }
    put_fields(c, headers, added, /*skip_empty=*/false);
    if (!status_has_no_body(status)) {
      if (content_length) {
        c.put("Content-Length: ");
        c.number(*content_length);
        c.put("\r\n");
      } else {
        c.put(kChunked);
      }
    }
    if (!keep_alive) c.put(kClose);
    c.put("\r\n");
  });
}

void append_request_head(std::string& out, Verb method, std::string_view target,
                         std::string_view host, std::string_view user_agent,
                         std::string_view content_type, std::span<const Header> headers,
                         size_t content_length, bool send_length) {
  const std::string_view verb = boost::beast::http::to_string(method);
  const size_t room = verb.size() + target.size() + std::string_view("  HTTP/1.1\r\n").size() +
                      std::string_view("Host").size() + host.size() +
                      std::string_view("User-Agent").size() + user_agent.size() +
                      std::string_view("Content-Type").size() + content_type.size() +
                      3 * Cursor::kFieldExtra + fields_room(headers) +
                      std::string_view("Content-Length: \r\n").size() + Cursor::kNumberRoom + 2;
  append_within(out, room, [&](Cursor& c) {
    c.put(verb);
    c.put(" ");
    c.put(target);
    c.put(" HTTP/1.1\r\n");
    c.field("Host", host);
    if (!user_agent.empty()) c.field("User-Agent", user_agent);
    if (!content_type.empty() && !given("content-type", headers, {})) {
      c.field("Content-Type", content_type);
    }
    put_fields(c, headers, {}, /*skip_empty=*/true);
    if (send_length) {
      c.put("Content-Length: ");
      c.number(content_length);
      c.put("\r\n");
    }
    c.put("\r\n");
  });
}

}  // namespace kvgate::http::detail
