#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace kvgate::tokenizer {
namespace {

bool is_ascii(const std::string& s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// NFC, NFD, NFKC, NFKD through ICU.
class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(const icu::Normalizer2* form) : form_(form) {}
  void normalize(std::string* text) const override {
    if (is_ascii(*text)) return;  // ASCII is the same in every form
    // ICU's UTF-8 entry points: no conversion to UTF-16 and back for the usual already-normal text.
    UErrorCode err = U_ZERO_ERROR;
    if (form_->isNormalizedUTF8(*text, err) && U_SUCCESS(err)) return;
    err = U_ZERO_ERROR;
    std::string out;
    out.reserve(text->size());
    icu::StringByteSink<std::string> sink(&out);
    form_->normalizeUTF8(0, *text, sink, nullptr, err);
    if (U_FAILURE(err)) return;
    *text = std::move(out);
  }

 private:
  const icu::Normalizer2* form_;
};

// Each character to its lowercase mapping, one character at a time (no context, as Rust's
// char::to_lowercase).
class Lowercase final : public Normalizer {
 public:
  void normalize(std::string* text) const override {
    std::string out;
    out.reserve(text->size());
    for (size_t i = 0; i < text->size();) {
      size_t len = 0;
      const char32_t c = next_char(*text, i, &len);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
      } else {
        UChar src[2];
        int32_t src_len = 0;
        U16_APPEND_UNSAFE(src, src_len, static_cast<UChar32>(c));
        UChar dst[8];
        UErrorCode err = U_ZERO_ERROR;
        const int32_t n = u_strToLower(dst, 8, src, src_len, "", &err);
        if (U_FAILURE(err)) {
          out.append(*text, i, len);
        } else {
          icu::UnicodeString(dst, n).toUTF8String(out);
        }
      }
      i += len;
    }
    *text = std::move(out);
  }
};

class Replace final : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string* text) const override { pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string* text) const override {
    size_t end = text->size();
    while (right_ && end > 0) {
      const size_t start = prev_char_start(*text, end);
      size_t len = 0;
      if (!is_whitespace(next_char(*text, start, &len))) break;
      end = start;
    }
    size_t begin = 0;
    while (left_ && begin < end) {
      size_t len = 0;
      if (!is_whitespace(next_char(*text, begin, &len))) break;
      begin += len;
    }
    *text = text->substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class NormalizerSequence final : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void normalize(std::string* text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

Result<const icu::Normalizer2*> icu_form(std::string_view type) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = type == "NFC"    ? icu::Normalizer2::getNFCInstance(err)
                              : type == "NFD"  ? icu::Normalizer2::getNFDInstance(err)
                              : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(err)
                                               : icu::Normalizer2::getNFKDInstance(err);
  if (U_FAILURE(err)) {
    return absl::InternalError("ICU has no " + std::string(type) +
                               " normalizer: " + u_errorName(err));
  }
  return n;
}

}  // namespace

Result<std::unique_ptr<Normalizer>> make_normalizer(JsonField field) {
  simdjson::dom::element json;
  if (!present(field, &json)) return std::unique_ptr<Normalizer>();
  const std::string_view type = string_or(json["type"], "");
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    auto form = icu_form(type);
    if (!form.ok()) return form.status();
    return std::unique_ptr<Normalizer>(std::make_unique<UnicodeForm>(*form));
  }
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(std::make_unique<Lowercase>());
  if (type == "Replace") {
    auto pattern = Pattern::from_json(json["pattern"]);
    if (!pattern.ok()) return pattern.status();
    return std::unique_ptr<Normalizer>(std::make_unique<Replace>(
        std::move(*pattern), std::string(string_or(json["content"], ""))));
  }
  if (type == "Prepend") {
    return std::unique_ptr<Normalizer>(
        std::make_unique<Prepend>(std::string(string_or(json["prepend"], ""))));
  }
  if (type == "Strip") {
    return std::unique_ptr<Normalizer>(std::make_unique<Strip>(bool_or(json["strip_left"], false),
                                                               bool_or(json["strip_right"], true)));
  }
  if (type == "Sequence") {
    auto parts = read_parts<Normalizer>(json, "normalizers", "normalizer", make_normalizer);
    if (!parts.ok()) return parts.status();
    return std::unique_ptr<Normalizer>(std::make_unique<NormalizerSequence>(std::move(*parts)));
  }
  return absl::InvalidArgumentError("normalizer type \"" + std::string(type) +
                                    "\" is not supported");
}

}  // namespace kvgate::tokenizer
