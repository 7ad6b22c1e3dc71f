#include "http/detail/quick_head.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "boost/beast/http/verb.hpp"
#include "http/detail/framing.h"
#include "http/detail/token_chars.h"
#include "http/detail/words.h"

namespace kvgate::http::detail {
namespace {

// A field value's bytes here: visible ASCII, space and tab (no obs-text, no control).
constexpr std::array<bool, 256> kValue = [] {
  std::array<bool, 256> t{};
  for (unsigned c = 0x20; c <= 0x7e; ++c) t[c] = true;
  t['\t'] = true;
  return t;
}();

bool is(unsigned char c, const std::array<bool, 256>& table) { return table[c]; }

// Whether all eight bytes of `w` are visible ASCII or space (0x20-0x7e), the bulk of a field
// value, tested at once. No step carries or borrows across a byte: the first test leaves only
// bytes below 0x80, which +1 keeps below 0x100, and with every high bit set -0x20 cannot borrow.
bool all_visible(uint64_t w) {
  if ((w & kHighBits) != 0) return false;                // a byte of 0x80 or more
  if (((w + kEachByte) & kHighBits) != 0) return false;  // a 0x7f
  // Every byte 0x20 or more: each high bit survives the subtraction.
  return (((w | kHighBits) - kEachByte * 0x20) & kHighBits) == kHighBits;
}

// Past the value bytes (kValue) from `p`; `end` bounds the eight-byte steps, not the last bytes.
const char* skip_value(const char* p, const char* end) {
  while (end - p >= 8 && all_visible(load_word(p))) p += 8;
  while (is(*p, kValue)) ++p;
  return p;
}

// Whether a token `name` is `lower` without regard to case. `lower` is lower-case letters and '-';
// for a token, c | 0x20 equals such a character only when c is that character in either case.
bool name_is(std::string_view name, std::string_view lower) {
  if (name.size() != lower.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if ((static_cast<unsigned char>(name[i]) | 0x20) != static_cast<unsigned char>(lower[i])) {
      return false;
    }
  }
  return true;
}

// The field lines from `p` up to the head's blank line at `blank`, added to `fields` only when
// all of them have the shape (one copy of their bytes); the Content-Length's value (at most one)
// in `*length`, -1 if there is none; the number of Host fields (at most one, of a valid value) in
// `*hosts`.
bool parse_fields(const char* p, const char* blank, FieldList* fields, int64_t* length,
                  size_t* hosts) {
  *length = -1;
  *hosts = 0;
  // Not a std::array, which would construct (zero) all kMaxQuickFields of them on every call.
  absl::InlinedVector<FieldList::Field, kMaxQuickFields> found;
  const char* const block = p;
  while (p < blank) {
    if (found.size() == kMaxQuickFields) return false;
    const char* const name_start = p;
    while (is(*p, kToken)) ++p;
    if (p == name_start || *p != ':') return false;
    const std::string_view name(name_start, p - name_start);
    ++p;
    while (*p == ' ' || *p == '\t') ++p;
    const char* const value_start = p;
    p = skip_value(p, blank);
    if (p[0] != '\r' || p[1] != '\n') return false;
    const char* value_end = p;
    while (value_end > value_start && (value_end[-1] == ' ' || value_end[-1] == '\t')) --value_end;
    p += 2;
    const std::string_view value(value_start, value_end - value_start);
    switch (name.size()) {
      case 4:
        if (name_is(name, "host") && (++*hosts > 1 || !valid_host(value))) return false;
        break;
      case 6:
        if (name_is(name, "expect")) return false;
        break;
      case 7:
        if (name_is(name, "upgrade")) return false;
        break;
      case 10:
        if (name_is(name, "connection")) return false;
        break;
      case 14:
        if (name_is(name, "content-length")) {
          if (*length >= 0 || value.empty() || value.size() > 18) return false;
          int64_t n = 0;
          for (char c : value) {
            if (c < '0' || c > '9') return false;
            n = n * 10 + (c - '0');
          }
          *length = n;
        }
        break;
      case 16:
        if (name_is(name, "proxy-connection")) return false;
        break;
      case 17:
        if (name_is(name, "transfer-encoding")) return false;
        break;
      default:
        break;
    }
    found.push_back({.name = name, .value = value});
  }
  if (p != blank) return false;
  fields->add_all(std::string_view(block, p - block), found);
  return true;
}

// Where the head ends (after its blank line) within the first `header_limit` bytes; 0 if it does
// not. memchr from one CR to the next: a head has a few, and glibc's memmem cost about 500
// instructions on a short head where this costs about 100 (callgrind).
size_t head_end(std::string_view bytes, size_t header_limit) {
  const char* const begin = bytes.data();
  const char* const end = begin + std::min(bytes.size(), header_limit);
  for (const char* p = begin; end - p >= 4; ++p) {
    p = static_cast<const char*>(std::memchr(p, '\r', end - p - 3));
    if (p == nullptr) return 0;
    if (p[1] == '\n' && p[2] == '\r' && p[3] == '\n') return p - begin + 4;
  }
  return 0;
}

// The fields and the body after a start line ending at `line_end` (just past its CRLF); false
// (with `fields` as it was) for anything out of the shape.
bool finish(std::string_view bytes, size_t head_size, const char* line_end, bool request,
            uint64_t body_limit, QuickHead* head, FieldList* fields) {
  const size_t fields_before = fields->size();
  int64_t length = -1;
  size_t hosts = 0;
  const char* const blank = bytes.data() + head_size - 2;
  if (line_end > blank || !parse_fields(line_end, blank, fields, &length, &hosts)) return false;
  // A request has exactly one Host (framing.h refuses any other); an answer, a Content-Length.
  if ((request && hosts != 1) || (length < 0 && !request) ||
      static_cast<uint64_t>(std::max<int64_t>(length, 0)) >
          std::min<uint64_t>(body_limit, bytes.size() - head_size)) {
    fields->truncate(fields_before);
    return false;
  }
  head->head_size = head_size;
  head->body = bytes.substr(head_size, static_cast<size_t>(std::max<int64_t>(length, 0)));
  return true;
}

constexpr std::string_view kVersion = "HTTP/1.1";

}  // namespace

bool quick_parse_request(std::string_view bytes, size_t header_limit, uint64_t body_limit,
                         QuickHead* head, FieldList* fields) {
  const size_t head_size = head_end(bytes, header_limit);
  if (head_size == 0) return false;
  // method SP target SP HTTP/1.1 CRLF; the head's blank line bounds every scan below.
  const char* p = bytes.data();
  const char* const method_start = p;
  while (is(*p, kToken)) ++p;
  if (p == method_start || *p != ' ') return false;
  const std::string_view method(method_start, p - method_start);
  ++p;
  const char* const target_start = p;
  while (static_cast<unsigned char>(*p) > 0x20 && static_cast<unsigned char>(*p) < 0x7f) ++p;
  if (p == target_start || *p != ' ') return false;
  const std::string_view target(target_start, p - target_start);
  ++p;
  const char* const head_last = bytes.data() + head_size;
  if (head_last - p < static_cast<ptrdiff_t>(kVersion.size() + 2) ||
      std::string_view(p, kVersion.size() + 2) != "HTTP/1.1\r\n") {
    return false;
  }
  const Verb verb = boost::beast::http::string_to_verb(method);
  if (verb == Verb::unknown) return false;
  if (!finish(bytes, head_size, p + kVersion.size() + 2, /*request=*/true, body_limit, head,
              fields)) {
    return false;
  }
  head->method = verb;
  head->target = target;
  return true;
}

bool quick_parse_response(std::string_view bytes, size_t header_limit, uint64_t body_limit,
                          QuickHead* head, FieldList* fields) {
  const size_t head_size = head_end(bytes, header_limit);
  if (head_size == 0) return false;
  // HTTP/1.1 SP 3DIGIT SP reason CRLF
  const char* p = bytes.data();
  if (head_size < kVersion.size() + 1 || std::string_view(p, kVersion.size() + 1) != "HTTP/1.1 ") {
    return false;
  }
  p += kVersion.size() + 1;
  unsigned status = 0;
  for (int i = 0; i < 3; ++i, ++p) {
    if (*p < '0' || *p > '9') return false;
    status = status * 10 + (*p - '0');
  }
  if (*p != ' ' || status < 200 || status > 599 || status == 204 || status == 304) return false;
  ++p;
  while (is(*p, kValue)) ++p;
  if (p[0] != '\r' || p[1] != '\n') return false;
  if (!finish(bytes, head_size, p + 2, /*request=*/false, body_limit, head, fields)) {
    return false;
  }
  head->status = status;
  return true;
}

}  // namespace kvgate::http::detail
