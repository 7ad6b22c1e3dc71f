// Regex: the pre-tokenizers' patterns (Oniguruma syntax in tokenizer.json: \p{L}, (?i:...),
// (?!\S)) run on PCRE2, compiled for UTF-8 with Unicode classes and JIT.
//
// Threading: immutable after compile(); for_each_match() from any thread (each call has its own
// match data).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "kvgate/core/result.h"

namespace kvgate::tokenizer {

class Regex {
 public:
  static Result<Regex> compile(std::string_view pattern);

  // Calls on_match(start, end) for each non-overlapping match, left to right; after an empty
  // match the search resumes one character later (as Oniguruma's iteration does).
  void for_each_match(std::string_view text,
                      absl::FunctionRef<void(size_t, size_t)> on_match) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

}  // namespace kvgate::tokenizer
