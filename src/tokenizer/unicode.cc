#include "tokenizer/unicode.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <array>

#include "simdjson.h"

namespace kvgate::tokenizer {

bool valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool is_alphanumeric(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  const auto uc = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(uc, UCHAR_ALPHABETIC)) return true;
  const int8_t type = u_charType(uc);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

namespace {

// GPT-2's table: printable Latin-1 bytes stand for themselves, the other 68 map to 256 + n.
// Every character of it is below U+0800: one or two bytes of UTF-8.
struct ByteTable {
  std::array<std::string, 256> to_char;
  std::array<std::array<char, 2>, 256> utf8{};
  std::array<uint8_t, 256> utf8_len{};
  std::array<int, 324> to_byte{};
  ByteTable() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(c, &to_char[b]);
      utf8_len[b] = static_cast<uint8_t>(to_char[b].size());
      std::copy(to_char[b].begin(), to_char[b].end(), utf8[b].begin());
      to_byte[c] = b;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

}  // namespace

std::string_view byte_char(uint8_t b) { return byte_table().to_char[b]; }

int char_byte(char32_t c) { return c < 324 ? byte_table().to_byte[c] : -1; }

void append_byte_chars(std::string_view bytes, std::string* out) {
  const ByteTable& t = byte_table();
  const size_t old = out->size();
  out->resize(old + 2 * bytes.size());
  char* p = out->data() + old;
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    p[0] = t.utf8[b][0];
    p[1] = t.utf8[b][1];
    p += t.utf8_len[b];
  }
  out->resize(static_cast<size_t>(p - out->data()));
}

}  // namespace kvgate::tokenizer
