// ChatTemplate: a model's chat template with the variables Hugging Face's apply_chat_template
// renders it with, read from the files a model ships beside its tokenizer.json:
//   chat_template.jinja, else tokenizer_config.json's "chat_template" (a string, or a list of
//   named templates: "default", and "tool_use" for requests that carry tools);
//   tokenizer_config.json's special tokens (bos_token, eos_token, unk_token, sep_token,
//   pad_token, cls_token, mask_token: strings or {"content": ...} objects, passed as strings;
//   additional_special_tokens as a list).
// A request's chat_template_kwargs join the variables (enable_thinking and the like) and may
// replace the special tokens, not messages, tools or the generation flags.
//
// Threading: immutable after load(); render() from any thread.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/jinja/template.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"

namespace kvgate::tokenizer {

class ChatTemplate {
 public:
  // The template of the model whose tokenizer.json is in `folder`; `override_path` (if not
  // empty) is a template file used instead of the one the model ships. nullopt: the model ships
  // none. Errors name the file and, for a template that does not parse, its line.
  static Result<std::optional<ChatTemplate>> load(const std::string& folder,
                                                  const std::string& override_path);

  Result<std::string> render(const ChatPrompt& chat) const;

 private:
  ChatTemplate() = default;
  // The JSON object of the template's variables for `chat`.
  Status context_of(const ChatPrompt& chat, std::string* out) const;
  // Cuts `text` after the final message's text (continue_final_message).
  static Status end_at_final_message(const ChatPrompt& chat, std::string* text);

  std::optional<jinja::Template> default_;
  std::optional<jinja::Template> tool_use_;  // for requests with tools, when the model has one
  std::vector<std::pair<std::string, std::string>> special_tokens_;  // name, text
  std::string additional_special_tokens_json_;  // a JSON list of strings (empty: none)
};

}  // namespace kvgate::tokenizer
