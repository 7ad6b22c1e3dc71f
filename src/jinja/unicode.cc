// Python's character classes and case mappings through ICU (Python 3.11 uses Unicode 14, Debian's
// ICU 72 Unicode 15: they differ only on the characters Unicode 15 added).
#include "jinja/unicode.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <vector>

namespace kvgate::jinja {

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n;
    char32_t min;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xE0) == 0xC0) {
      n = 2;
      min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      n = 3;
      min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      n = 4;
      min = 0x10000;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    size_t j = i;
    const char32_t c = decode_at(s, &j);
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    i = j;
  }
  return true;
}

size_t char_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

size_t byte_offset(std::string_view s, size_t index) {
  size_t i = 0;
  for (; i < s.size() && index > 0; --index) {
    const auto b = static_cast<unsigned char>(s[i]);
    i += b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  }
  return i;
}

bool py_isspace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool py_is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool py_isprintable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

bool py_isalpha(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return true;
    default:
      return false;
  }
}

namespace {
int numeric_type(char32_t c) {
  return u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE);
}
}  // namespace

bool py_isdecimal(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return numeric_type(c) == U_NT_DECIMAL;
}
bool py_isdigit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int t = numeric_type(c);
  return t == U_NT_DECIMAL || t == U_NT_DIGIT;
}
bool py_isnumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return numeric_type(c) != U_NT_NONE;
}
bool py_isalnum(char32_t c) { return py_isalpha(c) || py_isnumeric(c); }

bool py_iscased(char32_t c) {
  if (c < 0x80) return py_isalpha(c);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED);
}
bool py_islower_char(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_LOWERCASE);
}
bool py_isupper_char(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_UPPERCASE);
}
bool py_istitle_char(char32_t c) {
  return c >= 0x80 && u_charType(static_cast<UChar32>(c)) == U_TITLECASE_LETTER;
}

namespace {

enum class Case { kUpper, kLower, kTitle };

// ICU's full case mapping of `s` (root locale, as Python's locale-independent str methods).
std::string icu_case(std::string_view s, Case mode) {
  UErrorCode err = U_ZERO_ERROR;
  int32_t len16 = 0;
  u_strFromUTF8(nullptr, 0, &len16, s.data(), static_cast<int32_t>(s.size()), &err);
  err = U_ZERO_ERROR;
  std::vector<UChar> src(static_cast<size_t>(len16) + 1);
  u_strFromUTF8(src.data(), len16 + 1, nullptr, s.data(), static_cast<int32_t>(s.size()), &err);
  std::vector<UChar> dst(static_cast<size_t>(len16) * 3 + 8);
  err = U_ZERO_ERROR;
  int32_t n = 0;
  const auto cap = static_cast<int32_t>(dst.size());
  switch (mode) {
    case Case::kUpper:
      n = u_strToUpper(dst.data(), cap, src.data(), len16, "", &err);
      break;
    case Case::kLower:
      n = u_strToLower(dst.data(), cap, src.data(), len16, "", &err);
      break;
    case Case::kTitle:
      n = u_strToTitle(dst.data(), cap, src.data(), len16, nullptr, "", &err);
      break;
  }
  if (U_FAILURE(err)) return std::string(s);
  std::string out(static_cast<size_t>(n) * 3 + 4, '\0');
  int32_t out_len = 0;
  err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &out_len, dst.data(), n, &err);
  out.resize(static_cast<size_t>(out_len));
  return out;
}

std::string one_char(char32_t c) {
  std::string s;
  append_utf8(c, &s);
  return s;
}

void append_char_case(char32_t c, Case mode, std::string* out) {
  if (c < 0x80) {
    if (mode == Case::kLower) {
      out->push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    } else {
      out->push_back(static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
    }
    return;
  }
  *out += icu_case(one_char(c), mode);
}

}  // namespace

std::string py_upper(std::string_view s) {
  if (!is_ascii(s)) return icu_case(s, Case::kUpper);
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  }
  return out;
}

std::string py_lower(std::string_view s) {
  if (!is_ascii(s)) return icu_case(s, Case::kLower);
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_is_cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = decode_at(s, &i);
    append_char_case(c, previous_is_cased ? Case::kLower : Case::kTitle, &out);
    previous_is_cased = py_iscased(c);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const bool first = i == 0;
    const char32_t c = decode_at(s, &i);
    append_char_case(c, first ? Case::kTitle : Case::kLower, &out);
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view replacement,
                       int64_t count) {
  std::string out;
  if (count < 0) count = INT64_MAX;
  if (old.empty()) {
    // Python inserts at each of the len(s) + 1 positions between characters.
    const auto positions = static_cast<int64_t>(char_count(s)) + 1;
    size_t i = 0;
    for (int64_t k = 0; k < std::min(count, positions); ++k) {
      out += replacement;
      if (i < s.size()) {
        const size_t start = i;
        decode_at(s, &i);
        out.append(s.substr(start, i - start));
      }
    }
    out.append(s.substr(i));
    return out;
  }
  size_t pos = 0;
  while (count > 0) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out += replacement;
    pos = hit + old.size();
    --count;
  }
  out.append(s.substr(pos));
  return out;
}

std::string_view py_strip(std::string_view s, const std::string_view* chars, bool left,
                          bool right) {
  auto strip_char = [&](char32_t c) {
    if (chars == nullptr) return py_isspace(c);
    for (size_t k = 0; k < chars->size();) {
      if (decode_at(*chars, &k) == c) return true;
    }
    return false;
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!strip_char(decode_at(s, &next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t probe = start;
      if (!strip_char(decode_at(s, &probe))) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

}  // namespace kvgate::jinja
