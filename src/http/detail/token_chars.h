// RFC 9110's tchar, as a table: what a field name or a method is made of. The quick parser scans
// names with it; http::is_token() checks a whole name.
#pragma once

#include <array>
#include <string_view>

namespace kvgate::http::detail {

inline constexpr std::array<bool, 256> kToken = [] {
  std::array<bool, 256> t{};
  for (unsigned c = '0'; c <= '9'; ++c) t[c] = true;
  for (unsigned c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (unsigned c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (unsigned char c : std::string_view("!#$%&'*+-.^_`|~")) t[c] = true;
  return t;
}();

}  // namespace kvgate::http::detail
