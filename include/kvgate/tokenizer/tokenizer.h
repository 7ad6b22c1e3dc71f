// Tokenizer: a model's own tokenizer, loaded from the Hugging Face `tokenizer.json` the model
// ships, encoding text to exactly the ids Hugging Face `tokenizers` produces (the engines tokenize
// with it, and the KV blocks they publish are hashed from those ids).
//
// What a tokenizer.json may hold (anything else is a load error naming the field):
//   model          BPE: merges by rank, byte_fallback, ignore_merges, unk_token with fuse_unk,
//                  continuing_subword_prefix / end_of_word_suffix
//   added_tokens   split out of the text first (special ones always), with lstrip, rstrip,
//                  single_word and normalized as Hugging Face applies them
//   normalizer     NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip, Sequence
//   pre_tokenizer  ByteLevel, Split (string or regex pattern, every behaviour, invert),
//                  Metaspace, Digits, Sequence
//   post_processor TemplateProcessing, ByteLevel, Sequence (the BOS an engine adds)
//   decoder        ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence
//
// Threading: a loaded Tokenizer is immutable; encode() and decode() may run on any number of
// threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/result.h"

namespace kvgate::tokenizer {

// How the cache of long encoded stretches has served (see encode()).
struct EncodeCacheStats {
  uint64_t hits = 0, misses = 0, evictions = 0;
  uint64_t entries = 0, bytes = 0;
  // Texts that began with a whole prefix seen before (up to a special token between messages):
  // only the rest was cut and encoded. Counted among the hits too.
  uint64_t prefix_hits = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` to `out`. `add_special_tokens`: apply the post-processor's template
  // (the BOS a completion request gets; a rendered chat prompt already carries its own).
  // InvalidArgument if `text` is not valid UTF-8. Long stretches between added tokens are
  // cached by content, so a text that repeats a recent one's stretches (a chat resent with one
  // more turn) encodes only its new ones; the ids are the same either way.
  virtual Status encode(std::string_view text, bool add_special_tokens,
                        std::vector<TokenId>* out) const = 0;
  // The text of `ids`; unknown ids are skipped.
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const = 0;

  // Ids in the model's vocabulary and the added tokens together (the largest id + 1).
  virtual uint32_t vocab_size() const = 0;
  virtual std::optional<TokenId> token_to_id(std::string_view token) const = 0;
  // Empty for an id no token has.
  virtual std::string_view id_to_token(TokenId id) const = 0;
  // The most bytes one token's text covers (at least 1).
  virtual size_t max_token_bytes() const = 0;

  virtual EncodeCacheStats encode_cache_stats() const = 0;
};

// Stretches shorter than this are encoded every time (about as cheap as hashing one and a
// lookup; a longer one costs some 100 ns a byte to encode).
inline constexpr size_t kMinCachedStretchBytes = 32;
// What the encode cache may hold, in bytes (0: no cache).
inline constexpr size_t kDefaultEncodeCacheBytes = size_t{64} << 20;

// Loads `path`: a tokenizer.json, or a folder holding one.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(
    const std::string& path, size_t encode_cache_bytes = kDefaultEncodeCacheBytes);
// The same from the file's contents (`origin` names it in errors).
Result<std::unique_ptr<Tokenizer>> parse_tokenizer(
    std::string_view json, std::string_view origin,
    size_t encode_cache_bytes = kDefaultEncodeCacheBytes);

}  // namespace kvgate::tokenizer
