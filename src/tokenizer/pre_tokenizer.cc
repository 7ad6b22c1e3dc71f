#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "tokenizer/json_util.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace kvgate::tokenizer {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Result<Behavior> parse_behavior(std::string_view s) {
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  return absl::InvalidArgumentError("split behavior \"" + std::string(s) + "\" is not supported");
}

// The parts of `piece` that `pattern` and `behavior` make, appended to `out`.
void split_piece(const Piece& piece, const Pattern& pattern, Behavior behavior, bool invert,
                 std::vector<Piece>* out) {
  thread_local std::vector<Span> spans;
  thread_local std::vector<Span> parts;  // match here means "removed"
  pattern.find_matches(piece.text, &spans);
  if (invert) {
    for (Span& s : spans) s.match = !s.match;
  }
  parts.clear();
  switch (behavior) {
    case Behavior::kRemoved:
      parts = spans;
      break;
    case Behavior::kIsolated:
      for (const Span& s : spans) parts.push_back({s.start, s.end, false});
      break;
    case Behavior::kContiguous: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match == previous && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back({s.start, s.end, false});
        }
        previous = s.match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match && !previous && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back({s.start, s.end, false});
        }
        previous = s.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous = false;
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& s = spans[i];
        if (s.match && !previous && !parts.empty()) {
          parts.back().start = s.start;
        } else {
          parts.push_back({s.start, s.end, false});
        }
        previous = s.match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
  }
  for (const Span& p : parts) {
    if (p.match || p.end == p.start) continue;
    out->push_back({piece.text.substr(p.start, p.end - p.start), piece.first && p.start == 0});
  }
}

// Applies `split` (one piece -> its parts) to every piece.
// (Not re-entrant: the scratch vector is this thread's; no split calls split_all.)
template <typename F>
void split_all(std::vector<Piece>* pieces, F&& split) {
  thread_local std::vector<Piece> out;
  out.clear();
  for (const Piece& p : *pieces) split(p, &out);
  pieces->swap(out);
  out.clear();
}

class Split final : public PreTokenizer {
 public:
  Split(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<Piece>* pieces, PieceStore*) const override {
    split_all(pieces, [this](const Piece& p, std::vector<Piece>* out) {
      split_piece(p, pattern_, behavior_, invert_, out);
    });
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's word pattern, which ByteLevel splits with when use_regex is set.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::optional<Pattern> words)
      : add_prefix_space_(add_prefix_space), words_(std::move(words)) {}
  void pre_tokenize(std::vector<Piece>* pieces, PieceStore* store) const override {
    if (add_prefix_space_ || words_) {
      split_all(pieces, [this, store](const Piece& p, std::vector<Piece>* out) {
        Piece prefixed = p;
        if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) {
          thread_local std::string spaced;
          spaced.assign(1, ' ');
          spaced.append(p.text);
          prefixed.text = store->keep(spaced);
        }
        if (words_) {
          split_piece(prefixed, *words_, Behavior::kIsolated, false, out);
        } else if (!prefixed.text.empty()) {
          out->push_back(prefixed);
        }
      });
    }
    thread_local std::string mapped;
    for (Piece& p : *pieces) {
      mapped.clear();
      append_byte_chars(p.text, &mapped);
      p.text = store->keep(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::optional<Pattern> words_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)),
        prepend_(prepend),
        split_(split),
        on_replacement_(Pattern::of_string(replacement_)),
        spaces_(Pattern::of_string(" ")) {}
  void pre_tokenize(std::vector<Piece>* pieces, PieceStore* store) const override {
    split_all(pieces, [this, store](const Piece& p, std::vector<Piece>* out) {
      thread_local std::string text;
      text.assign(p.text);
      spaces_.replace_all(&text, replacement_);
      const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && p.first))) {
        text.insert(0, replacement_);
      }
      const Piece r{store->keep(text), p.first};
      if (split_) {
        split_piece(r, on_replacement_, Behavior::kMergedWithNext, false, out);
      } else if (!r.text.empty()) {
        out->push_back(r);
      }
    });
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
  Pattern on_replacement_;
  Pattern spaces_;
};

class PreTokenizerSequence final : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void pre_tokenize(std::vector<Piece>* pieces, PieceStore* store) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces, store);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::string_view PieceStore::keep(std::string_view text) {
  while (current_ < blocks_.size() &&
         blocks_[current_].capacity() - blocks_[current_].size() < text.size()) {
    ++current_;
  }
  if (current_ == blocks_.size()) {
    blocks_.emplace_back();
    blocks_.back().reserve(std::max(kBlockBytes, text.size()));
  }
  std::string& block = blocks_[current_];
  const size_t at = block.size();
  block.append(text);  // within the reserved capacity: earlier views stay valid
  return std::string_view(block).substr(at, text.size());
}

void PieceStore::clear() {
  size_t kept = 0;
  size_t n = 0;
  for (; n < blocks_.size() && kept + blocks_[n].capacity() <= kReserveBytes; ++n) {
    kept += blocks_[n].capacity();
    blocks_[n].clear();
  }
  blocks_.resize(n);
  current_ = 0;
}

Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(JsonField field) {
  simdjson::dom::element json;
  using Ptr = std::unique_ptr<PreTokenizer>;
  if (!present(field, &json)) return Ptr();
  const std::string_view type = string_or(json["type"], "");
  if (type == "Split") {
    auto pattern = Pattern::from_json(json["pattern"]);
    if (!pattern.ok()) return pattern.status();
    auto behavior = parse_behavior(string_or(json["behavior"], ""));
    if (!behavior.ok()) return behavior.status();
    return Ptr(
        std::make_unique<Split>(std::move(*pattern), *behavior, bool_or(json["invert"], false)));
  }
  if (type == "ByteLevel") {
    std::optional<Pattern> words;
    if (bool_or(json["use_regex"], true)) {
      auto re = Pattern::regex(kGpt2Pattern);
      if (!re.ok()) return re.status();
      words = std::move(*re);
    }
    return Ptr(
        std::make_unique<ByteLevel>(bool_or(json["add_prefix_space"], true), std::move(words)));
  }
  if (type == "Metaspace") {
    std::string_view scheme = string_or(json["prepend_scheme"], "");
    if (scheme.empty()) scheme = bool_or(json["add_prefix_space"], true) ? "always" : "never";
    Metaspace::Prepend prepend;
    if (scheme == "always") {
      prepend = Metaspace::Prepend::kAlways;
    } else if (scheme == "first") {
      prepend = Metaspace::Prepend::kFirst;
    } else if (scheme == "never") {
      prepend = Metaspace::Prepend::kNever;
    } else {
      return absl::InvalidArgumentError("Metaspace prepend_scheme \"" + std::string(scheme) +
                                        "\" is not supported");
    }
    return Ptr(std::make_unique<Metaspace>(std::string(string_or(json["replacement"], "\u2581")),
                                           prepend, bool_or(json["split"], true)));
  }
  if (type == "Digits") {
    auto digits = Pattern::regex(R"(\p{N})");
    if (!digits.ok()) return digits.status();
    return Ptr(std::make_unique<Split>(
        std::move(*digits),
        bool_or(json["individual_digits"], false) ? Behavior::kIsolated : Behavior::kContiguous,
        false));
  }
  if (type == "Whitespace") {
    auto words = Pattern::regex(R"(\w+|[^\w\s]+)");
    if (!words.ok()) return words.status();
    return Ptr(std::make_unique<Split>(std::move(*words), Behavior::kRemoved, true));
  }
  if (type == "WhitespaceSplit") {
    auto spaces = Pattern::regex(R"(\s+)");
    if (!spaces.ok()) return spaces.status();
    return Ptr(std::make_unique<Split>(std::move(*spaces), Behavior::kRemoved, false));
  }
  if (type == "Sequence") {
    auto parts =
        read_parts<PreTokenizer>(json, "pretokenizers", "pre_tokenizer", make_pre_tokenizer);
    if (!parts.ok()) return parts.status();
    return Ptr(std::make_unique<PreTokenizerSequence>(std::move(*parts)));
  }
  return absl::InvalidArgumentError("pre_tokenizer type \"" + std::string(type) +
                                    "\" is not supported");
}

}  // namespace kvgate::tokenizer
