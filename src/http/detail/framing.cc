#include "http/detail/framing.h"

#include <algorithm>
#include <array>
#include <cstddef>

#include "boost/beast/core/string.hpp"
#include "http/detail/token_chars.h"

namespace kvgate::http::detail {
namespace {

// A Host value's bytes: RFC 3986's host (reg-name, IPv4, [IPv6]) and ":" port. Nothing a parser
// could read as a second value or a path.
constexpr std::array<bool, 256> kHostChars = [] {
  std::array<bool, 256> t{};
  for (unsigned c = '0'; c <= '9'; ++c) t[c] = true;
  for (unsigned c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (unsigned c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (unsigned char c : std::string_view("-._~%!$&'()*+;=:[]")) t[c] = true;
  return t;
}();

bool only(std::string_view s, const std::array<bool, 256>& table) {
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return table[static_cast<unsigned char>(c)]; });
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The codings of one Transfer-Encoding value, read as RFC 9112 §6.1 allows only one way.
std::optional<FramingRefusal> coding_refusal(std::string_view value) {
  size_t codings = 0;
  bool chunked_last = false;
  for (size_t start = 0; start <= value.size();) {
    size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view coding = trim_ows(value.substr(start, comma - start));
    start = comma + 1;
    if (coding.empty() || !only(coding, kToken)) {
      return FramingRefusal{400, "malformed Transfer-Encoding"};
    }
    if (chunked_last) {
      return FramingRefusal{400, "Transfer-Encoding names a coding after chunked"};
    }
    chunked_last = boost::beast::iequals(coding, "chunked");
    ++codings;
  }
  if (!chunked_last) {
    return FramingRefusal{400, "Transfer-Encoding whose last coding is not chunked"};
  }
  if (codings > 1) {
    return FramingRefusal{501, "transfer codings other than chunked are not implemented"};
  }
  return std::nullopt;
}

}  // namespace

bool valid_host(std::string_view value) { return only(value, kHostChars); }

std::optional<FramingRefusal> request_framing_refusal(const FieldList& fields, unsigned version) {
  size_t hosts = 0;
  size_t lengths = 0;
  size_t encodings = 0;
  std::string_view encoding;
  for (size_t i = 0; i < fields.size(); ++i) {
    const FieldList::Field f = fields[i];
    if (boost::beast::iequals(f.name, "host")) {
      ++hosts;
      if (!valid_host(f.value)) return FramingRefusal{400, "malformed Host field"};
    } else if (boost::beast::iequals(f.name, "content-length")) {
      ++lengths;
      if (!is_digits(f.value)) return FramingRefusal{400, "malformed Content-Length"};
    } else if (boost::beast::iequals(f.name, "transfer-encoding")) {
      ++encodings;
      encoding = f.value;
    }
  }
  if (hosts > 1) return FramingRefusal{400, "more than one Host field"};
  if (hosts == 0 && version >= 11) return FramingRefusal{400, "an HTTP/1.1 request needs a Host"};
  if (lengths > 1) return FramingRefusal{400, "more than one Content-Length field"};
  if (encodings == 0) return std::nullopt;
  if (encodings > 1) return FramingRefusal{400, "more than one Transfer-Encoding field"};
  if (version < 11) return FramingRefusal{400, "Transfer-Encoding in an HTTP/1.0 request"};
  if (lengths > 0) return FramingRefusal{400, "both Transfer-Encoding and Content-Length"};
  return coding_refusal(encoding);
}

}  // namespace kvgate::http::detail
