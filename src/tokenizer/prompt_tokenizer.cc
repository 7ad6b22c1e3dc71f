#include "kvgate/tokenizer/prompt_tokenizer.h"

#include <algorithm>

namespace kvgate::tokenizer {
namespace {

class TestPromptTokenizer final : public PromptTokenizer {
 public:
  explicit TestPromptTokenizer(uint32_t vocab) : tok_(vocab) {}
  Status encode(std::string_view text, size_t limit, std::vector<TokenId>* out) const override {
    tok_.encode(text, out, limit);
    return absl::OkStatus();
  }
  size_t max_token_bytes() const override { return TestTokenizer::kMaxTokenBytes; }
  std::string render_chat(std::span<const ChatMessage> messages) const override {
    return kvgate::render_chat(messages);
  }
  const Tokenizer* model() const override { return nullptr; }

 private:
  TestTokenizer tok_;
};

class ModelPromptTokenizer final : public PromptTokenizer {
 public:
  explicit ModelPromptTokenizer(std::unique_ptr<Tokenizer> tok)
      : tok_(std::move(tok)), max_token_bytes_(longest_token_bytes(*tok_)) {}
  Status encode(std::string_view text, size_t, std::vector<TokenId>* out) const override {
    return tok_->encode(text, /*add_special_tokens=*/true, out);
  }
  size_t max_token_bytes() const override { return max_token_bytes_; }
  std::string render_chat(std::span<const ChatMessage> messages) const override {
    return kvgate::render_chat(messages);
  }
  const Tokenizer* model() const override { return tok_.get(); }

 private:
  // The longest text one id decodes to, in bytes (at least 1).
  static size_t longest_token_bytes(const Tokenizer& t) {
    size_t longest = 1;
    for (TokenId id = 0; id < t.vocab_size(); ++id) {
      const TokenId one[] = {id};
      longest = std::max(longest, t.decode(one, false).size());
    }
    return longest;
  }

  std::unique_ptr<Tokenizer> tok_;
  size_t max_token_bytes_;
};

}  // namespace

std::shared_ptr<const PromptTokenizer> test_prompt_tokenizer(uint32_t vocab) {
  return std::make_shared<TestPromptTokenizer>(vocab);
}

Result<std::shared_ptr<const PromptTokenizer>> load_prompt_tokenizer(const std::string& path) {
  auto tok = load_tokenizer(path);
  if (!tok.ok()) return tok.status();
  return std::shared_ptr<const PromptTokenizer>(
      std::make_shared<ModelPromptTokenizer>(std::move(*tok)));
}

PromptTokenizers::PromptTokenizers()
    : default_(test_prompt_tokenizer()), max_token_bytes_(TestTokenizer::kMaxTokenBytes) {}

Result<PromptTokenizers> PromptTokenizers::load(const std::vector<std::string>& specs) {
  PromptTokenizers out;
  bool have_default = false;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    const std::string model = eq == std::string::npos ? "" : spec.substr(0, eq);
    const std::string path = eq == std::string::npos ? spec : spec.substr(eq + 1);
    auto loaded = load_prompt_tokenizer(path);
    if (!loaded.ok()) {
      return Status(loaded.status().code(),
                    "--tokenizer " + spec + ": " + std::string(loaded.status().message()));
    }
    std::shared_ptr<const PromptTokenizer> p = std::move(*loaded);
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
