// PromptTokenizer: how a prompt's text becomes the token ids KV blocks are hashed from, for the
// gateway (routing) and the mock engine (its cache) alike. Either the built-in test tokenizer
// (core's TestTokenizer) or a model's own (Tokenizer), so that text traffic to a real vLLM or
// SGLang fleet hashes to the blocks the engines publish.
//
// Text prompts are encoded with the model's special tokens, as the engines encode completions
// and /generate text by default. Chat messages are rendered with core's render_chat(): a model's
// chat template is not rendered yet, so under a model tokenizer a chat prompt is a prefix only
// kvgate and the mock share, not a real engine (the gateway warns at start).
//
// Threading: immutable after load(); used from every executor thread at once.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/result.h"
#include "kvgate/core/tokenizer.h"
#include "kvgate/tokenizer/tokenizer.h"

namespace kvgate::tokenizer {

class PromptTokenizer {
 public:
  virtual ~PromptTokenizer() = default;
  // Appends the ids of `text`; may stop once more than `limit` are out. InvalidArgument for text
  // the tokenizer refuses (not UTF-8).
  virtual Status encode(std::string_view text, size_t limit, std::vector<TokenId>* out) const = 0;
  Status encode(std::string_view text, std::vector<TokenId>* out) const {
    return encode(text, static_cast<size_t>(-1), out);
  }
  // The most bytes one token covers: a text of n bytes has at least n / this many tokens.
  virtual size_t max_token_bytes() const = 0;
  virtual std::string render_chat(std::span<const ChatMessage> messages) const = 0;
  // The model's tokenizer, or null for the test tokenizer.
  virtual const Tokenizer* model() const = 0;
};

// The built-in test tokenizer with `vocab` ids (the mock engine's --vocab; the gateway's 32,000).
std::shared_ptr<const PromptTokenizer> test_prompt_tokenizer(
    uint32_t vocab = TestTokenizer::kDefaultVocab);
// The model tokenizer at `path` (a tokenizer.json or a folder holding one).
Result<std::shared_ptr<const PromptTokenizer>> load_prompt_tokenizer(const std::string& path);

// The tokenizers of a fleet: per model name, and a default for every other model.
class PromptTokenizers {
 public:
  // The test tokenizer for every model.
  PromptTokenizers();
  // `specs`: each "PATH" (the default) or "MODEL=PATH"; PATH a tokenizer.json or a folder
  // holding one. Fails naming the spec that does not load.
  static Result<PromptTokenizers> load(const std::vector<std::string>& specs);

  const PromptTokenizer& for_model(std::string_view model) const;
  // True when the model decides the tokenizer (a MODEL=PATH was given).
  bool per_model() const { return !by_model_.empty(); }
  // The largest max_token_bytes() among them (bounds any prompt before its model is known).
  size_t max_token_bytes() const { return max_token_bytes_; }
  // True when any model tokenizer is loaded.
  bool has_model_tokenizer() const { return has_model_; }

 private:
  std::shared_ptr<const PromptTokenizer> default_;
  absl::flat_hash_map<std::string, std::shared_ptr<const PromptTokenizer>> by_model_;
  size_t max_token_bytes_ = 0;
  bool has_model_ = false;
};

}  // namespace kvgate::tokenizer
