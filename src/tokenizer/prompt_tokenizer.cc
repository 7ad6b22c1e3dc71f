#include "kvgate/tokenizer/prompt_tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "kvgate/core/json_writer.h"
#include "simdjson.h"
#include "tokenizer/chat_template.h"

namespace kvgate::tokenizer {
namespace {

// The roles and texts of a "messages" JSON array (a content's text parts concatenated), for the
// callers that give only the JSON.
std::vector<std::pair<std::string, std::string>> roles_and_texts(std::string_view messages_json) {
  std::vector<std::pair<std::string, std::string>> out;
  simdjson::dom::parser parser;
  simdjson::dom::array messages;
  if (parser.parse(messages_json).get_array().get(messages) != simdjson::SUCCESS) return out;
  for (simdjson::dom::element m : messages) {
    std::string_view role, text;
    if (m["role"].get_string().get(role) != simdjson::SUCCESS) continue;
    std::string content;
    simdjson::dom::array parts;
    if (m["content"].get_string().get(text) == simdjson::SUCCESS) {
      content = text;
    } else if (m["content"].get_array().get(parts) == simdjson::SUCCESS) {
      for (simdjson::dom::element p : parts) {
        if (p["text"].get_string().get(text) == simdjson::SUCCESS) content += text;
      }
    }
    out.emplace_back(std::string(role), std::move(content));
  }
  return out;
}

// core's render_chat() of `chat`, from its messages or else its messages JSON.
std::string render_plain(const ChatPrompt& chat) {
  if (!chat.messages.empty() || chat.messages_json.empty()) {
    return kvgate::render_chat(chat.messages);
  }
  const auto owned = roles_and_texts(chat.messages_json);
  std::vector<ChatMessage> msgs;
  msgs.reserve(owned.size());
  for (const auto& [role, text] : owned) msgs.push_back({role, text});
  return kvgate::render_chat(msgs);
}

class TestPromptTokenizer final : public PromptTokenizer {
 public:
  explicit TestPromptTokenizer(uint32_t vocab) : tok_(vocab) {}
  Status encode(std::string_view text, size_t limit, std::vector<TokenId>* out) const override {
    tok_.encode(text, out, limit);
    return absl::OkStatus();
  }
  size_t max_token_bytes() const override { return TestTokenizer::kMaxTokenBytes; }
  Result<std::string> render_chat(const ChatPrompt& chat) const override {
    return render_plain(chat);
  }
  Status encode_chat(std::string_view rendered, size_t limit,
                     std::vector<TokenId>* out) const override {
    return encode(rendered, limit, out);
  }
  bool has_chat_template() const override { return false; }
  const Tokenizer* model() const override { return nullptr; }

 private:
  TestTokenizer tok_;
};

class ModelPromptTokenizer final : public PromptTokenizer {
 public:
  ModelPromptTokenizer(std::unique_ptr<Tokenizer> tok, std::optional<ChatTemplate> chat)
      : tok_(std::move(tok)), chat_(std::move(chat)) {}
  Status encode(std::string_view text, size_t, std::vector<TokenId>* out) const override {
    return tok_->encode(text, /*add_special_tokens=*/true, out);
  }
  size_t max_token_bytes() const override { return tok_->max_token_bytes(); }
  Result<std::string> render_chat(const ChatPrompt& chat) const override {
    if (!chat_) return render_plain(chat);
    return chat_->render(chat);
  }
  Status encode_chat(std::string_view rendered, size_t, std::vector<TokenId>* out) const override {
    // A template writes the BOS itself; without one the prompt is encoded as a completion's.
    return tok_->encode(rendered, /*add_special_tokens=*/!chat_.has_value(), out);
  }
  bool has_chat_template() const override { return chat_.has_value(); }
  const Tokenizer* model() const override { return tok_.get(); }

 private:
  std::unique_ptr<Tokenizer> tok_;
  std::optional<ChatTemplate> chat_;
};

}  // namespace

std::shared_ptr<const PromptTokenizer> test_prompt_tokenizer(uint32_t vocab) {
  return std::make_shared<TestPromptTokenizer>(vocab);
}

Result<std::shared_ptr<const PromptTokenizer>> load_prompt_tokenizer(
    const std::string& path, const std::string& chat_template_path) {
  auto tok = load_tokenizer(path);
  if (!tok.ok()) return tok.status();
  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::is_directory(path, ec)
                                           ? std::filesystem::path(path)
                                           : std::filesystem::path(path).parent_path();
  auto chat = ChatTemplate::load(folder.empty() ? "." : folder.string(), chat_template_path);
  if (!chat.ok()) return chat.status();
  return std::shared_ptr<const PromptTokenizer>(
      std::make_shared<ModelPromptTokenizer>(std::move(*tok), std::move(*chat)));
}

std::optional<std::string> next_turn_messages(std::string_view messages_json,
                                              std::string_view answer) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t open = 0;
  while (open < messages_json.size() && space(messages_json[open])) ++open;
  size_t close = messages_json.size();
  while (close > open && space(messages_json[close - 1])) --close;
  if (close - open < 2 || messages_json[open] != '[' || messages_json[close - 1] != ']') {
    return std::nullopt;
  }
  --close;  // at the ']'
  size_t last = close;
  while (last > open + 1 && space(messages_json[last - 1])) --last;
  const bool empty = last == open + 1;
  std::string out;
  out.reserve(close + answer.size() + 80);
  out.append(messages_json.substr(0, close));
  if (!empty) out.push_back(',');
  out.append(R"({"role":"assistant","content":)");
  append_json_string(&out, answer);
  out.append(R"(},{"role":"user","content":""}])");
  return out;
}

PromptTokenizers::PromptTokenizers()
    : default_(test_prompt_tokenizer()), max_token_bytes_(TestTokenizer::kMaxTokenBytes) {}

namespace {
// "MODEL=VALUE" as {MODEL, VALUE}; a plain "VALUE" as {"", VALUE}.
std::pair<std::string, std::string> model_and(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos) return {"", spec};
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}
}  // namespace

Result<PromptTokenizers> PromptTokenizers::load(const std::vector<std::string>& specs,
                                                const std::vector<std::string>& templates) {
  absl::flat_hash_map<std::string, std::string> template_of;  // model ("" every other) -> file
  for (const std::string& spec : templates) {
    const std::pair<std::string, std::string> parts = model_and(spec);
    const std::string& model = parts.first;
    const std::string& file = parts.second;
    const bool served = std::any_of(specs.begin(), specs.end(), [&](const std::string& t) {
      return model_and(t).first == model;
    });
    if (!served) {
      return absl::InvalidArgumentError("--chat-template " + spec + ": no --tokenizer " +
                                        (model.empty() ? std::string("PATH") : model + "=PATH") +
                                        " for it to go with");
    }
    if (!template_of.emplace(model, file).second) {
      return absl::InvalidArgumentError("--chat-template " + spec + ": a second template for " +
                                        (model.empty() ? std::string("every model") : model));
    }
  }
  PromptTokenizers out;
  bool have_default = false;
  for (const std::string& spec : specs) {
    const auto [model, path] = model_and(spec);
    auto chat_template = template_of.find(model);
    auto loaded = load_prompt_tokenizer(
        path, chat_template == template_of.end() ? std::string() : chat_template->second);
    if (!loaded.ok()) {
      return Status(loaded.status().code(),
                    "--tokenizer " + spec + ": " + std::string(loaded.status().message()));
    }
    std::shared_ptr<const PromptTokenizer> p = std::move(*loaded);
    if (!p->has_chat_template()) out.without_template_.push_back(spec);
    out.max_token_bytes_ = std::max(out.max_token_bytes_, p->max_token_bytes());
    out.has_model_ = true;
    if (model.empty()) {
      if (have_default) {
        return absl::InvalidArgumentError("--tokenizer " + spec +
                                          ": a second tokenizer for every model; name the model "
                                          "(--tokenizer MODEL=PATH)");
      }
      have_default = true;
      out.default_ = std::move(p);
    } else if (!out.by_model_.emplace(model, std::move(p)).second) {
      return absl::InvalidArgumentError("--tokenizer " + spec + ": model " + model +
                                        " already has a tokenizer");
    }
  }
  return out;
}

const PromptTokenizer& PromptTokenizers::for_model(std::string_view model) const {
  if (!by_model_.empty()) {
    auto it = by_model_.find(absl::string_view(model.data(), model.size()));
    if (it != by_model_.end()) return *it->second;
  }
  return *default_;
}

}  // namespace kvgate::tokenizer
