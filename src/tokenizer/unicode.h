// UTF-8 and the character classes the tokenizer's components ask about, as Rust's `char` answers
// them (Hugging Face `tokenizers` is Rust): White_Space, alphanumeric.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvgate/core/utf8.h"

#include "absl/strings/string_view.h"

namespace kvgate::tokenizer {

// For heterogeneous lookups in absl maps keyed by std::string (this Abseil's string_view is its
// own type).
inline absl::string_view key_of(std::string_view s) { return {s.data(), s.size()}; }

// The code point starting at s[i] and its length in bytes. `s` must be valid UTF-8.
inline char32_t next_char(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    *len = 1;
    return b;
  }
  if (b < 0xE0) {
    *len = 2;
    return ((b & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
  }
  if (b < 0xF0) {
    *len = 3;
    return ((b & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
           (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
  }
  *len = 4;
  return ((b & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
         ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) |
         (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
}

// Length in bytes of the character whose first byte is `b`.
inline size_t char_len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

// The start of the character that ends at s[end - 1].
inline size_t prev_char_start(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

bool valid_utf8(std::string_view s);

bool is_whitespace(char32_t c);    // Unicode White_Space (Rust's char::is_whitespace)
bool is_alphanumeric(char32_t c);  // Alphabetic or Numeric (Rust's char::is_alphanumeric)

// GPT-2's byte-level alphabet: each byte as a printable character (ByteLevel pre-tokenizer and
// decoder). byte_char(b) is its UTF-8; char_byte() the way back (-1: not in the alphabet).
std::string_view byte_char(uint8_t b);
int char_byte(char32_t c);
// Appends byte_char() of each of `bytes` (a table lookup per byte, no call).
void append_byte_chars(std::string_view bytes, std::string* out);

}  // namespace kvgate::tokenizer
