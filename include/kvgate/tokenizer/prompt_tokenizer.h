// PromptTokenizer: how a prompt's text becomes the token ids KV blocks are hashed from, for the
// gateway (routing) and the mock engine (its cache) alike. Either the built-in test tokenizer
// (core's TestTokenizer) or a model's own (Tokenizer), so that text traffic to a real vLLM or
// SGLang fleet hashes to the blocks the engines publish.
//
// Text prompts are encoded with the model's special tokens, as the engines encode completions
// and /generate text by default. Chat requests are rendered with the model's chat template (the
// variables Hugging Face's apply_chat_template passes: messages, tools, add_generation_prompt,
// the special tokens, and the request's chat_template_kwargs) and encoded without adding special
// tokens, as vLLM and SGLang do; the test tokenizer, and a model that ships no template, use
// core's render_chat().
//
// Threading: immutable after load(); used from every executor thread at once.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/result.h"
#include "kvgate/core/tokenizer.h"
#include "kvgate/tokenizer/tokenizer.h"

namespace kvgate::tokenizer {

// A chat request as its template sees it.
struct ChatPrompt {
  std::span<const ChatMessage> messages;  // each message's role and text
  std::string_view messages_json;         // the request's "messages" as sent (empty: from above)
  std::string_view tools_json;            // its "tools" as sent (empty: none)
  std::string_view template_kwargs_json;  // its "chat_template_kwargs" object (empty: none)
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

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
  // The prompt text of a chat request. InvalidArgument when the template refuses the
  // conversation (its raise_exception) or cannot render it, with the template's words.
  virtual Result<std::string> render_chat(const ChatPrompt& chat) const = 0;
  // Appends the ids of a prompt render_chat() made (the template wrote its own BOS).
  virtual Status encode_chat(std::string_view rendered, size_t limit,
                             std::vector<TokenId>* out) const = 0;
  // True when chat requests are rendered with the model's own template.
  virtual bool has_chat_template() const = 0;
  // The model's tokenizer, or null for the test tokenizer.
  virtual const Tokenizer* model() const = 0;
};

// The built-in test tokenizer with `vocab` ids (the mock engine's --vocab; the gateway's 32,000).
std::shared_ptr<const PromptTokenizer> test_prompt_tokenizer(
    uint32_t vocab = TestTokenizer::kDefaultVocab);
// The model tokenizer at `path` (a tokenizer.json or a folder holding one), with the chat
// template and special tokens of the tokenizer_config.json beside it (or chat_template.jinja, or
// `chat_template_path` when given).
Result<std::shared_ptr<const PromptTokenizer>> load_prompt_tokenizer(
    const std::string& path, const std::string& chat_template_path = "");

// The "messages" JSON of a conversation's next request as far as it is known: `messages_json` (a
// JSON list, as a request sent it), then `answer` as the assistant's message and an empty user
// message. Rendered and encoded, it puts the answer into the encode cache where the next turn
// will look for it: a template renders a message by its place (Qwen 3 drops the reasoning of
// answers before the last question), so the answer goes before a question, as it will be.
// Nullopt when `messages_json` is not a list.
std::optional<std::string> next_turn_messages(std::string_view messages_json,
                                              std::string_view answer);

// The tokenizers of a fleet: per model name, and a default for every other model.
class PromptTokenizers {
 public:
  // The test tokenizer for every model.
  PromptTokenizers();
  // `specs`: each "PATH" (the default) or "MODEL=PATH"; PATH a tokenizer.json or a folder
  // holding one. `templates`: each "FILE" or "MODEL=FILE", a chat template replacing the one the
  // tokenizer of that model (or the default) ships. Fails naming the spec that does not load.
  static Result<PromptTokenizers> load(const std::vector<std::string>& specs,
                                       const std::vector<std::string>& templates = {});

  const PromptTokenizer& for_model(std::string_view model) const;
  // True when the model decides the tokenizer (a MODEL=PATH was given).
  bool per_model() const { return !by_model_.empty(); }
  // The largest max_token_bytes() among them (bounds any prompt before its model is known).
  size_t max_token_bytes() const { return max_token_bytes_; }
  // True when any model tokenizer is loaded.
  bool has_model_tokenizer() const { return has_model_; }
  // The --tokenizer specs whose model ships no chat template (chat falls back to render_chat()).
  const std::vector<std::string>& without_chat_template() const { return without_template_; }

 private:
  std::shared_ptr<const PromptTokenizer> default_;
  absl::flat_hash_map<std::string, std::shared_ptr<const PromptTokenizer>> by_model_;
  size_t max_token_bytes_ = 0;
  bool has_model_ = false;
  std::vector<std::string> without_template_;
};

}  // namespace kvgate::tokenizer
