#include "replay/prompt.h"

#include <charconv>
#include <cmath>

#include "kvgate/core/json_writer.h"

namespace kvgate::replay {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Result<size_t> parse_index(std::string_view s, std::string_view spec) {
  size_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    return absl::InvalidArgumentError("--rows: \"" + std::string(spec) +
                                      "\" is not A:B with non-negative row numbers");
  }
  return v;
}

}  // namespace

Result<RowRange> parse_rows(std::string_view spec) {
  RowRange r;
  if (spec.empty() || spec == ":") return r;
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) {
    auto v = parse_index(spec, spec);
    if (!v.ok()) return v.status();
    return RowRange{*v, *v + 1};
  }
  const std::string_view a = spec.substr(0, colon);
  const std::string_view b = spec.substr(colon + 1);
  if (!a.empty()) {
    auto v = parse_index(a, spec);
    if (!v.ok()) return v.status();
    r.begin = *v;
  }
  if (!b.empty()) {
    auto v = parse_index(b, spec);
    if (!v.ok()) return v.status();
    r.end = *v;
  }
  if (r.end <= r.begin) {
    return absl::InvalidArgumentError("--rows: \"" + std::string(spec) +
                                      "\" selects nothing (B must be greater than A)");
  }
  return r;
}

Status validate(const PromptOptions& o) {
  if (o.block_tokens == 0 || o.block_tokens > corpus::kTraceBlockTokens) {
    return absl::InvalidArgumentError("tokens per hash id must be in 1..512");
  }
  if (o.vocab < 2) return absl::InvalidArgumentError("--vocab must be at least 2");
  return Status();
}

Result<uint32_t> block_tokens_for_length_factor(double factor) {
  if (!(factor > 0 && factor <= 1)) {
    return absl::InvalidArgumentError("--length-factor must be in (0, 1]");
  }
  const double t = std::round(factor * corpus::kTraceBlockTokens);
  return static_cast<uint32_t>(std::max(1.0, t));
}

uint64_t PromptBuilder::prompt_tokens(const corpus::TraceRow& row) const {
  const uint64_t n = row.hash_ids.size();
  if (n == 0) return 0;
  const uint64_t t = options_.block_tokens;
  const uint64_t scaled =
      (row.input_length * t + corpus::kTraceBlockTokens - 1) / corpus::kTraceBlockTokens;
  // Into the last id's block: at least one token of it, at most all of it.
  return std::clamp<uint64_t>(scaled, (n - 1) * t + 1, n * t);
}

TokenId PromptBuilder::token(uint64_t h, uint32_t j) const {
  const uint64_t x = splitmix64(options_.seed ^ splitmix64(h)) + j;
  return static_cast<TokenId>(splitmix64(x) % options_.vocab);
}

void PromptBuilder::build(const corpus::TraceRow& row, std::vector<TokenId>* out) const {
  out->clear();
  uint64_t left = prompt_tokens(row);
  out->reserve(left);
  for (uint64_t h : row.hash_ids) {
    const uint32_t take = static_cast<uint32_t>(std::min<uint64_t>(left, options_.block_tokens));
    for (uint32_t j = 0; j < take; ++j) out->push_back(token(h, j));
    left -= take;
    if (left == 0) break;
  }
}

void completion_body(std::string_view model, const std::vector<TokenId>& prompt,
                     uint64_t max_tokens, std::string* out) {
  out->clear();
  out->reserve(64 + model.size() + prompt.size() * 6);
  out->append("{\"model\":");
  append_json_string(out, model);
  out->append(",\"prompt\":[");
  char buf[24];
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (i != 0) out->push_back(',');
    const auto r = std::to_chars(buf, buf + sizeof(buf), prompt[i]);
    out->append(buf, r.ptr);
  }
  out->append("],\"max_tokens\":");
  const auto r = std::to_chars(buf, buf + sizeof(buf), max_tokens);
  out->append(buf, r.ptr);
  out->append(",\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
}

void chat_messages(const corpus::TraceRow& row, uint64_t seed, uint32_t words_per_id,
                   std::string* out) {
  out->clear();
  out->push_back('[');
  char buf[24];
  for (size_t i = 0; i < row.hash_ids.size(); ++i) {
    if (i != 0) out->push_back(',');
    out->append(i % 2 == 0 ? R"({"role":"user","content":")"
                           : R"({"role":"assistant","content":")");
    const uint64_t base = splitmix64(seed ^ splitmix64(row.hash_ids[i]));
    for (uint32_t j = 0; j < words_per_id; ++j) {
      if (j != 0) out->push_back(j % 12 == 0 ? '.' : ' ');
      if (j % 12 == 0 && j != 0) out->push_back(' ');
      const auto r = std::to_chars(buf, buf + sizeof(buf), splitmix64(base + j) % 50'000);
      out->push_back('w');
      out->append(buf, r.ptr);
    }
    out->append("\"}");
  }
  out->push_back(']');
}

void chat_body(std::string_view model, std::string_view messages_json, uint64_t max_tokens,
               std::string* out) {
  out->clear();
  out->reserve(96 + model.size() + messages_json.size());
  out->append("{\"model\":");
  append_json_string(out, model);
  out->append(",\"messages\":");
  out->append(messages_json);
  out->append(",\"max_tokens\":");
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), max_tokens);
  out->append(buf, r.ptr);
  out->append(",\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
}

}  // namespace kvgate::replay
