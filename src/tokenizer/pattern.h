// Pattern: what Split and Replace look for, a literal string or a regex ({"String": ...} or
// {"Regex": ...} in tokenizer.json).
//
// Threading: immutable after construction.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "simdjson.h"
#include "tokenizer/regex.h"

namespace kvgate::tokenizer {

// A stretch of text: [start, end), and whether the pattern matched it.
struct Span {
  size_t start;
  size_t end;
  bool match;
};

class Pattern {
 public:
  static Result<Pattern> from_json(simdjson::simdjson_result<simdjson::dom::element> json);
  static Pattern of_string(std::string literal);
  static Result<Pattern> regex(std::string_view pattern);

  // `text` cut into matches and the stretches between them, in order, covering all of it (an
  // empty text is one empty non-match).
  void find_matches(std::string_view text, std::vector<Span>* out) const;
  // Every match replaced by `content`.
  void replace_all(std::string* text, std::string_view content) const;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
};

}  // namespace kvgate::tokenizer
