#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "tokenizer/unicode.h"

namespace kvgate::tokenizer {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// One pair of offsets is all a split needs (with more groups than pairs pcre2_match returns 0
// and still sets the whole match), so one match block per thread serves every pattern.
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};

}  // namespace

Result<Regex> Regex::compile(std::string_view pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  // Already-validated UTF-8 in, so the per-match check is skipped (PCRE2_NO_UTF_CHECK below).
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return absl::InvalidArgumentError("regex /" + std::string(pattern) + "/ at offset " +
                                      std::to_string(offset) + ": " +
                                      reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if unavailable
  Regex r;
  r.pattern_ = std::string(pattern);
  auto c = std::make_shared<Code>();
  c->code = code;
  r.code_ = std::move(c);
  return r;
}

void Regex::for_each_match(std::string_view text,
                           absl::FunctionRef<void(size_t, size_t)> on_match) const {
  thread_local MatchData md;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at <= text.size()) {
    const int rc =
        pcre2_match(code_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, md.data, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: no further matches
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t start = ov[0];
    const size_t end = ov[1];
    on_match(start, end);
    if (end > start) {
      at = end;
    } else {
      if (end >= text.size()) break;
      at = end + char_len(static_cast<unsigned char>(text[end]));
    }
  }
}

}  // namespace kvgate::tokenizer
