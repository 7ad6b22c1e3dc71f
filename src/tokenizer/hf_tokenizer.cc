// The Tokenizer built from a Hugging Face tokenizer.json: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor and decoder, run in Hugging Face's order.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>

#include "kvgate/tokenizer/tokenizer.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/encode_cache.h"
#include "tokenizer/json_util.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/thread_cache.h"
#include "tokenizer/unicode.h"

namespace kvgate::tokenizer {
namespace {

struct ShortStretchTag {};

// Texts shorter than this are not looked up or kept whole by their prefixes: a chat's prompt is
// tens of kilobytes, and a short text costs little to cut.
constexpr size_t kMinPrefixBytes = 1024;

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(std::unique_ptr<Normalizer> normalizer, std::unique_ptr<PreTokenizer> pre,
              BpeModel model, AddedVocabulary added, PostProcessor post,
              std::unique_ptr<Decoder> decoder, size_t encode_cache_bytes)
      : normalizer_(std::move(normalizer)),
        pre_(std::move(pre)),
        model_(std::move(model)),
        added_(std::move(added)),
        post_(std::move(post)),
        decoder_(std::move(decoder)),
        cache_(encode_cache_bytes > 0 ? std::make_unique<EncodeCache>(encode_cache_bytes)
                                      : nullptr),
        max_token_bytes_(longest_token_bytes()),
        short_stretch_owner_(new_thread_cache_owner()) {}

  Status encode(std::string_view text, bool add_special_tokens,
                std::vector<TokenId>* out) const override {
    if (!valid_utf8(text)) return absl::InvalidArgumentError("the text is not valid UTF-8");
    if (add_special_tokens) out->insert(out->end(), post_.prefix.begin(), post_.prefix.end());
    const size_t base = out->size();
    // The longest prefix seen before, up to a boundary: its ids at once, the rest cut from there.
    thread_local std::vector<size_t> ends;
    thread_local std::vector<EncodeCache::Key> keys;
    ends.clear();
    keys.clear();
    size_t resume = 0;
    if (cache_ != nullptr && text.size() >= kMinPrefixBytes && added_.has_boundaries()) {
      added_.boundaries(text, &ends);
      EncodeCache::keys_of_prefixes(text, ends, &keys);
      for (size_t k = keys.size(); k-- > 0;) {
        if (cache_->find(keys[k], out, /*count_miss=*/false)) {
          cache_->note_prefix_hit();
          resume = ends[k];
          break;
        }
      }
    }
    const size_t last_end = ends.empty() ? 0 : ends.back();
    size_t ids_at_last_end = resume == last_end ? 0 : std::string_view::npos;
    if (resume < text.size() || text.empty()) {
      thread_local std::vector<Cut> raw;
      raw.clear();
      added_.split_raw(text, &raw, resume);
      const auto is_special = [](const Cut& c) { return c.token && c.special; };
      for (size_t i = 0; i < raw.size();) {
        size_t end = i + 1;
        if (!is_special(raw[i])) {
          while (end < raw.size() && !is_special(raw[end])) ++end;
        }
        const std::span<const Cut> span(raw.data() + i, end - i);
        if (span.size() > 1 && cache_ != nullptr) {
          encode_span(span, out);
        } else {
          for (const Cut& c : span) encode_cut(c, out);
        }
        const Cut& last = raw[end - 1];
        if (last.token && last.text.data() + last.text.size() == text.data() + last_end) {
          ids_at_last_end = out->size();
        }
        i = end;
      }
    }
    // This text's prefix up to its last boundary, for the next request that extends it (a
    // conversation's next turn, a retry).
    if (last_end >= kMinPrefixBytes && resume < last_end &&
        ids_at_last_end != std::string_view::npos) {
      cache_->insert(keys.back(),
                     std::span<const TokenId>(out->data() + base, ids_at_last_end - base));
    }
    if (add_special_tokens) out->insert(out->end(), post_.suffix.begin(), post_.suffix.end());
    return absl::OkStatus();
  }

  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const TokenId id : ids) {
      if (const AddedToken* t = added_.find(id)) {
        if (!(skip_special_tokens && t->special)) tokens.push_back(t->content);
        continue;
      }
      const std::string_view t = model_.id_to_token(id);
      if (!t.empty()) tokens.emplace_back(t);
    }
    if (!decoder_) {
      std::string out;
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0) out += ' ';
        out += tokens[i];
      }
      return out;
    }
    decoder_->decode_chain(&tokens);
    std::string out;
    for (const std::string& t : tokens) out += t;
    return out;
  }

  size_t max_token_bytes() const override { return max_token_bytes_; }
  EncodeCacheStats encode_cache_stats() const override {
    return cache_ ? cache_->stats() : EncodeCacheStats{};
  }
  uint32_t vocab_size() const override { return std::max(model_.size(), added_.max_id_plus_one()); }
  std::optional<TokenId> token_to_id(std::string_view token) const override {
    if (auto id = added_.find(token)) return id;
    return model_.token_to_id(token);
  }
  std::string_view id_to_token(TokenId id) const override {
    if (const AddedToken* t = added_.find(id)) return t->content;
    return model_.id_to_token(id);
  }

 private:
  // One cut of the raw text: an added token's id, or a stretch through the caches.
  void encode_cut(const Cut& c, std::vector<TokenId>* out) const {
    if (c.token) {
      out->push_back(*c.token);
    } else if (cache_ == nullptr) {
      encode_stretch(c, out);
    } else if (c.text.size() < kMinCachedStretchBytes) {
      encode_short_stretch(c, out);
    } else {
      const EncodeCache::Key key = EncodeCache::key_of(c.text, c.first);
      if (cache_->find(key, out)) return;
      const size_t before = out->size();
      encode_stretch(c, out);
      cache_->insert(key, std::span<const TokenId>(out->data() + before, out->size() - before));
    }
  }
  // The cuts between two special tokens (a message, in a rendered chat) as one entry of the
  // encode cache. A tokenizer with non-special added tokens inside text (Gemma 3's newlines and
  // tabs, DeepSeek V3's role markers) cuts a message into many short stretches; one lookup for
  // the lot instead of one each. Exact by construction: the key is the span's bytes and its cuts
  // (each token's id, each stretch's end and whether it begins the input), and the ids are those
  // cuts' ids, each a function of them.
  void encode_span(std::span<const Cut> cuts, std::vector<TokenId>* out) const {
    const char* begin = cuts.front().text.data();
    const char* end = cuts.back().text.data() + cuts.back().text.size();
    if (static_cast<size_t>(end - begin) < kMinCachedStretchBytes) {
      for (const Cut& c : cuts) encode_cut(c, out);  // the per-thread memo is cheaper
      return;
    }
    thread_local std::vector<uint64_t> shape;
    shape.clear();
    for (const Cut& c : cuts) {
      shape.push_back(c.token ? (uint64_t{1} << 63) | *c.token
                              : static_cast<uint64_t>(c.text.data() + c.text.size() - begin) << 1 |
                                    (c.first ? 1 : 0));
    }
    const EncodeCache::Key key =
        EncodeCache::key_of_span(std::string_view(begin, static_cast<size_t>(end - begin)), shape);
    if (cache_->find(key, out)) return;
    const size_t before = out->size();
    for (const Cut& c : cuts) encode_cut(c, out);
    cache_->insert(key, std::span<const TokenId>(out->data() + before, out->size() - before));
  }
  // One raw stretch between added tokens: normalized, cut at the added tokens found in
  // normalized text, pre-tokenized, and each piece through the model.
  void encode_stretch(const Cut& stretch, std::vector<TokenId>* out) const {
    // Not re-entrant (nothing encode_stretch calls calls it): the pieces view these.
    thread_local std::vector<Segment> segments;
    thread_local std::vector<Piece> pieces;
    thread_local std::string normalized;
    thread_local PieceStore store;
    segments.clear();
    store.clear();
    added_.split_stretch(Piece{stretch.text, stretch.first}, normalizer_.get(), &normalized,
                         &segments);
    for (const Segment& s : segments) {
      if (s.token) {
        out->push_back(*s.token);
        continue;
      }
      pieces.clear();
      pieces.push_back(s.text);
      if (pre_) pre_->pre_tokenize(&pieces, &store);
      for (const Piece& p : pieces) model_.encode(p.text, out);
    }
  }
  // A stretch too short for the shared cache (its hash and lock would cost what encoding it
  // does) through this thread's memo instead: the short lines of a chat cut at newline tokens,
  // the role names between a template's markers, come back all through a conversation.
  void encode_short_stretch(const Cut& stretch, std::vector<TokenId>* out) const {
    thread_local std::string key;
    key.assign(1, stretch.first ? '\1' : '\0');
    key.append(stretch.text);
    thread_token_cache<ShortStretchTag>(short_stretch_owner_)
        .append_ids(key, out, [&](std::vector<TokenId>* o) { encode_stretch(stretch, o); });
  }
  // An upper bound on the bytes one id decodes to: no supported decoder makes a token's text
  // longer than its vocabulary entry (ByteLevel maps each character to one byte; Metaspace,
  // byte fallback and prefixes only shrink it).
  size_t longest_token_bytes() const {
    size_t longest = 1;
    for (TokenId id = 0; id < model_.size(); ++id) {
      longest = std::max(longest, model_.id_to_token(id).size());
    }
    for (TokenId id = 0; id < added_.max_id_plus_one(); ++id) {
      if (const AddedToken* t = added_.find(id)) longest = std::max(longest, t->content.size());
    }
    return longest;
  }

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_;
  BpeModel model_;
  AddedVocabulary added_;
  PostProcessor post_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<EncodeCache> cache_;  // null: no cache
  size_t max_token_bytes_;
  uint64_t short_stretch_owner_;  // names this tokenizer's short-stretch memo in every thread
};

// `s` with `origin` named, for load errors.
Status in(std::string_view origin, const Status& s) {
  return Status(s.code(), std::string(origin) + ": " + std::string(s.message()));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> parse_tokenizer(std::string_view json, std::string_view origin,
                                                   size_t encode_cache_bytes) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(std::string(origin) + ": not JSON (" +
                                      simdjson::error_message(err) + ")");
  }
  simdjson::dom::element model_json;
  if (doc["model"].get(model_json) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(std::string(origin) +
                                      ": no \"model\" (is this a tokenizer.json?)");
  }
  auto normalizer = make_normalizer(doc["normalizer"]);
  if (!normalizer.ok()) return in(origin, normalizer.status());
  auto pre = make_pre_tokenizer(doc["pre_tokenizer"]);
  if (!pre.ok()) return in(origin, pre.status());
  auto model = BpeModel::from_json(model_json);
  if (!model.ok()) return in(origin, model.status());
  auto added = AddedVocabulary::from_json(doc["added_tokens"], normalizer->get());
  if (!added.ok()) return in(origin, added.status());
  auto post = PostProcessor::from_json(doc["post_processor"]);
  if (!post.ok()) return in(origin, post.status());
  auto decoder = make_decoder(doc["decoder"]);
  if (!decoder.ok()) return in(origin, decoder.status());
  return std::unique_ptr<Tokenizer>(std::make_unique<HfTokenizer>(
      std::move(*normalizer), std::move(*pre), std::move(*model), std::move(*added),
      std::move(*post), std::move(*decoder), encode_cache_bytes));
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path,
                                                  size_t encode_cache_bytes) {
  std::filesystem::path file(path);
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) file /= "tokenizer.json";
  std::ifstream in_file(file, std::ios::binary);
  if (!in_file) {
    return absl::NotFoundError("cannot read the tokenizer " + file.string());
  }
  std::ostringstream contents;
  contents << in_file.rdbuf();
  return parse_tokenizer(contents.str(), file.string(), encode_cache_bytes);
}

}  // namespace kvgate::tokenizer
