// BpeModel: byte-pair encoding of one pre-tokenized word, as Hugging Face's BPE model does it.
//
// A word starts as its characters (each a vocabulary entry; a character that is none becomes its
// bytes' <0xXX> tokens with byte_fallback, else the unknown token, consecutive unknowns fused with
// fuse_unk). Then the adjacent pair with the lowest merge rank merges, leftmost first among equal
// ranks, until no adjacent pair has a merge. With ignore_merges a word that is itself in the
// vocabulary is that one token.
//
// Threading: immutable after construction; encode() from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/core/result.h"
#include "simdjson.h"

namespace kvgate::tokenizer {

class BpeModel {
 public:
  // From the "model" object of tokenizer.json.
  static Result<BpeModel> from_json(simdjson::dom::element json);

  // Words up to kCachedWordBytes are remembered per thread (tokenizer/thread_cache.h): prose
  // repeats its words, and a repeated word costs one lookup instead of a vocabulary lookup per
  // character and the merges.
  void encode(std::string_view word, std::vector<TokenId>* out) const;
  static constexpr size_t kCachedWordBytes = 64;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  std::string_view id_to_token(TokenId id) const;
  uint32_t size() const { return static_cast<uint32_t>(tokens_.size()); }

 private:
  struct Merge {
    uint32_t rank;
    TokenId id;
  };
  static uint64_t pair_key(TokenId a, TokenId b) { return (uint64_t{a} << 32) | b; }
  const Merge* merge_of(TokenId a, TokenId b) const {
    auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }
  // A long word (a SentencePiece model with no pre-tokenizer gets whole lines) cut before its
  // word marks where no token could span the cut, each part encoded as a word of its own.
  void encode_by_word_marks(std::string_view word, std::vector<TokenId>* out) const;
  // One word, uncut: through this thread's word cache when it is short enough to be kept.
  void encode_word(std::string_view word, std::vector<TokenId>* out) const;
  void encode_uncached(std::string_view word, std::vector<TokenId>* out) const;
  // The id of a one-character vocabulary entry of up to three bytes, or kNoId.
  TokenId char_id(std::string_view ch) const;
  // Decides where encode_by_word_marks() may cut (cut_at_word_marks_, no_cut_after_).
  void find_word_mark_cuts();
  // The word's initial symbols (characters, byte tokens, unknowns).
  void initial_symbols(std::string_view word, std::vector<TokenId>* symbols) const;

  absl::flat_hash_map<std::string, TokenId> vocab_;
  std::vector<std::string> tokens_;  // by id ("" for an id no entry has)
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::optional<TokenId> unk_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  // The id of each one-character vocabulary entry for code points below kCharTable (kNoId for
  // none): a word's characters are looked up here, not hashed into vocab_ one by one.
  // Every character of one to three UTF-8 bytes (the Basic Multilingual Plane: Latin, CJK, and
  // SentencePiece's "\u2581" word mark): 256 KiB a model.
  static constexpr uint32_t kCharTable = 0x10000;
  static constexpr TokenId kNoId = static_cast<TokenId>(-1);
  std::vector<TokenId> char_ids_;
  TokenId byte_tokens_[256] = {};  // <0xXX> ids (valid when has_byte_tokens_)
  bool has_byte_tokens_ = false;
  uint64_t cache_id_ = 0;  // names this model's word cache in every thread (never reused)
  // Cutting before a word mark ("\u2581") that follows another character is exact when no token
  // holds that character followed by the mark (no merge can then join symbols across the cut):
  // on when the vocabulary has the mark and a few such characters at most, listed here.
  bool cut_at_word_marks_ = false;
  std::vector<std::string> no_cut_after_;
};

}  // namespace kvgate::tokenizer
