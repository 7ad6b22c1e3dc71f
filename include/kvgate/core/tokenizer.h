// The built-in test tokenizer: a deterministic stand-in for a model's tokenizer, shared by the
// mock engine and the gateway so both compute the same token ids from the same text.
//
// Rule: text is cut into pieces of at most 4 bytes, each piece a run of one character class
// (letters and digits and bytes >= 0x80 / whitespace / any other single byte). A piece's id is
// 256 + XXH3_64(piece) mod (vocab - 256). About four characters per token, like real BPE
// vocabularies on English text. Ids below 256 are never produced (reserved for specials).
//
// Chat messages become one prompt by render_chat(): for each message "<|role|>\n" + content + "\n",
// then "<|assistant|>\n". Both sides tokenize the rendered text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/block_hash.h"

namespace kvgate {

struct ChatMessage {
  std::string_view role;
  std::string_view content;
};

class TestTokenizer {
 public:
  static constexpr uint32_t kDefaultVocab = 32000;
  explicit TestTokenizer(uint32_t vocab = kDefaultVocab) : vocab_(vocab < 512 ? 512 : vocab) {}

  // The most bytes one token covers: a text of n bytes has at least n / kMaxTokenBytes tokens.
  static constexpr size_t kMaxTokenBytes = 4;

  // Appends the tokens of `text` to `out`; stops early once `out` holds more than `limit` tokens
  // (a prompt that cannot fit a model's context is not tokenized to its end).
  void encode(std::string_view text, std::vector<TokenId>* out,
              size_t limit = static_cast<size_t>(-1)) const;
  std::vector<TokenId> encode(std::string_view text) const {
    std::vector<TokenId> v;
    encode(text, &v);
    return v;
  }
  uint32_t vocab() const { return vocab_; }

 private:
  uint32_t vocab_;
};

// Renders chat messages into the prompt text the tokenizer sees (rule in the header comment).
std::string render_chat(std::span<const ChatMessage> messages);

}  // namespace kvgate
