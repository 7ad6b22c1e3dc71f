// Follows CPython's string formatter (Objects/stringlib/unicode_format.h) and the __format__ of
// str, int and float (Python/formatter_unicode.c).
#include "jinja/str_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "jinja/evaluator.h"
#include "jinja/py_str.h"
#include "jinja/status_macros.h"
#include "jinja/unicode.h"

namespace kvgate::jinja {
namespace {

Status value_error(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

struct FormatSpec {
  std::string fill = " ";
  char align = '\0';
  char sign = '\0';
  bool alt = false;
  int64_t width = -1;
  char grouping = '\0';
  int64_t precision = -1;
  char type = '\0';
};

Result<FormatSpec> parse_spec(std::string_view spec) {
  FormatSpec f;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  // [[fill]align]: the fill may be any one character.
  size_t first_end = 0;
  if (!spec.empty()) decode_at(spec, &first_end);
  if (first_end < spec.size() && is_align(spec[first_end])) {
    f.fill = std::string(spec.substr(0, first_end));
    f.align = spec[first_end];
    i = first_end + 1;
  } else if (!spec.empty() && is_align(spec[0])) {
    f.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) f.sign = spec[i++];
  if (i < spec.size() && spec[i] == '#') {
    f.alt = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    if (f.align == '\0') {
      f.fill = "0";
      f.align = '=';
    }
    ++i;
  }
  auto digits = [&](int64_t* out) {
    const size_t start = i;
    int64_t v = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') {
      v = std::min<int64_t>(v * 10 + (spec[i++] - '0'), 1000000);
    }
    if (i > start) *out = v;
    return i > start;
  };
  digits(&f.width);
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) f.grouping = spec[i++];
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    if (!digits(&f.precision)) return value_error("Format specifier missing precision");
  }
  if (i < spec.size()) f.type = spec[i++];
  if (i < spec.size()) return value_error("Invalid format specifier");
  return f;
}

void group_digits(std::string* digits, char separator, size_t every) {
  std::string out;
  const size_t n = digits->size();
  for (size_t k = 0; k < n; ++k) {
    if (k > 0 && (n - k) % every == 0) out.push_back(separator);
    out.push_back((*digits)[k]);
  }
  *digits = std::move(out);
}

// Pads `sign + body` to the spec's width; '=' puts the padding after the sign.
std::string pad(std::string_view sign, std::string_view body, const FormatSpec& f,
                char default_align) {
  const char align = f.align ? f.align : default_align;
  const auto len = static_cast<int64_t>(char_count(sign) + char_count(body));
  const int64_t fill_count = f.width > len ? f.width - len : 0;
  auto fill = [&](int64_t n) {
    std::string s;
    for (int64_t k = 0; k < n; ++k) s += f.fill;
    return s;
  };
  switch (align) {
    case '<':
      return std::string(sign) + std::string(body) + fill(fill_count);
    case '^':
      return fill(fill_count / 2) + std::string(sign) + std::string(body) +
             fill(fill_count - fill_count / 2);
    case '=':
      return std::string(sign) + fill(fill_count) + std::string(body);
    default:
      return fill(fill_count) + std::string(sign) + std::string(body);
  }
}

std::string sign_of(bool negative, const FormatSpec& f) {
  if (negative) return "-";
  if (f.sign == '+') return "+";
  if (f.sign == ' ') return " ";
  return "";
}

Result<std::string> format_float(double x, const FormatSpec& f) {
  const bool negative = std::signbit(x) && !std::isnan(x);
  const double mag = std::fabs(x);
  char type = f.type;
  std::string body;
  if (std::isnan(x) || std::isinf(x)) {
    body = std::isnan(x) ? "nan" : "inf";
    if (type == 'E' || type == 'F' || type == 'G') body = std::isnan(x) ? "NAN" : "INF";
    if (type == '%') body += "%";
  } else if (type == '\0' && f.precision < 0) {
    append_float(mag, &body);
  } else {
    char buf[512];
    const int p = static_cast<int>(std::min<int64_t>(f.precision < 0 ? 6 : f.precision, 300));
    if (type == '\0') {
      // Like 'g', but a fixed-point result keeps a digit after the point, and scientific
      // notation starts at exponent p - 1.
      const int digits = std::max(p, 1);
      std::snprintf(buf, sizeof buf, "%.*e", digits - 1, mag);
      std::string sci = buf;
      const size_t e = sci.find('e');
      const int exp = std::atoi(sci.c_str() + e + 1);
      if (exp < -4 || exp >= digits - 1) {
        std::string mantissa = sci.substr(0, e);
        if (!f.alt && mantissa.find('.') != std::string::npos) {
          while (mantissa.back() == '0') mantissa.pop_back();
          if (mantissa.back() == '.') mantissa.pop_back();
        }
        body = mantissa + sci.substr(e);
      } else {
        std::snprintf(buf, sizeof buf, "%.*f", digits - 1 - exp, mag);
        body = buf;
        if (body.find('.') == std::string::npos) body += ".";
        while (body.back() == '0') body.pop_back();
        if (body.back() == '.') body += "0";
      }
    } else if (type == '%') {
      std::snprintf(buf, sizeof buf, f.alt ? "%#.*f" : "%.*f", p, mag * 100);
      body = std::string(buf) + "%";
    } else {
      const char conv = type == 'n' ? 'g' : type;
      const char fmt[6] = {
          '%', f.alt ? '#' : '.', f.alt ? '.' : '*', f.alt ? '*' : conv, f.alt ? conv : '\0', '\0'};
      std::snprintf(buf, sizeof buf, fmt, p, mag);
      body = buf;
    }
    if (f.grouping) {
      const size_t end = body.find_first_not_of("0123456789");
      std::string whole = body.substr(0, end);
      group_digits(&whole, f.grouping, 3);
      body = whole + (end == std::string::npos ? "" : body.substr(end));
    }
  }
  return pad(sign_of(negative, f), body, f, '>');
}

Result<std::string> format_int(int64_t v, const FormatSpec& f) {
  if (f.precision >= 0) return value_error("Precision not allowed in integer format specifier");
  const bool negative = v < 0;
  const uint64_t mag = negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits, prefix;
  char buf[80];
  switch (f.type) {
    case 'b': {
      uint64_t m = mag;
      do {
        digits.insert(digits.begin(), static_cast<char>('0' + (m & 1)));
        m >>= 1;
      } while (m);
      prefix = "0b";
      break;
    }
    case 'o':
      std::snprintf(buf, sizeof buf, "%llo", static_cast<unsigned long long>(mag));
      digits = buf;
      prefix = "0o";
      break;
    case 'x':
    case 'X':
      std::snprintf(buf, sizeof buf, f.type == 'x' ? "%llx" : "%llX",
                    static_cast<unsigned long long>(mag));
      digits = buf;
      prefix = f.type == 'x' ? "0x" : "0X";
      break;
    case 'c':
      if (v < 0 || v > 0x10FFFF) return value_error("%c arg not in range(0x110000)");
      append_utf8(static_cast<char32_t>(v), &digits);
      return pad("", digits, f, '<');
    case '\0':
    case 'd':
    case 'n':
      digits = std::to_string(mag);
      break;
    default:
      return value_error(std::string("Unknown format code '") + f.type +
                         "' for object of type 'int'");
  }
  if (f.grouping) group_digits(&digits, f.grouping, f.type == '\0' || f.type == 'd' ? 3 : 4);
  return pad(sign_of(negative, f) + (f.alt ? prefix : ""), digits, f, '>');
}

Result<std::string> format_value(const Value& v, std::string_view spec) {
  if (spec.empty()) {
    std::string s;
    JINJA_RETURN_IF_ERROR(append_str(v, &s));
    return s;
  }
  JINJA_ASSIGN_OR_RETURN(FormatSpec f, parse_spec(spec));
  if (v.is_string()) {
    if (f.type != '\0' && f.type != 's') {
      return value_error(std::string("Unknown format code '") + f.type +
                         "' for object of type 'str'");
    }
    if (f.sign) return value_error("Sign not allowed in string format specifier");
    if (f.align == '=') return value_error("'=' alignment not allowed in string format specifier");
    std::string_view body = v.str();
    if (f.precision >= 0)
      body = body.substr(0, byte_offset(body, static_cast<size_t>(f.precision)));
    return pad("", body, f, '<');
  }
  const bool float_type = f.type == 'e' || f.type == 'E' || f.type == 'f' || f.type == 'F' ||
                          f.type == 'g' || f.type == 'G' || f.type == '%';
  if (v.is_float() || (v.is_integral() && float_type)) return format_float(v.as_double(), f);
  if (v.is_integral()) return format_int(v.as_int(), f);
  return absl::InvalidArgumentError("unsupported format string passed to " +
                                    std::string(type_name(v)) + ".__format__");
}

}  // namespace

Result<Value> str_format(Evaluator& ev, const Value& format, Args& args) {
  const std::string_view fmt = format.str();
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  for (size_t i = 0; i < fmt.size();) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        i += 2;
        continue;
      }
      return value_error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      i += 2;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) return value_error("expected '}' before end of string");
    const std::string_view field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) {
      return value_error("nested replacement fields in a format spec are not supported");
    }
    i = close + 1;
    // field_name[!conversion][:spec]
    const size_t colon = field.find(':');
    std::string_view head = field.substr(0, colon);
    const std::string_view spec = colon == std::string_view::npos ? "" : field.substr(colon + 1);
    char conversion = '\0';
    if (const size_t bang = head.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != head.size()) return value_error("expected ':' after conversion specifier");
      conversion = head[bang + 1];
      head = head.substr(0, bang);
    }
    const size_t name_end = std::min(head.find('.'), head.find('['));
    const std::string_view arg_name = head.substr(0, name_end);
    Value v;
    if (arg_name.empty() || arg_name.find_first_not_of("0123456789") == std::string_view::npos) {
      size_t index;
      if (arg_name.empty()) {
        if (used_manual) {
          return value_error(
              "cannot switch from manual field specification to automatic field numbering");
        }
        used_auto = true;
        index = auto_index++;
      } else {
        if (used_auto) {
          return value_error(
              "cannot switch from automatic field numbering to manual field specification");
        }
        used_manual = true;
        if (arg_name.size() > 9) return value_error("Too many decimal digits in format string");
        index = static_cast<size_t>(std::stol(std::string(arg_name)));
      }
      if (index >= args.positional.size()) {
        return absl::InvalidArgumentError("Replacement index " + std::to_string(index) +
                                          " out of range for positional args tuple");
      }
      v = args.positional[index];
    } else {
      const auto it = std::find_if(args.keywords.begin(), args.keywords.end(),
                                   [&](const auto& kw) { return kw.first == arg_name; });
      if (it == args.keywords.end())
        return absl::InvalidArgumentError("KeyError: '" + std::string(arg_name) + "'");
      v = it->second;
    }
    // .attr and [key] through the sandbox.
    for (size_t k = name_end; k < head.size();) {
      if (head[k] == '.') {
        const size_t end = std::min(head.find('.', k + 1), head.find('[', k + 1));
        const Value name = Value::string(std::string(head.substr(k + 1, end - k - 1)));
        JINJA_ASSIGN_OR_RETURN(v, ev.getattr(v, name.str(), &name));
        k = end;
      } else {
        const size_t end = head.find(']', k);
        if (end == std::string_view::npos) return value_error("Missing ']' in format string");
        const std::string_view key = head.substr(k + 1, end - k - 1);
        const bool digits = !key.empty() && key.size() <= 18 &&
                            key.find_first_not_of("0123456789") == std::string_view::npos;
        const Value key_value =
            digits ? Value::integer(std::stoll(std::string(key))) : Value::string(std::string(key));
        JINJA_ASSIGN_OR_RETURN(v, ev.getitem(v, key_value));
        k = end + 1;
      }
    }
    if (conversion != '\0') {
      std::string converted;
      if (conversion == 's') {
        JINJA_RETURN_IF_ERROR(append_str(v, &converted));
      } else if (conversion == 'r' || conversion == 'a') {
        JINJA_RETURN_IF_ERROR(append_repr(v, &converted));
        if (conversion == 'a' && !is_ascii(converted)) {
          return value_error("!a of non-ASCII text is not supported");
        }
      } else {
        return value_error(std::string("Unknown conversion specifier ") + conversion);
      }
      v = Value::string(std::move(converted));
    }
    JINJA_ASSIGN_OR_RETURN(std::string piece, format_value(v, spec));
    out += piece;
  }
  return Value::string(std::move(out));
}

}  // namespace kvgate::jinja
