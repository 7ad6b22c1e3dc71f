#include "tokenizer/pattern.h"

#include "tokenizer/json_util.h"

namespace kvgate::tokenizer {

Result<Pattern> Pattern::from_json(simdjson::simdjson_result<simdjson::dom::element> json) {
  std::string_view v;
  if (json["String"].get_string().get(v) == simdjson::SUCCESS) return of_string(std::string(v));
  if (json["Regex"].get_string().get(v) == simdjson::SUCCESS) return regex(v);
  return absl::InvalidArgumentError("pattern: expected {\"String\": ...} or {\"Regex\": ...}");
}

Result<Pattern> Pattern::regex(std::string_view pattern) {
  auto re = Regex::compile(pattern);
  if (!re.ok()) return re.status();
  Pattern p;
  p.regex_ = std::move(*re);
  return p;
}

Pattern Pattern::of_string(std::string literal) {
  Pattern p;
  p.literal_ = std::move(literal);
  return p;
}

void Pattern::find_matches(std::string_view text, std::vector<Span>* out) const {
  out->clear();
  if (text.empty()) {
    out->push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  const auto on_match = [&](size_t start, size_t end) {
    if (prev != start) out->push_back({prev, start, false});
    out->push_back({start, end, true});
    prev = end;
  };
  if (regex_) {
    regex_->for_each_match(text, on_match);
  } else if (!literal_.empty()) {
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size())) {
      on_match(at, at + literal_.size());
    }
  }
  if (prev != text.size()) out->push_back({prev, text.size(), false});
}

void Pattern::replace_all(std::string* text, std::string_view content) const {
  if (!regex_ && (literal_.empty() || text->find(literal_) == std::string::npos)) return;
  std::vector<Span> spans;
  find_matches(*text, &spans);
  std::string out;
  out.reserve(text->size());
  for (const Span& s : spans) {
    if (s.match) {
      out += content;
    } else {
      out.append(*text, s.start, s.end - s.start);
    }
  }
  *text = std::move(out);
}

}  // namespace kvgate::tokenizer
