#include "jinja/py_str.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/unicode.h"

namespace kvgate::jinja {
namespace {

void append_hex(uint32_t v, int digits, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
    out->push_back(kHex[(v >> shift) & 0xF]);
}

Status append_sequence(const Value& v, std::string* out) {
  const ListObj& list = v.list();
  auto items = [&](std::string_view open, std::string_view close) -> Status {
    *out += open;
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (i > 0) *out += ", ";
      if (Status s = append_repr(list.items[i], out); !s.ok()) return s;
    }
    *out += close;
    return absl::OkStatus();
  };
  switch (list.seq) {
    case SeqKind::kList:
      return items("[", "]");
    case SeqKind::kTuple:
      return items("(", list.items.size() == 1 ? ",)" : ")");
    case SeqKind::kDictKeys:
      return items("dict_keys([", "])");
    case SeqKind::kDictValues:
      return items("dict_values([", "])");
    case SeqKind::kDictItems:
      return items("dict_items([", "])");
    case SeqKind::kRange:
      *out += "range(" + std::to_string(list.range_start) + ", " + std::to_string(list.range_stop);
      if (list.range_step != 1) *out += ", " + std::to_string(list.range_step);
      *out += ")";
      return absl::OkStatus();
    case SeqKind::kGenerator:
    case SeqKind::kIterator:
      break;
  }
  return absl::InvalidArgumentError("cannot print a " + std::string(type_name(v)) +
                                    " (Python prints its address); convert it with |list");
}

}  // namespace

void append_float(double f, std::string* out) {
  if (std::isnan(f)) {
    *out += "nan";
    return;
  }
  if (std::isinf(f)) {
    *out += f < 0 ? "-inf" : "inf";
    return;
  }
  if (f == 0) {
    *out += std::signbit(f) ? "-0.0" : "0.0";
    return;
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));
  if (sci.front() == '-') {
    out->push_back('-');
    sci.remove_prefix(1);
  }
  // sci is d[.ddd]e±XX: the shortest digits and the exponent of the first one.
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+'), sci.data() + sci.size(), exponent);
  const int decpt = exponent + 1;  // the value is 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out->push_back(digits[0]);
    if (n > 1) {
      out->push_back('.');
      out->append(digits, 1);
    }
    out->push_back('e');
    out->push_back(exponent < 0 ? '-' : '+');
    const int mag = std::abs(exponent);
    if (mag < 10) out->push_back('0');
    *out += std::to_string(mag);
  } else if (decpt <= 0) {
    *out += "0.";
    out->append(static_cast<size_t>(-decpt), '0');
    *out += digits;
  } else if (decpt >= n) {
    *out += digits;
    out->append(static_cast<size_t>(decpt - n), '0');
    *out += ".0";
  } else {
    out->append(digits, 0, static_cast<size_t>(decpt));
    out->push_back('.');
    out->append(digits, static_cast<size_t>(decpt));
  }
}

void append_string_repr(std::string_view s, std::string* out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out->push_back(quote);
  for (size_t i = 0; i < s.size();) {
    const char32_t c = decode_at(s, &i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      *out += "\\x";
      append_hex(c, 2, out);
    } else if (c < 0x7F || py_isprintable(c)) {
      append_utf8(c, out);
    } else if (c <= 0xFF) {
      *out += "\\x";
      append_hex(c, 2, out);
    } else if (c <= 0xFFFF) {
      *out += "\\u";
      append_hex(c, 4, out);
    } else {
      *out += "\\U";
      append_hex(c, 8, out);
    }
  }
  out->push_back(quote);
}

void append_html_escaped(std::string_view s, std::string* out) {
  for (char c : s) {
    switch (c) {
      case '&':
        *out += "&amp;";
        break;
      case '<':
        *out += "&lt;";
        break;
      case '>':
        *out += "&gt;";
        break;
      case '"':
        *out += "&#34;";
        break;
      case '\'':
        *out += "&#39;";
        break;
      default:
        out->push_back(c);
    }
  }
}

Status append_str(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return absl::OkStatus();
    case Kind::kString:
      *out += v.str();
      return absl::OkStatus();
    default:
      return append_repr(v, out);
  }
}

Status append_repr(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Kind::kUndefined:
      *out += "Undefined";
      return absl::OkStatus();
    case Kind::kNone:
      *out += "None";
      return absl::OkStatus();
    case Kind::kBool:
      *out += v.as_bool() ? "True" : "False";
      return absl::OkStatus();
    case Kind::kInt: {
      char buf[24];
      const auto r = std::to_chars(buf, buf + sizeof buf, v.as_int());
      out->append(buf, r.ptr);
      return absl::OkStatus();
    }
    case Kind::kFloat:
      append_float(v.as_double(), out);
      return absl::OkStatus();
    case Kind::kString:
      if (v.markup()) {
        *out += "Markup(";
        append_string_repr(v.str(), out);
        *out += ")";
      } else {
        append_string_repr(v.str(), out);
      }
      return absl::OkStatus();
    case Kind::kList:
      return append_sequence(v, out);
    case Kind::kDict:
      return append_dict_repr(v.dict(), out);
    case Kind::kObject:
      if (v.object().repr(out)) return absl::OkStatus();
      break;
    case Kind::kBuiltin:
      break;
  }
  return absl::InvalidArgumentError("cannot print a " + std::string(type_name(v)) +
                                    " object (Python prints its address)");
}

Status append_dict_repr(const DictObj& dict, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (const auto& [key, value] : dict.items) {
    if (!first) *out += ", ";
    first = false;
    if (Status s = append_repr(key, out); !s.ok()) return s;
    *out += ": ";
    if (Status s = append_repr(value, out); !s.ok()) return s;
  }
  out->push_back('}');
  return absl::OkStatus();
}

Result<Value> to_str_value(const Value& v) {
  if (v.is_string()) return v.markup() ? Value::substring(v, v.str()) : v;
  if (v.is_undefined()) return Value::borrowed("");
  std::string s;
  if (Status st = append_str(v, &s); !st.ok()) return st;
  return Value::string(std::move(s));
}

}  // namespace kvgate::jinja
