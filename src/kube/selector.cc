#include "kvgate/kube/selector.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace kvgate::kube {
namespace {

// The characters that end an identifier, as Kubernetes' selector lexer has them.
bool is_special(char c) {
  return c == '!' || c == '=' || c == '(' || c == ')' || c == ',' || c == '<' || c == '>';
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// A label name, or the name part of a key: at most 63 of [A-Za-z0-9_.-], alphanumeric at both
// ends. Returns what is wrong, or "" when it is fine.
std::string name_problem(std::string_view s, std::string_view what) {
  if (s.empty()) return std::string(what) + " is empty";
  if (s.size() > 63) return std::string(what) + " is longer than 63 characters";
  if (!is_alnum(s.front()) || !is_alnum(s.back())) {
    return std::string(what) + " must start and end with a letter or digit";
  }
  for (char c : s) {
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.') {
      return std::string(what) + " may hold only letters, digits, '-', '_' and '.'";
    }
  }
  return "";
}

// A DNS subdomain (RFC 1123): lowercase labels of [a-z0-9-] joined by dots, at most 253.
std::string prefix_problem(std::string_view s) {
  if (s.empty()) return "the key's prefix (before '/') is empty";
  if (s.size() > 253) return "the key's prefix is longer than 253 characters";
  size_t start = 0;
  while (start <= s.size()) {
    const size_t dot = std::min(s.find('.', start), s.size());
    const std::string_view label = s.substr(start, dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') {
      return "the key's prefix must be a DNS subdomain (lowercase labels joined by dots)";
    }
    for (char c : label) {
      if (!(std::islower(static_cast<unsigned char>(c)) ||
            std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
        return "the key's prefix must be a DNS subdomain (lowercase labels joined by dots)";
      }
    }
    start = dot + 1;
  }
  return "";
}

std::string key_problem(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return name_problem(key, "the key");
  if (std::string p = prefix_problem(key.substr(0, slash)); !p.empty()) return p;
  return name_problem(key.substr(slash + 1), "the key's name (after '/')");
}

std::string value_problem(std::string_view value) {
  return value.empty() ? "" : name_problem(value, "the value");
}

}  // namespace

// Kubernetes' selector grammar, over a lexer of identifiers and the special characters.
class SelectorParser {
 public:
  explicit SelectorParser(std::string_view text) : text_(text) {}

  Result<Selector> parse() {
    Selector out;
    skip_space();
    if (pos_ == text_.size()) return out;
    for (;;) {
      Result<Selector::Term> term = parse_term();
      if (!term.ok()) return term.status();
      out.terms_.push_back(*std::move(term));
      skip_space();
      if (pos_ == text_.size()) break;
      if (text_[pos_] != ',') return error("expected ',' or the end after a term");
      ++pos_;
    }
    std::stable_sort(
        out.terms_.begin(), out.terms_.end(),
        [](const Selector::Term& a, const Selector::Term& b) { return a.key < b.key; });
    return out;
  }

 private:
  using Op = Selector::Op;

  Result<Selector::Term> parse_term() {
    Selector::Term term;
    skip_space();
    const bool negated = pos_ < text_.size() && text_[pos_] == '!' &&
                         !(pos_ + 1 < text_.size() && text_[pos_ + 1] == '=');
    if (negated) ++pos_;
    skip_space();
    const size_t key_at = pos_;
    term.key = std::string(identifier());
    if (term.key.empty()) return error("expected a label key");
    if (std::string p = key_problem(term.key); !p.empty()) return error_at(key_at, p);
    skip_space();
    if (negated || at_term_end()) {
      term.op = negated ? Op::kDoesNotExist : Op::kExists;
      if (negated && !at_term_end()) return error("expected ',' or the end after '!key'");
      return term;
    }
    if (Status s = parse_operator(&term); !s.ok()) return s;
    if (term.op == Op::kIn || term.op == Op::kNotIn) {
      if (Status s = parse_set(&term); !s.ok()) return s;
    } else {
      skip_space();
      const size_t value_at = pos_;
      std::string value(identifier());
      if (std::string p = value_problem(value); !p.empty()) return error_at(value_at, p);
      term.values.push_back(std::move(value));
    }
    return term;
  }

  Status parse_operator(Selector::Term* term) {
    if (consume("==") || consume("=")) {
      term->op = Op::kEquals;
    } else if (consume("!=")) {
      term->op = Op::kNotEquals;
    } else if (text_[pos_] == '<' || text_[pos_] == '>') {
      return error("the operators '<' and '>' are not supported");
    } else {
      const size_t op_at = pos_;
      const std::string_view word = identifier();
      if (word == "in") {
        term->op = Op::kIn;
      } else if (word == "notin") {
        term->op = Op::kNotIn;
      } else {
        pos_ = op_at;
        return error("expected an operator (=, ==, !=, in, notin), ',' or the end after the key");
      }
    }
    return Status();
  }

  // "(v1, v2, ...)": at least one value; a value may be empty ("(a,)").
  Status parse_set(Selector::Term* term) {
    skip_space();
    if (!consume("(")) return error("expected '(' after 'in' or 'notin'");
    skip_space();
    if (consume(")")) return error_at(pos_ - 1, "a set of values must not be empty");
    for (;;) {
      skip_space();
      const size_t value_at = pos_;
      std::string value(identifier());
      if (std::string p = value_problem(value); !p.empty()) return error_at(value_at, p);
      term->values.push_back(std::move(value));
      skip_space();
      if (consume(")")) break;
      if (!consume(",")) return error("expected ',' or ')' in a set of values");
    }
    std::sort(term->values.begin(), term->values.end());
    term->values.erase(std::unique(term->values.begin(), term->values.end()), term->values.end());
    return Status();
  }

  std::string_view identifier() {
    const size_t start = pos_;
    while (pos_ < text_.size() && !is_space(text_[pos_]) && !is_special(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  bool consume(std::string_view s) {
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  bool at_term_end() const { return pos_ == text_.size() || text_[pos_] == ','; }

  Status error(std::string_view what) const { return error_at(pos_, what); }
  Status error_at(size_t at, std::string_view what) const {
    std::string found = at < text_.size() ? "'" + std::string(1, text_[at]) + "'" : "the end";
    return absl::InvalidArgumentError("label selector \"" + std::string(text_) +
                                      "\": at character " + std::to_string(at + 1) + " (" + found +
                                      "): " + std::string(what));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Result<Selector> Selector::parse(std::string_view text) { return SelectorParser(text).parse(); }

bool Selector::Term::holds(const std::map<std::string, std::string>& labels) const {
  const auto it = labels.find(key);
  const bool present = it != labels.end();
  const auto in_values = [&] {
    return present && std::binary_search(values.begin(), values.end(), it->second);
  };
  switch (op) {
    case Op::kEquals:
    case Op::kIn:
      return in_values();
    case Op::kNotEquals:
    case Op::kNotIn:
      return !in_values();
    case Op::kExists:
      return present;
    case Op::kDoesNotExist:
      return !present;
  }
  return false;
}

bool Selector::matches(const std::map<std::string, std::string>& labels) const {
  return std::all_of(terms_.begin(), terms_.end(), [&](const Term& t) { return t.holds(labels); });
}

std::string Selector::text() const {
  std::string out;
  for (const Term& t : terms_) {
    if (!out.empty()) out += ',';
    switch (t.op) {
      case Op::kEquals:
        out += t.key + "=" + t.values.front();
        break;
      case Op::kNotEquals:
        out += t.key + "!=" + t.values.front();
        break;
      case Op::kIn:
      case Op::kNotIn:
        out += t.key + (t.op == Op::kIn ? " in (" : " notin (");
        for (size_t i = 0; i < t.values.size(); ++i) out += (i ? "," : "") + t.values[i];
        out += ')';
        break;
      case Op::kExists:
        out += t.key;
        break;
      case Op::kDoesNotExist:
        out += "!" + t.key;
        break;
    }
  }
  return out;
}

}  // namespace kvgate::kube
