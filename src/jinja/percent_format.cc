// Follows CPython's PyUnicode_Format.
#include "jinja/percent_format.h"

#include <cmath>
#include <cstdio>

#include "jinja/py_str.h"
#include "jinja/unicode.h"

namespace kvgate::jinja {
namespace {

struct Spec {
  bool left = false, sign = false, space = false, alt = false, zero = false;
  int64_t width = -1, precision = -1;
  char type = 's';
};

Status format_error(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

// ascii(): repr() with every non-ASCII character escaped.
std::string ascii_repr(const std::string& repr) {
  std::string out;
  for (size_t i = 0; i < repr.size();) {
    const char32_t c = decode_at(repr, &i);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    char buf[16];
    if (c <= 0xFF) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
    } else if (c <= 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
    }
    out += buf;
  }
  return out;
}

void pad(std::string_view body, const Spec& spec, std::string* out) {
  const int64_t len = static_cast<int64_t>(char_count(body));
  const size_t fill = spec.width > len ? static_cast<size_t>(spec.width - len) : 0;
  if (!spec.left) out->append(fill, ' ');
  *out += body;
  if (spec.left) out->append(fill, ' ');
}

// A number's sign, prefix (0x) and digits, padded with zeros or spaces.
void pad_number(bool negative, std::string_view prefix, std::string_view digits, const Spec& spec,
                std::string* out) {
  std::string head;
  if (negative) {
    head = "-";
  } else if (spec.sign) {
    head = "+";
  } else if (spec.space) {
    head = " ";
  }
  head += prefix;
  const int64_t len = static_cast<int64_t>(head.size() + digits.size());
  const size_t fill = spec.width > len ? static_cast<size_t>(spec.width - len) : 0;
  if (spec.left) {
    *out += head;
    *out += digits;
    out->append(fill, ' ');
  } else if (spec.zero) {
    *out += head;
    out->append(fill, '0');
    *out += digits;
  } else {
    out->append(fill, ' ');
    *out += head;
    *out += digits;
  }
}

Status format_integer(const Value& v, const Spec& spec, std::string* out) {
  int64_t n;
  if (v.is_integral()) {
    n = v.as_int();
  } else if (v.is_float() && (spec.type == 'd' || spec.type == 'i' || spec.type == 'u')) {
    const double f = v.as_double();
    if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) {
      return format_error("cannot convert float to integer");
    }
    n = static_cast<int64_t>(f);
  } else {
    const bool decimal = spec.type == 'd' || spec.type == 'i' || spec.type == 'u';
    return format_error(std::string("%") + spec.type +
                        " format: " + (decimal ? "a real number" : "an integer") +
                        " is required, not " + std::string(type_name(v)));
  }
  const bool negative = n < 0;
  const uint64_t mag = negative ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  char buf[32];
  std::string_view prefix;
  switch (spec.type) {
    case 'o':
      std::snprintf(buf, sizeof buf, "%llo", static_cast<unsigned long long>(mag));
      if (spec.alt) prefix = "0o";
      break;
    case 'x':
      std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(mag));
      if (spec.alt) prefix = "0x";
      break;
    case 'X':
      std::snprintf(buf, sizeof buf, "%llX", static_cast<unsigned long long>(mag));
      if (spec.alt) prefix = "0X";
      break;
    default:
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(mag));
  }
  std::string digits = buf;
  if (spec.precision > static_cast<int64_t>(digits.size())) {
    digits.insert(0, static_cast<size_t>(spec.precision) - digits.size(), '0');
  }
  pad_number(negative, prefix, digits, spec, out);
  return absl::OkStatus();
}

Status format_float(const Value& v, const Spec& spec, std::string* out) {
  if (!v.is_number()) {
    return format_error("must be real number, not " + std::string(type_name(v)));
  }
  const double f = v.as_double();
  const bool upper = spec.type == 'E' || spec.type == 'F' || spec.type == 'G';
  std::string digits;
  if (std::isnan(f) || std::isinf(f)) {
    digits = std::isnan(f) ? "nan" : "inf";
    if (upper) digits = std::isnan(f) ? "NAN" : "INF";
  } else {
    const int precision =
        spec.precision < 0 ? 6 : static_cast<int>(std::min<int64_t>(spec.precision, 200));
    char fmt[8] = "%";
    size_t k = 1;
    if (spec.alt) fmt[k++] = '#';
    fmt[k++] = '.';
    fmt[k++] = '*';
    fmt[k++] = spec.type;
    fmt[k] = '\0';
    char buf[512];
    std::snprintf(buf, sizeof buf, fmt, precision, std::fabs(f));
    digits = buf;
  }
  pad_number(std::signbit(f) && !std::isnan(f), "", digits, spec, out);
  return absl::OkStatus();
}

class Formatter {
 public:
  Formatter(std::string_view format, const Value& args, bool escape)
      : format_(format), args_(args), escape_(escape) {
    if (args.is_list() && args.seq() == SeqKind::kTuple) {
      tuple_ = &args.list().items;
    }
    // What has __getitem__ counts as a mapping (lists and Undefined too): Python then does not
    // insist that the one argument be used.
    mapping_ = args.is_dict() || args.is_undefined() ||
               (args.is_list() && (args.seq() == SeqKind::kList || args.seq() == SeqKind::kRange));
  }

  Result<std::string> run() {
    std::string out;
    size_t i = 0;
    while (i < format_.size()) {
      const size_t pct = format_.find('%', i);
      if (pct == std::string_view::npos) {
        out += format_.substr(i);
        break;
      }
      out += format_.substr(i, pct - i);
      i = pct + 1;
      if (Status s = one(&i, &out); !s.ok()) return s;
    }
    if (tuple_ != nullptr ? next_ < tuple_->size() : (!single_used_ && !mapping_)) {
      return format_error("not all arguments converted during string formatting");
    }
    return out;
  }

 private:
  Result<Value> next_arg() {
    if (tuple_ != nullptr) {
      if (next_ >= tuple_->size()) return format_error("not enough arguments for format string");
      return (*tuple_)[next_++];
    }
    if (single_used_) return format_error("not enough arguments for format string");
    single_used_ = true;
    return args_;
  }

  Result<int64_t> star_arg() {
    auto v = next_arg();
    if (!v.ok()) return v.status();
    if (!v->is_integral()) return format_error("* wants int");
    return v->as_int();
  }

  Status one(size_t* pos, std::string* out) {
    size_t i = *pos;
    auto at_end = [&] { return i >= format_.size(); };
    Value arg;
    bool have_arg = false;
    if (!at_end() && format_[i] == '(') {
      if (!args_.is_dict()) return format_error("format requires a mapping");
      int depth = 1;
      const size_t start = ++i;
      while (!at_end() && depth > 0) {
        if (format_[i] == '(') ++depth;
        if (format_[i] == ')') --depth;
        ++i;
      }
      if (depth > 0) return format_error("incomplete format key");
      const std::string_view key = format_.substr(start, i - 1 - start);
      const Value* found = args_.dict().find(key);
      if (found == nullptr) return format_error("KeyError: '" + std::string(key) + "'");
      arg = *found;
      have_arg = true;
      single_used_ = true;
    }
    Spec spec;
    for (; !at_end(); ++i) {
      const char c = format_[i];
      if (c == '-') {
        spec.left = true;
      } else if (c == '+') {
        spec.sign = true;
      } else if (c == ' ') {
        spec.space = true;
      } else if (c == '#') {
        spec.alt = true;
      } else if (c == '0') {
        spec.zero = true;
      } else {
        break;
      }
    }
    if (!at_end() && format_[i] == '*') {
      auto w = star_arg();
      if (!w.ok()) return w.status();
      spec.width = *w;
      if (spec.width < 0) {
        spec.left = true;
        spec.width = -spec.width;
      }
      ++i;
    } else {
      while (!at_end() && format_[i] >= '0' && format_[i] <= '9') {
        spec.width = std::max<int64_t>(spec.width, 0) * 10 + (format_[i++] - '0');
        if (spec.width > 100000) return format_error("width too big");
      }
    }
    if (!at_end() && format_[i] == '.') {
      ++i;
      spec.precision = 0;
      if (!at_end() && format_[i] == '*') {
        auto p = star_arg();
        if (!p.ok()) return p.status();
        spec.precision = std::max<int64_t>(*p, 0);
        ++i;
      } else {
        while (!at_end() && format_[i] >= '0' && format_[i] <= '9') {
          spec.precision = spec.precision * 10 + (format_[i++] - '0');
          if (spec.precision > 100000) return format_error("precision too big");
        }
      }
    }
    while (!at_end() && (format_[i] == 'h' || format_[i] == 'l' || format_[i] == 'L')) ++i;
    if (at_end()) return format_error("incomplete format");
    spec.type = format_[i++];
    *pos = i;
    if (spec.type == '%') {
      out->push_back('%');
      return absl::OkStatus();
    }
    if (!have_arg) {
      auto a = next_arg();
      if (!a.ok()) return a.status();
      arg = std::move(*a);
    }
    switch (spec.type) {
      case 's':
      case 'r':
      case 'a': {
        std::string text;
        Status s = spec.type == 's' ? append_str(arg, &text) : append_repr(arg, &text);
        if (!s.ok()) return s;
        if (spec.type == 'a') text = ascii_repr(text);
        if (escape_ && !(spec.type == 's' && arg.markup())) {
          // Markup % args: markupsafe escapes each argument's str() / repr().
          std::string escaped;
          append_html_escaped(text, &escaped);
          text = std::move(escaped);
        }
        if (spec.precision >= 0) {
          text.resize(byte_offset(text, static_cast<size_t>(spec.precision)));
        }
        pad(text, spec, out);
        return absl::OkStatus();
      }
      case 'd':
      case 'i':
      case 'u':
      case 'o':
      case 'x':
      case 'X':
        return format_integer(arg, spec, out);
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
        return format_float(arg, spec, out);
      case 'c': {
        std::string ch;
        if (arg.is_integral()) {
          if (arg.as_int() < 0 || arg.as_int() > 0x10FFFF) {
            return format_error("%c arg not in range(0x110000)");
          }
          append_utf8(static_cast<char32_t>(arg.as_int()), &ch);
        } else if (arg.is_string() && char_count(arg.str()) == 1) {
          ch = std::string(arg.str());
        } else {
          return format_error("%c requires int or char");
        }
        pad(ch, spec, out);
        return absl::OkStatus();
      }
      default:
        return format_error(std::string("unsupported format character '") + spec.type + "'");
    }
  }

  std::string_view format_;
  const Value& args_;
  const bool escape_;
  const std::vector<Value>* tuple_ = nullptr;
  bool mapping_ = false;
  size_t next_ = 0;
  bool single_used_ = false;
};

}  // namespace

Result<Value> percent_format(const Value& format, const Value& args) {
  auto text = Formatter(format.str(), args, format.markup()).run();
  if (!text.ok()) return text.status();
  return Value::string(std::move(*text), format.markup());
}

}  // namespace kvgate::jinja
