// Text and number filters: trim, upper, lower, capitalize, title, replace, string, safe, escape,
// forceescape, int, float, abs, round, indent, wordcount, truncate, format, center, tojson.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "jinja/filter_functions.h"
#include "jinja/json.h"
#include "jinja/operators.h"
#include "jinja/percent_format.h"
#include "jinja/py_str.h"
#include "jinja/status_macros.h"
#include "jinja/unicode.h"

namespace kvgate::jinja::filters {
namespace {

Status no_args(const Args& args, std::string_view what) {
  return bind_args(args, what, {}, 0, nullptr);
}

// str.splitlines() of `s` (the pieces, without their line breaks).
std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const char32_t c = decode_at(s, &i);
    if (!py_is_line_break(c)) continue;
    lines.push_back(s.substr(start, at - start));
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    start = i;
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return lines;
}

bool digits_with_underscores(std::string_view s, bool (*digit)(char)) {
  if (s.empty() || !digit(s.front()) || !digit(s.back())) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (!digit(s[i + 1])) return false;
    } else if (!digit(s[i])) {
      return false;
    }
  }
  return true;
}

// int(s, base) for a Python str: nullopt where Python raises ValueError.
std::optional<int64_t> parse_int(std::string_view text, int64_t base, bool* overflow) {
  std::string_view s = py_strip(text, nullptr, true, true);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    const int64_t prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      base = prefixed;
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);
    }
  }
  if (base == 0) {
    // Base 0 takes a decimal literal, which cannot have leading zeros.
    if (s.size() > 1 && s[0] == '0' && s.find_first_not_of("0_") != std::string_view::npos) {
      return std::nullopt;
    }
    base = 10;
  }
  auto digit_value = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return (c | 0x20) - 'a' + 10;
    return 99;
  };
  if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
  uint64_t value = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (s[i + 1] == '_') return std::nullopt;
      continue;
    }
    const int d = digit_value(s[i]);
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, static_cast<uint64_t>(base), &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(d), &value) ||
        value > static_cast<uint64_t>(INT64_MAX)) {
      *overflow = true;
    }
  }
  return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
}

// float(s) for a Python str: nullopt where Python raises ValueError.
std::optional<double> parse_float(std::string_view text) {
  std::string_view s = py_strip(text, nullptr, true, true);
  std::string_view body = s;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  std::string lower;
  for (char c : body) lower.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
  if (lower == "inf" || lower == "infinity" || lower == "nan") {
    const double v = lower == "nan" ? NAN : INFINITY;
    return s[0] == '-' ? -v : v;
  }
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  // digits[.digits][e[+-]digits], each digit run with single underscores inside.
  const size_t e = lower.find('e');
  const std::string_view mantissa = std::string_view(lower).substr(0, e);
  const size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view frac =
      dot == std::string_view::npos ? std::string_view() : mantissa.substr(dot + 1);
  if (whole.empty() && frac.empty()) return std::nullopt;
  if (!whole.empty() && !digits_with_underscores(whole, is_digit)) return std::nullopt;
  if (!frac.empty() && !digits_with_underscores(frac, is_digit)) return std::nullopt;
  if (e != std::string::npos) {
    std::string_view exp = std::string_view(lower).substr(e + 1);
    if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) exp.remove_prefix(1);
    if (!digits_with_underscores(exp, is_digit)) return std::nullopt;
  }
  std::string clean;
  for (char c : s) {
    if (c != '_') clean.push_back(c);
  }
  return std::strtod(std::string(py_strip(clean, nullptr, true, true)).c_str(), nullptr);
}

Result<Value> string_result(const Value& like, std::string s) {
  return Value::string(std::move(s), like.markup());
}

}  // namespace

Result<Value> soft_str(const Value& v) {
  if (v.is_string()) return v;
  return to_str_value(v);
}

Result<Value> trim(Evaluator&, const Value& v, Args& args) {
  Value chars = Value::none();
  JINJA_RETURN_IF_ERROR(bind_args(args, "trim", {"chars"}, 0, &chars));
  JINJA_ASSIGN_OR_RETURN(Value s, soft_str(v));
  if (chars.is_none()) return Value::substring(s, py_strip(s.str(), nullptr, true, true));
  if (!chars.is_string()) {
    return absl::InvalidArgumentError("strip arg must be None or str");
  }
  const std::string_view set = chars.str();
  return Value::substring(s, py_strip(s.str(), &set, true, true));
}

Result<Value> upper(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "upper"));
  JINJA_ASSIGN_OR_RETURN(Value s, soft_str(v));
  return string_result(s, py_upper(s.str()));
}

Result<Value> lower(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "lower"));
  JINJA_ASSIGN_OR_RETURN(Value s, soft_str(v));
  return string_result(s, py_lower(s.str()));
}

Result<Value> capitalize(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "capitalize"));
  JINJA_ASSIGN_OR_RETURN(Value s, soft_str(v));
  return string_result(s, py_capitalize(s.str()));
}

// jinja2's title: words start after -, whitespace, (, {, [ or <; each word's first character
// upper-cased (str.upper, not str.title), the rest lower-cased.
Result<Value> title(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "title"));
  JINJA_ASSIGN_OR_RETURN(Value s, soft_str(v));
  const std::string_view text = s.str();
  std::string out;
  bool word_start = true;
  size_t run_start = 0;
  auto flush_word = [&](size_t end) {
    if (end <= run_start) return;
    const std::string_view word = text.substr(run_start, end - run_start);
    size_t first_end = 0;
    decode_at(word, &first_end);
    out += py_upper(word.substr(0, first_end));
    out += py_lower(word.substr(first_end));
  };
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    const char32_t c = decode_at(text, &i);
    const bool separator =
        c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
    if (separator) {
      if (!word_start) flush_word(at);
      out.append(text.substr(at, i - at));
      word_start = true;
    } else if (word_start) {
      run_start = at;
      word_start = false;
    }
  }
  if (!word_start) flush_word(text.size());
  return string_result(s, std::move(out));
}

Result<Value> replace(Evaluator&, const Value& v, Args& args) {
  Value p[3] = {Value(), Value(), Value::none()};
  JINJA_RETURN_IF_ERROR(bind_args(args, "replace", {"old", "new", "count"}, 2, p));
  JINJA_ASSIGN_OR_RETURN(Value s, to_str_value(v));
  JINJA_ASSIGN_OR_RETURN(Value old_v, to_str_value(p[0]));
  JINJA_ASSIGN_OR_RETURN(Value new_v, to_str_value(p[1]));
  int64_t count = -1;
  if (!p[2].is_none()) {
    if (!p[2].is_integral()) {
      return absl::InvalidArgumentError("'" + std::string(type_name(p[2])) +
                                        "' object cannot be interpreted as an integer");
    }
    count = p[2].as_int();
  }
  return Value::string(py_replace(s.str(), old_v.str(), new_v.str(), count));
}

Result<Value> string(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "string"));
  return soft_str(v);
}

Result<Value> safe(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "safe"));
  if (v.markup()) return v;
  JINJA_ASSIGN_OR_RETURN(Value s, to_str_value(v));
  return Value::string(std::string(s.str()), true);
}

Result<Value> escape(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "escape"));
  if (v.markup()) return v;
  JINJA_ASSIGN_OR_RETURN(Value s, to_str_value(v));
  std::string out;
  append_html_escaped(s.str(), &out);
  return Value::string(std::move(out), true);
}

Result<Value> forceescape(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "forceescape"));
  JINJA_ASSIGN_OR_RETURN(Value s, to_str_value(v));
  std::string out;
  append_html_escaped(s.str(), &out);
  return Value::string(std::move(out), true);
}

Result<Value> to_int(Evaluator&, const Value& v, Args& args) {
  Value p[2] = {Value::integer(0), Value::integer(10)};
  JINJA_RETURN_IF_ERROR(bind_args(args, "int", {"default", "base"}, 0, p));
  if (v.is_undefined()) return undefined_error(v);
  auto from_float = [&](double f) -> Result<Value> {
    if (std::isnan(f)) return p[0];
    if (std::isinf(f)) {
      return absl::InvalidArgumentError("cannot convert float infinity to integer");
    }
    if (std::fabs(f) >= 9.2233720368547758e18) {
      return absl::InvalidArgumentError("integer overflow (integers are 64-bit)");
    }
    return Value::integer(static_cast<int64_t>(f));
  };
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) return from_float(v.as_double());
  if (v.is_string()) {
    if (p[1].is_integral()) {
      bool overflow = false;
      if (auto i = parse_int(v.str(), p[1].as_int(), &overflow)) {
        if (overflow) return absl::InvalidArgumentError("integer overflow (integers are 64-bit)");
        return Value::integer(*i);
      }
    }
    if (auto f = parse_float(v.str())) return from_float(*f);
  }
  return p[0];
}

Result<Value> to_float(Evaluator&, const Value& v, Args& args) {
  Value fallback = Value::number(0.0);
  JINJA_RETURN_IF_ERROR(bind_args(args, "float", {"default"}, 0, &fallback));
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    if (auto f = parse_float(v.str())) return Value::number(*f);
  }
  return fallback;
}

Result<Value> abs(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "abs"));
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) return absl::InvalidArgumentError("integer overflow");
    return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  return absl::InvalidArgumentError("bad operand type for abs(): '" + std::string(type_name(v)) +
                                    "'");
}

Result<Value> round(Evaluator&, const Value& v, Args& args) {
  Value p[2] = {Value::integer(0), Value::borrowed("common")};
  JINJA_RETURN_IF_ERROR(bind_args(args, "round", {"precision", "method"}, 0, p));
  const std::string_view method = p[1].is_string() ? p[1].str() : "";
  if (method != "common" && method != "ceil" && method != "floor") {
    return absl::InvalidArgumentError("method must be common, ceil or floor");
  }
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_number()) {
    return absl::InvalidArgumentError("type " + std::string(type_name(v)) +
                                      " doesn't define __round__ method");
  }
  if (!p[0].is_integral()) {
    return absl::InvalidArgumentError("'" + std::string(type_name(p[0])) +
                                      "' object cannot be interpreted as an integer");
  }
  const int64_t digits = p[0].as_int();
  if (method != "common") {
    const double scale = std::pow(10.0, static_cast<double>(digits));
    const double x = v.as_double() * scale;
    if (!std::isfinite(x)) return absl::InvalidArgumentError("cannot convert float to integer");
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (v.is_integral()) {
    // round(int, n) stays an int; a negative n rounds to tens, hundreds (half to even).
    const int64_t i = v.as_int();
    if (digits >= 0) return Value::integer(i);
    if (digits < -18) return Value::integer(0);
    int64_t unit = 1;
    for (int64_t k = 0; k < -digits; ++k) unit *= 10;
    int64_t q = i / unit, r = i % unit;
    if (r < 0) {
      r += unit;
      --q;
    }
    if (2 * r > unit || (2 * r == unit && (q & 1))) ++q;
    return Value::integer(q * unit);
  }
  const double x = v.as_double();
  if (!std::isfinite(x) || digits > 323) return Value::number(x);
  if (digits >= 0) {
    // Python rounds the exact binary value to `digits` decimals, half to even; so does printf.
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), x);
    return Value::number(std::strtod(buf, nullptr));
  }
  if (digits < -308) return Value::number(0.0 * x);
  const double unit = std::pow(10.0, static_cast<double>(-digits));
  return Value::number(std::nearbyint(x / unit) * unit);
}

Result<Value> indent(Evaluator&, const Value& v, Args& args) {
  Value p[3] = {Value::integer(4), Value::boolean(false), Value::boolean(false)};
  JINJA_RETURN_IF_ERROR(bind_args(args, "indent", {"width", "first", "blank"}, 0, p));
  std::string indention;
  if (p[0].is_string()) {
    indention = std::string(p[0].str());
  } else if (p[0].is_integral()) {
    if (p[0].as_int() > kMaxWidth) return absl::InvalidArgumentError("indent width too large");
    indention.assign(static_cast<size_t>(std::max<int64_t>(0, p[0].as_int())), ' ');
  } else {
    return absl::InvalidArgumentError("can't multiply sequence by non-int of type '" +
                                      std::string(type_name(p[0])) + "'");
  }
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_string()) {
    return absl::InvalidArgumentError("unsupported operand type(s) for +=: '" +
                                      std::string(type_name(v)) + "' and 'str'");
  }
  // jinja2 appends a newline first, so a trailing line break yields no empty last line.
  const std::string text = std::string(v.str()) + "\n";
  const std::vector<std::string_view> lines = split_lines(text);
  std::string out;
  if (py_truthy(p[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) {
        out += "\n";
        if (!lines[i].empty()) out += indention;
      }
      out += lines[i];
    }
  }
  if (py_truthy(p[1])) out = indention + out;
  return string_result(v, std::move(out));
}

Result<Value> wordcount(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_args(args, "wordcount"));
  JINJA_ASSIGN_OR_RETURN(Value s, soft_str(v));
  int64_t words = 0;
  bool in_word = false;
  const std::string_view text = s.str();
  for (size_t i = 0; i < text.size();) {
    const char32_t c = decode_at(text, &i);
    const bool word_char = c == '_' || py_isalnum(c);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

Result<Value> truncate(Evaluator& ev, const Value& v, Args& args) {
  Value p[4] = {Value::integer(255), Value::boolean(false), Value::borrowed("..."), Value::none()};
  JINJA_RETURN_IF_ERROR(
      bind_args(args, "truncate", {"length", "killwords", "end", "leeway"}, 0, p));
  if (!p[0].is_integral() || !p[2].is_string() || !(p[3].is_none() || p[3].is_integral())) {
    return absl::InvalidArgumentError("truncate() takes an int length, a str end, an int leeway");
  }
  const int64_t max_length = p[0].as_int();
  const int64_t leeway = p[3].is_none() ? 5 : p[3].as_int();
  const std::string_view end = p[2].str();
  const auto end_len = static_cast<int64_t>(char_count(end));
  if (max_length < end_len) {
    return absl::InvalidArgumentError("expected length >= " + std::to_string(end_len) + ", got " +
                                      std::to_string(max_length));
  }
  if (leeway < 0) {
    return absl::InvalidArgumentError("expected leeway >= 0, got " + std::to_string(leeway));
  }
  if (!v.is_string()) {
    // Anything with a len() short enough comes back as it is; longer, Python's s[:n] + end fails.
    Args none;
    JINJA_ASSIGN_OR_RETURN(Value n, length(ev, v, none));
    if (n.as_int() <= max_length + leeway) return v;
    return absl::InvalidArgumentError("can only concatenate " + std::string(type_name(v)) +
                                      " (not \"str\") to " + std::string(type_name(v)));
  }
  const std::string_view s = v.str();
  if (static_cast<int64_t>(char_count(s)) <= max_length + leeway) return v;
  std::string_view kept = s.substr(0, byte_offset(s, static_cast<size_t>(max_length - end_len)));
  if (!py_truthy(p[1])) {
    const size_t space = kept.rfind(' ');
    if (space != std::string_view::npos) kept = kept.substr(0, space);
  }
  return string_result(v, std::string(kept) + std::string(end));
}

Result<Value> format(Evaluator&, const Value& v, Args& args) {
  if (!args.positional.empty() && !args.keywords.empty()) {
    return absl::InvalidArgumentError(
        "can't handle positional and keyword arguments at the same time");
  }
  JINJA_ASSIGN_OR_RETURN(Value s, soft_str(v));
  if (!args.keywords.empty()) {
    auto dict = make_ref<DictObj>();
    for (auto& [name, value] : args.keywords) dict->set(Value::borrowed(name), value);
    return percent_format(s, Value::dict(std::move(dict)));
  }
  auto tuple = make_ref<ListObj>(std::vector<Value>(args.positional.begin(), args.positional.end()),
                                 SeqKind::kTuple);
  return percent_format(s, Value::list(std::move(tuple)));
}

Result<Value> center(Evaluator&, const Value& v, Args& args) {
  Value width = Value::integer(80);
  JINJA_RETURN_IF_ERROR(bind_args(args, "center", {"width"}, 0, &width));
  if (!width.is_integral()) {
    return absl::InvalidArgumentError("'" + std::string(type_name(width)) +
                                      "' object cannot be interpreted as an integer");
  }
  JINJA_ASSIGN_OR_RETURN(Value s, soft_str(v));
  const int64_t w = width.as_int();
  if (w > kMaxWidth) return absl::InvalidArgumentError("width too large");
  const auto len = static_cast<int64_t>(char_count(s.str()));
  const int64_t margin = w - len;
  if (margin <= 0) return s;
  const int64_t left = margin / 2 + (margin & w & 1);
  std::string out(static_cast<size_t>(left), ' ');
  out += s.str();
  out.append(static_cast<size_t>(margin - left), ' ');
  return string_result(s, std::move(out));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), not jinja2's HTML-safe one.
Result<Value> tojson(Evaluator&, const Value& v, Args& args) {
  Value p[4] = {Value::boolean(false), Value::none(), Value::none(), Value::boolean(false)};
  JINJA_RETURN_IF_ERROR(
      bind_args(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}, 0, p));
  JsonStyle style;
  style.ensure_ascii = py_truthy(p[0]);
  style.sort_keys = py_truthy(p[3]);
  if (!p[1].is_none()) {
    style.indented = true;
    style.item_separator = ",";
    if (p[1].is_string()) {
      style.indent = std::string(p[1].str());
    } else if (p[1].is_integral()) {
      if (p[1].as_int() > kMaxWidth) return absl::InvalidArgumentError("indent too large");
      style.indent.assign(static_cast<size_t>(std::max<int64_t>(0, p[1].as_int())), ' ');
    } else {
      return absl::InvalidArgumentError("can't multiply sequence by non-int of type '" +
                                        std::string(type_name(p[1])) + "'");
    }
  }
  if (!p[2].is_none()) {
    if (!p[2].is_list() || p[2].list().items.size() != 2 || !p[2].list().items[0].is_string() ||
        !p[2].list().items[1].is_string()) {
      return absl::InvalidArgumentError("separators must be a pair of strings");
    }
    style.item_separator = std::string(p[2].list().items[0].str());
    style.key_separator = std::string(p[2].list().items[1].str());
  }
  std::string out;
  JINJA_RETURN_IF_ERROR(append_json(v, style, &out));
  return Value::string(std::move(out));
}

}  // namespace kvgate::jinja::filters
