#include "tokenizer/unicode.h"

#include <unicode/uchar.h>

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
struct ByteTable {
  std::array<std::string, 256> to_char;
  std::array<int, 324> to_byte{};
  ByteTable() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(c, &to_char[b]);
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

}  // namespace kvgate::tokenizer
