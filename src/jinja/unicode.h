// UTF-8 and the character questions Python's str answers (jinja2 runs on Python strings, which
// count, index and slice by code point): whitespace, printability for repr(), case mapping and
// the is*() classes. Strings here are valid UTF-8 (the JSON parser and the lexer check).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvgate/core/utf8.h"

namespace kvgate::jinja {

// The code point starting at s[*i]; advances *i past it.
inline char32_t decode_at(std::string_view s, size_t* i) {
  const auto b = static_cast<unsigned char>(s[*i]);
  if (b < 0x80) {
    *i += 1;
    return b;
  }
  auto cont = [&](size_t k) { return static_cast<unsigned char>(s[*i + k]) & 0x3Fu; };
  char32_t c;
  if (b < 0xE0) {
    c = ((b & 0x1Fu) << 6) | cont(1);
    *i += 2;
  } else if (b < 0xF0) {
    c = ((b & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
    *i += 3;
  } else {
    c = ((b & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    *i += 4;
  }
  return c;
}

inline bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

bool valid_utf8(std::string_view s);

// len() of a Python str: code points.
size_t char_count(std::string_view s);
// The byte offset of code point `index` (index <= char_count(s)).
size_t byte_offset(std::string_view s, size_t index);

// str.isspace() of one character (also what str.split() and str.strip() remove, and re's \s).
bool py_isspace(char32_t c);
// The line boundaries of str.splitlines().
bool py_is_line_break(char32_t c);
// str.isprintable(): repr() escapes the characters that are not.
bool py_isprintable(char32_t c);
bool py_isalpha(char32_t c);
bool py_isdecimal(char32_t c);
bool py_isdigit(char32_t c);
bool py_isnumeric(char32_t c);
bool py_isalnum(char32_t c);
bool py_iscased(char32_t c);
bool py_islower_char(char32_t c);
bool py_isupper_char(char32_t c);
bool py_istitle_char(char32_t c);

// str.upper(), str.lower() (full case mappings: 'ß'.upper() is 'SS').
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
// str.title() and str.capitalize().
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);

// str.replace(old, new, count): count < 0 replaces all; an empty `old` matches between characters.
std::string py_replace(std::string_view s, std::string_view old, std::string_view replacement,
                       int64_t count);

// str.strip(chars) / lstrip / rstrip: `chars` null means whitespace.
std::string_view py_strip(std::string_view s, const std::string_view* chars, bool left, bool right);

}  // namespace kvgate::jinja
