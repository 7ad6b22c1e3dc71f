// Turning Mooncake trace rows into prompts: each hash id becomes a deterministic block of token
// ids, so equal ids give equal tokens and the trace's prefix structure survives at any engine
// block size that divides the id's block.
//
//   token j of hash id h = splitmix64(seed ^ splitmix64(h) + j) mod vocab
//
// The trace's ids name 512-token blocks (kTraceBlockTokens); `block_tokens` shrinks every id to
// fewer tokens (the length factor: 128 tokens per id is a factor of 0.25), and the prompt's
// length scales with it: ceil(input_length * block_tokens / 512), clamped into the last id's
// block, so the last block is partial exactly when the trace says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/result.h"
#include "kvgate/corpus/mooncake_trace.h"

namespace kvgate::replay {

// Rows [begin, end) of a trace. "A:B", "A:" (to the end), ":B", "N" (row N alone) or "" (all).
struct RowRange {
  size_t begin = 0;
  size_t end = std::numeric_limits<size_t>::max();
};
Result<RowRange> parse_rows(std::string_view spec);

struct PromptOptions {
  uint32_t block_tokens = corpus::kTraceBlockTokens;  // tokens per hash id, 1..512
  uint64_t seed = 0;
  uint32_t vocab = 32'000;  // token ids are drawn below this
};

// Validates the options (block_tokens in 1..512, vocab >= 2).
Status validate(const PromptOptions& options);
// The tokens per hash id for a length factor in (0, 1]: round(512 * factor), at least 1.
Result<uint32_t> block_tokens_for_length_factor(double factor);

class PromptBuilder {
 public:
  explicit PromptBuilder(PromptOptions options) : options_(options) {}

  // The prompt's length in tokens (0 only for a row without hash ids).
  uint64_t prompt_tokens(const corpus::TraceRow& row) const;
  // Fills `out` (cleared first) with the row's prompt.
  void build(const corpus::TraceRow& row, std::vector<TokenId>* out) const;
  // Token `j` of hash id `h`'s block.
  TokenId token(uint64_t h, uint32_t j) const;

  const PromptOptions& options() const { return options_; }

 private:
  PromptOptions options_;
};

// A chat conversation per row, for --chat: one message per hash id, roles alternating from
// "user", each message's text words drawn from its hash id (about `words_per_id` of them), so rows
// that share a prefix of hash ids share a prefix of messages and the rendered prompt of one turn
// extends the previous turn's. `out`: the "messages" JSON array (cleared first).
void chat_messages(const corpus::TraceRow& row, uint64_t seed, uint32_t words_per_id,
                   std::string* out);

// The /v1/chat/completions body: {"model":..,"messages":MESSAGES,"max_tokens":N,"stream":true,
// "stream_options":{"include_usage":true}}, appended to `out` (cleared first).
void chat_body(std::string_view model, std::string_view messages_json, uint64_t max_tokens,
               std::string* out);

// The /v1/completions body: {"model":..,"prompt":[ids],"max_tokens":N,"stream":true,
// "stream_options":{"include_usage":true}}, appended to `out` (cleared first).
void completion_body(std::string_view model, const std::vector<TokenId>& prompt,
                     uint64_t max_tokens, std::string* out);

}  // namespace kvgate::replay
