#include "tokenizer/decoder.h"

#include <cstdio>

#include "tokenizer/json_util.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace kvgate::tokenizer {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Length of the well-formed UTF-8 sequence at s[i], or of its maximal ill-formed prefix as a
// negative number (Unicode's "maximal subpart" rule, which from_utf8_lossy follows).
int sequence_at(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  int need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return -k;
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return -k;
  }
  return need + 1;
}

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>* tokens) const override {
    std::string bytes;
    for (const std::string& t : *tokens) {
      for (size_t i = 0; i < t.size();) {
        size_t len = 0;
        const int b = char_byte(next_char(t, i, &len));
        if (b >= 0) {
          bytes.push_back(static_cast<char>(b));
        } else {
          bytes.append(t, i, len);
        }
        i += len;
      }
    }
    tokens->assign(1, lossy_utf8(bytes));
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) pattern_.replace_all(&t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Runs of <0xXX> tokens become the text of their bytes (one U+FFFD per byte if not UTF-8).
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_count = 0;
    const auto flush = [&] {
      if (pending_count == 0) return;
      if (valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending_count; ++i) out.emplace_back(kReplacementChar);
      }
      pending.clear();
      pending_count = 0;
    };
    for (std::string& t : *tokens) {
      unsigned value = 0;
      if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>' &&
          std::sscanf(t.c_str() + 3, "%2x", &value) == 1) {
        pending.push_back(static_cast<char>(value));
        ++pending_count;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    *tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const std::string& t : *tokens) all += t;
    tokens->assign(1, std::move(all));
  }
};

// Up to `start` leading and `stop` trailing `content` characters off each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (std::string& t : *tokens) {
      size_t begin = 0;
      for (size_t k = 0; k < start_ && t.compare(begin, content_.size(), content_) == 0 &&
                         begin + content_.size() <= t.size();
           ++k) {
        begin += content_.size();
      }
      size_t end = t.size();
      for (size_t k = 0; k < stop_ && end >= begin + content_.size() &&
                         t.compare(end - content_.size(), content_.size(), content_) == 0;
           ++k) {
        end -= content_.size();
      }
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

// The replacement character becomes a space; in the first token it is dropped instead (the one
// the encoder prepended), unless the scheme never prepends.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(Pattern::of_string(std::move(replacement))), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (size_t i = 0; i < tokens->size(); ++i) {
      replacement_.replace_all(&(*tokens)[i], i == 0 && strip_first_ ? "" : " ");
    }
  }

 private:
  Pattern replacement_;
  bool strip_first_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>* tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::string lossy_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const int n = sequence_at(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += kReplacementChar;
      i += static_cast<size_t>(-n);
    }
  }
  return out;
}

Result<std::unique_ptr<Decoder>> make_decoder(JsonField field) {
  simdjson::dom::element json;
  using Ptr = std::unique_ptr<Decoder>;
  if (!present(field, &json)) return Ptr();
  const std::string_view type = string_or(json["type"], "");
  if (type == "ByteLevel") return Ptr(std::make_unique<ByteLevelDecoder>());
  if (type == "ByteFallback") return Ptr(std::make_unique<ByteFallbackDecoder>());
  if (type == "Fuse") return Ptr(std::make_unique<FuseDecoder>());
  if (type == "Replace") {
    auto pattern = Pattern::from_json(json["pattern"]);
    if (!pattern.ok()) return pattern.status();
    return Ptr(std::make_unique<ReplaceDecoder>(std::move(*pattern),
                                                std::string(string_or(json["content"], ""))));
  }
  if (type == "Strip") {
    return Ptr(std::make_unique<StripDecoder>(std::string(string_or(json["content"], " ")),
                                              static_cast<size_t>(int_or(json["start"], 0)),
                                              static_cast<size_t>(int_or(json["stop"], 0))));
  }
  if (type == "Metaspace") {
    std::string_view scheme = string_or(json["prepend_scheme"], "");
    if (scheme.empty()) scheme = bool_or(json["add_prefix_space"], true) ? "always" : "never";
    return Ptr(std::make_unique<MetaspaceDecoder>(
        std::string(string_or(json["replacement"], "\u2581")), scheme != "never"));
  }
  if (type == "Sequence") {
    auto parts = read_parts<Decoder>(json, "decoders", "decoder", make_decoder);
    if (!parts.ok()) return parts.status();
    return Ptr(std::make_unique<SequenceDecoder>(std::move(*parts)));
  }
  return absl::InvalidArgumentError("decoder type \"" + std::string(type) + "\" is not supported");
}

}  // namespace kvgate::tokenizer
