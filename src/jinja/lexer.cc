// Mirrors jinja2's Lexer.tokeniter (3.1): the same first-match rules, in the same order, with
// Python's definition of whitespace (str.isspace, and re's \s) everywhere.
#include "jinja/lexer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "jinja/unicode.h"

namespace kvgate::jinja {
namespace {

struct OperatorSpelling {
  std::string_view text;
  Tok type;
};

// Longest first, as jinja2 sorts its operator regex.
constexpr OperatorSpelling kOperators[] = {
    {"//", Tok::kFloorDiv}, {"**", Tok::kPow},      {"==", Tok::kEq},    {"!=", Tok::kNe},
    {">=", Tok::kGe},       {"<=", Tok::kLe},       {"+", Tok::kAdd},    {"-", Tok::kSub},
    {"/", Tok::kDiv},       {"*", Tok::kMul},       {"%", Tok::kMod},    {"~", Tok::kTilde},
    {"[", Tok::kLBracket},  {"]", Tok::kRBracket},  {"(", Tok::kLParen}, {")", Tok::kRParen},
    {"{", Tok::kLBrace},    {"}", Tok::kRBrace},    {">", Tok::kGt},     {"<", Tok::kLt},
    {"=", Tok::kAssign},    {".", Tok::kDot},       {":", Tok::kColon},  {"|", Tok::kPipe},
    {",", Tok::kComma},     {";", Tok::kSemicolon},
};

enum class Tag { kBlock, kVariable, kComment, kRaw };

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

size_t count_newlines(std::string_view s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view origin) : src_(src), origin_(origin) {}

  Result<std::vector<Token>> run() {
    while (pos_ < src_.size()) {
      if (Status s = root(); !s.ok()) return s;
    }
    push(Tok::kEof, {});
    return std::move(tokens_);
  }

 private:
  Status error(std::string what) const {
    return absl::InvalidArgumentError(std::string(origin_) + ":" + std::to_string(line_) + ": " +
                                      what);
  }

  Token& push(Tok type, std::string_view text) {
    tokens_.push_back(Token{type, line_, text, {}, 0, 0});
    return tokens_.back();
  }

  bool at(size_t i, std::string_view s) const { return src_.substr(i, s.size()) == s; }

  // The end of Python's \s* from i.
  size_t skip_space(size_t i) const {
    while (i < src_.size()) {
      size_t next = i;
      if (!py_isspace(decode_at(src_, &next))) break;
      i = next;
    }
    return i;
  }

  // `{%(-|+|)\s*raw\s*(-%}\s*|%})` at i: its end, or 0.
  size_t raw_begin_end(size_t i) const {
    i += 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_space(i);
    if (!at(i, "raw")) return 0;
    i = skip_space(i + 3);
    if (at(i, "-%}")) return skip_space(i + 3);
    if (at(i, "%}")) return i + 2;
    return 0;
  }

  // `{%(-|+|)\s*endraw\s*(+%}|-%}\s*|%}\n?)` at i: its end, or 0.
  size_t raw_end_end(size_t i) const {
    i += 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_space(i);
    if (!at(i, "endraw")) return 0;
    i = skip_space(i + 6);
    return block_end_end(i);
  }

  // `+%}|-%}\s*|%}\n?` at i: its end, or 0.
  size_t block_end_end(size_t i) const {
    if (at(i, "+%}")) return i + 3;
    if (at(i, "-%}")) return skip_space(i + 3);
    if (at(i, "%}")) return i + 2 + (at(i + 2, "\n") ? 1 : 0);
    return 0;
  }

  // The text before a tag, with the tag's whitespace control applied (jinja2's OptionalLStrip).
  void emit_text(size_t begin, size_t end, char sign, bool lstrip_allowed) {
    std::string_view text = src_.substr(begin, end - begin);
    size_t stripped_newlines = 0;
    if (sign == '-') {
      const std::string_view kept = py_strip(text, nullptr, false, true);
      stripped_newlines = count_newlines(text.substr(kept.size()));
      text = kept;
    } else if (sign != '+' && lstrip_allowed) {
      const size_t nl = text.rfind('\n');
      const size_t line_start = nl == std::string_view::npos ? 0 : nl + 1;
      if (line_start > 0 || line_starting_) {
        if (py_strip(text.substr(line_start), nullptr, true, false).empty()) {
          text = text.substr(0, line_start);
        }
      }
    }
    if (!text.empty()) push(Tok::kData, text);
    line_ += static_cast<int>(count_newlines(text) + stripped_newlines);
  }

  Status root() {
    // The first tag start (the raw block's opening counts before a plain block's).
    Tag tag = Tag::kBlock;
    size_t start = std::string_view::npos, tag_end = 0;
    for (size_t p = src_.find('{', pos_); p != std::string_view::npos; p = src_.find('{', p + 1)) {
      if (p + 1 >= src_.size()) break;
      const char c = src_[p + 1];
      if (c != '%' && c != '{' && c != '#') continue;
      start = p;
      tag = c == '%' ? Tag::kBlock : c == '{' ? Tag::kVariable : Tag::kComment;
      if (tag == Tag::kBlock) {
        if (size_t e = raw_begin_end(p)) {
          tag = Tag::kRaw;
          tag_end = e;
          break;
        }
      }
      tag_end = p + 2;
      if (tag_end < src_.size() && (src_[tag_end] == '-' || src_[tag_end] == '+')) ++tag_end;
      break;
    }
    if (start == std::string_view::npos) {
      push(Tok::kData, src_.substr(pos_));
      line_ += static_cast<int>(count_newlines(src_.substr(pos_)));
      pos_ = src_.size();
      return absl::OkStatus();
    }
    const char sign = start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+')
                          ? src_[start + 2]
                          : '\0';
    emit_text(pos_, start, sign, tag != Tag::kVariable);
    const std::string_view opening = src_.substr(start, tag_end - start);
    const int tag_line = line_;
    line_ += static_cast<int>(count_newlines(opening));
    line_starting_ = opening.back() == '\n';
    pos_ = tag_end;
    switch (tag) {
      case Tag::kComment:
        return comment();
      case Tag::kRaw:
        return raw();
      case Tag::kBlock:
        tokens_.push_back(Token{Tok::kBlockBegin, tag_line, opening, {}, 0, 0});
        return inside_tag(Tok::kBlockEnd);
      case Tag::kVariable:
        tokens_.push_back(Token{Tok::kVariableBegin, tag_line, opening, {}, 0, 0});
        return inside_tag(Tok::kVariableEnd);
    }
    return absl::OkStatus();
  }

  Status comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string_view::npos) return error("Missing end of comment tag");
    size_t end;
    if (close > pos_ && src_[close - 1] == '-') {
      end = skip_space(close + 2);
    } else if (close > pos_ && src_[close - 1] == '+') {
      end = close + 2;
    } else {
      end = close + 2 + (at(close + 2, "\n") ? 1 : 0);
    }
    line_ += static_cast<int>(count_newlines(src_.substr(pos_, end - pos_)));
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
    return absl::OkStatus();
  }

  Status raw() {
    for (size_t p = src_.find("{%", pos_); p != std::string_view::npos;
         p = src_.find("{%", p + 1)) {
      const size_t end = raw_end_end(p);
      if (end == 0) continue;
      const char sign =
          p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+') ? src_[p + 2] : '\0';
      emit_text(pos_, p, sign, true);
      line_ += static_cast<int>(count_newlines(src_.substr(p, end - p)));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return absl::OkStatus();
    }
    return error("Missing end of raw directive");
  }

  // The tokens of a {% %} or {{ }} up to its end delimiter.
  Status inside_tag(Tok end_type) {
    std::vector<char> balancing;
    while (pos_ < src_.size()) {
      if (balancing.empty()) {
        size_t end = 0;
        if (end_type == Tok::kBlockEnd) {
          end = block_end_end(pos_);
        } else if (at(pos_, "-}}")) {
          end = skip_space(pos_ + 3);
        } else if (at(pos_, "}}")) {
          end = pos_ + 2;
        }
        if (end != 0) {
          push(end_type, src_.substr(pos_, end - pos_));
          line_ += static_cast<int>(count_newlines(src_.substr(pos_, end - pos_)));
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return absl::OkStatus();
        }
      }
      if (size_t end = skip_space(pos_); end != pos_) {
        line_ += static_cast<int>(count_newlines(src_.substr(pos_, end - pos_)));
        pos_ = end;
        continue;
      }
      if (Status s = one_token(&balancing); !s.ok()) return s;
    }
    return absl::OkStatus();  // the parser reports the unclosed tag
  }

  // (\d+_)*\d+ at i: its end, or npos.
  size_t digits_end(size_t i) const {
    if (i >= src_.size() || !is_digit(src_[i])) return std::string_view::npos;
    while (true) {
      while (i < src_.size() && is_digit(src_[i])) ++i;
      if (i + 1 < src_.size() && src_[i] == '_' && is_digit(src_[i + 1])) {
        ++i;
        continue;
      }
      return i;
    }
  }

  size_t exponent_end(size_t i) const {
    if (i >= src_.size() || (src_[i] != 'e' && src_[i] != 'E')) return std::string_view::npos;
    ++i;
    if (i < src_.size() && (src_[i] == '+' || src_[i] == '-')) ++i;
    return digits_end(i);
  }

  size_t float_end(size_t i) const {
    if (i > 0 && src_[i - 1] == '.') return std::string_view::npos;
    const size_t whole = digits_end(i);
    if (whole == std::string_view::npos) return whole;
    if (at(whole, ".")) {
      const size_t frac = digits_end(whole + 1);
      if (frac != std::string_view::npos) {
        const size_t exp = exponent_end(frac);
        return exp != std::string_view::npos ? exp : frac;
      }
    }
    return exponent_end(whole);
  }

  // 0b(_?[01])+ | 0o(_?[0-7])+ | 0x(_?[0-9a-f])+ | [1-9](_?\d)* | 0(_?0)*, and its base.
  size_t integer_end(size_t i, int* base) const {
    auto run = [&](size_t j, auto ok) {
      size_t end = std::string_view::npos;
      while (true) {
        size_t k = j;
        if (k < src_.size() && src_[k] == '_') ++k;
        if (k < src_.size() && ok(src_[k])) {
          j = k + 1;
          end = j;
        } else {
          return end;
        }
      }
    };
    if (src_[i] == '0' && i + 1 < src_.size()) {
      const char p = static_cast<char>(src_[i + 1] | 0x20);
      size_t end = std::string_view::npos;
      if (p == 'b') {
        end = run(i + 2, [](char c) { return c == '0' || c == '1'; });
        *base = 2;
      } else if (p == 'o') {
        end = run(i + 2, [](char c) { return c >= '0' && c <= '7'; });
        *base = 8;
      } else if (p == 'x') {
        end = run(i + 2,
                  [](char c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); });
        *base = 16;
      }
      if (end != std::string_view::npos) return end;
    }
    *base = 10;
    if (src_[i] >= '1' && src_[i] <= '9') {
      const size_t end = run(i + 1, is_digit);
      return end == std::string_view::npos ? i + 1 : end;
    }
    if (src_[i] == '0') {
      const size_t end = run(i + 1, [](char c) { return c == '0'; });
      return end == std::string_view::npos ? i + 1 : end;
    }
    return std::string_view::npos;
  }

  Status one_token(std::vector<char>* balancing) {
    const size_t i = pos_;
    if (size_t end = float_end(i); end != std::string_view::npos) {
      std::string digits;
      for (char c : src_.substr(i, end - i)) {
        if (c != '_') digits.push_back(c);
      }
      push(Tok::kFloat, src_.substr(i, end - i)).number = std::strtod(digits.c_str(), nullptr);
      pos_ = end;
      return absl::OkStatus();
    }
    int base = 10;
    if (size_t end = integer_end(i, &base); end != std::string_view::npos) {
      const std::string_view text = src_.substr(i, end - i);
      uint64_t value = 0;
      for (char c : base == 10 ? text : text.substr(2)) {
        if (c == '_') continue;
        const int d = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        if (__builtin_mul_overflow(value, static_cast<uint64_t>(base), &value) ||
            __builtin_add_overflow(value, static_cast<uint64_t>(d), &value) ||
            value > static_cast<uint64_t>(INT64_MAX)) {
          return error("integer literal too large (integers are 64-bit)");
        }
      }
      push(Tok::kInteger, text).integer = static_cast<int64_t>(value);
      pos_ = end;
      return absl::OkStatus();
    }
    if (is_name_start(src_[i])) {
      size_t end = i + 1;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      push(Tok::kName, src_.substr(i, end - i));
      pos_ = end;
      return absl::OkStatus();
    }
    if (src_[i] == '\'' || src_[i] == '"') return string_literal();
    for (const auto& op : kOperators) {
      if (!at(i, op.text)) continue;
      if (op.type == Tok::kLBrace || op.type == Tok::kLParen || op.type == Tok::kLBracket) {
        balancing->push_back(op.type == Tok::kLBrace ? '}' : op.type == Tok::kLParen ? ')' : ']');
      } else if (op.type == Tok::kRBrace || op.type == Tok::kRParen || op.type == Tok::kRBracket) {
        if (balancing->empty()) return error("unexpected '" + std::string(op.text) + "'");
        const char expected = balancing->back();
        balancing->pop_back();
        if (expected != op.text[0]) {
          return error("unexpected '" + std::string(op.text) + "', expected '" +
                       std::string(1, expected) + "'");
        }
      }
      push(op.type, op.text);
      pos_ = i + op.text.size();
      return absl::OkStatus();
    }
    size_t next = i;
    std::string c;
    append_utf8(decode_at(src_, &next), &c);
    return error("unexpected char '" + c + "' at " + std::to_string(i));
  }

  Status string_literal() {
    const char quote = src_[pos_];
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) {
      if (src_[i] == '\\') {
        if (i + 1 >= src_.size()) break;
        size_t next = i + 1;
        decode_at(src_, &next);
        i = next;
      } else {
        ++i;
      }
    }
    if (i >= src_.size()) {
      return error(std::string("unexpected char '") + quote + "' at " + std::to_string(pos_));
    }
    const std::string_view body = src_.substr(pos_ + 1, i - pos_ - 1);
    Token& t = push(Tok::kString, src_.substr(pos_, i + 1 - pos_));
    if (Status s = unescape(body, &t.string); !s.ok()) return s;
    line_ += static_cast<int>(count_newlines(body));
    pos_ = i + 1;
    return absl::OkStatus();
  }

  // Python's unicode-escape decoding, as jinja2 decodes string literals (after turning non-ASCII
  // characters into \x/\u/\U escapes, which is why a backslash before one stays literal).
  Status unescape(std::string_view body, std::string* out) const {
    for (size_t i = 0; i < body.size();) {
      if (body[i] != '\\') {
        const size_t start = i;
        decode_at(body, &i);
        out->append(body.substr(start, i - start));
        continue;
      }
      const size_t esc = i + 1;
      const char c = body[esc];
      i = esc + 1;
      switch (c) {
        case '\n':
          break;
        case '\\':
        case '\'':
        case '"':
          out->push_back(c);
          break;
        case 'a':
          out->push_back('\a');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'v':
          out->push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = esc + 1 + k < body.size() ? body[esc + 1 + k] : '\0';
            const int d = is_digit(h)                                ? h - '0'
                          : ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') ? (h | 0x20) - 'a' + 10
                                                                     : -1;
            if (d < 0) return error(std::string("truncated \\") + c + " escape in a string");
            v = v * 16 + static_cast<uint32_t>(d);
          }
          if (v > 0x10FFFF) return error("illegal Unicode character in a string escape");
          if (v >= 0xD800 && v <= 0xDFFF) {
            return error("surrogate escapes in strings are not supported");
          }
          append_utf8(v, out);
          i = esc + 1 + n;
          break;
        }
        case 'N':
          return error("\\N{...} escapes in strings are not supported");
        default:
          if (c >= '0' && c <= '7') {
            uint32_t v = static_cast<uint32_t>(c - '0');
            for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k) {
              v = v * 8 + static_cast<uint32_t>(body[i++] - '0');
            }
            append_utf8(v, out);
          } else if (static_cast<unsigned char>(c) >= 0x80) {
            // Python saw "\\" followed by the character's own escape text.
            size_t j = esc;
            const char32_t ch = decode_at(body, &j);
            char buf[16];
            if (ch <= 0xFF) {
              std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(ch));
            } else if (ch <= 0xFFFF) {
              std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(ch));
            } else {
              std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(ch));
            }
            *out += buf;
            i = j;
          } else {
            out->push_back('\\');
            out->push_back(c);
          }
      }
    }
    return absl::OkStatus();
  }

  std::string_view src_;
  std::string_view origin_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
};

}  // namespace

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kData:
      return "template data";
    case Tok::kVariableBegin:
      return "begin of print statement";
    case Tok::kVariableEnd:
      return "end of print statement";
    case Tok::kBlockBegin:
      return "begin of statement block";
    case Tok::kBlockEnd:
      return "end of statement block";
    case Tok::kEof:
      return "end of template";
    case Tok::kString:
      return "string";
    case Tok::kInteger:
      return "integer";
    case Tok::kFloat:
      return "float";
    default:
      return "'" + std::string(t.text) + "'";
  }
}

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

Result<std::vector<Token>> tokenize(std::string_view source, std::string_view origin) {
  return Lexer(source, origin).run();
}

}  // namespace kvgate::jinja
