// AddedVocabulary: the tokens tokenizer.json lists under "added_tokens" (special tokens such as
// <|im_start|>, and tokens added to a model after training). They are cut out of the text before
// anything else sees it, so a special token's text always becomes its one id.
//
// As Hugging Face does it: tokens with normalized=false are found in the raw text; the text
// between them is normalized, and tokens with normalized=true are found in that (each token's own
// text normalized the same way). At each position the longest token wins, leftmost first.
// single_word keeps a match only between non-word characters; lstrip / rstrip widen it over
// neighbouring whitespace.
//
// Threading: immutable after construction.
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
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace kvgate::tokenizer {

struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A stretch of the input: an added token's id, or text for the pre-tokenizer and the model (a
// view into the raw stretch, or into its normalized copy).
struct Segment {
  std::optional<TokenId> token;
  Piece text;
};

// The same as a view into the text that was cut (no copy: most raw stretches of a resent chat
// are found in the encode cache and never need one). A token's view is the bytes it took (its
// text and the whitespace lstrip / rstrip took with it): the cuts of a text tile it.
struct Cut {
  std::optional<TokenId> token;
  std::string_view text;
  bool first = false;    // begins the input
  bool special = false;  // a special token's (a chat template's markers between messages)
};

class AddedVocabulary {
 public:
  // From the "added_tokens" list; `normalizer` (may be null) is the tokenizer's.
  static Result<AddedVocabulary> from_json(simdjson::simdjson_result<simdjson::dom::element> field,
                                           const Normalizer* normalizer);

  // `text` cut at the tokens found in the raw text (normalized=false); the stretches between
  // them stay raw. What a stretch becomes (split_stretch(), then the pre-tokenizer and the model)
  // depends only on its bytes and on whether it begins the input: the encode cache keys on that.
  // From byte `from` on (0, or one of boundaries()), as the whole text would be cut there.
  void split_raw(std::string_view text, std::vector<Cut>* out, size_t from = 0) const;
  // The ends of the tokens in `text` that any text beginning with the same bytes is cut at as
  // well, so that the cuts (and ids) before such an end depend on the bytes before it alone: the
  // occurrences of special tokens found in the raw text that no added token can overlap or
  // extend, nor a neighbour's lstrip / rstrip / single_word reach across (a chat template's
  // markers between messages). Empty when the vocabulary has no such token.
  void boundaries(std::string_view text, std::vector<size_t>* ends) const;
  bool has_boundaries() const { return !boundary_.empty(); }
  // A raw stretch normalized and cut at the tokens found in normalized text. The segments view
  // `stretch.text`, or `*normalized` (the normalized copy) when there is a normalizer: both must
  // outlive them.
  void split_stretch(Piece stretch, const Normalizer* normalizer, std::string* normalized,
                     std::vector<Segment>* out) const;

  const AddedToken* find(TokenId id) const;
  std::optional<TokenId> find(std::string_view content) const;
  uint32_t max_id_plus_one() const { return max_id_plus_one_; }

 private:
  // Finds the longest token at each position (leftmost-longest) with a byte trie.
  class Matcher {
   public:
    void add(std::string_view pattern, uint32_t token_index);
    // The longest pattern starting at text[at]: its end and token index.
    std::optional<std::pair<size_t, uint32_t>> longest_at(std::string_view text, size_t at) const;
    // The first position from `at` where a pattern may start (text.size() if none): a scan for
    // the patterns' first bytes, memchr's when they all share one (a chat template's '<').
    size_t next_candidate(std::string_view text, size_t at) const;
    bool empty() const { return patterns_ == 0; }

   private:
    static constexpr uint32_t kNone = UINT32_MAX;
    // The child of `node` over `byte`, or kNone. Open addressing with a multiplicative hash: a
    // chat's every '<' and newline walks this, a step a byte (Gemma 3 lists 6,415 tokens).
    uint32_t child(uint32_t node, uint8_t byte) const {
      const uint64_t key = (uint64_t{node} << 8 | byte) + 1;  // 0 marks a free slot
      for (size_t i = slot_of(key);; i = (i + 1) & (edge_keys_.size() - 1)) {
        if (edge_keys_[i] == key) return edge_children_[i];
        if (edge_keys_[i] == 0) return kNone;
      }
    }
    size_t slot_of(uint64_t key) const {
      return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> edge_shift_);
    }
    void insert_edge(uint64_t key, uint32_t child);

    uint32_t nodes_ = 1;  // node 0 is the root
    size_t patterns_ = 0;
    std::vector<uint64_t> edge_keys_ = std::vector<uint64_t>(16, 0);  // (node << 8 | byte) + 1
    std::vector<uint32_t> edge_children_ = std::vector<uint32_t>(16, 0);
    int edge_shift_ = 60;  // 64 - log2(slots)
    size_t edges_ = 0;
    std::vector<uint32_t> terminal_ = {kNone};  // node -> token index, kNone if none ends there
    // Whether a pattern can start with `a` then `b`: most candidates a scan stops at (a '<' in
    // code, the lead byte of a punctuation mark that a token's lead byte shares) are turned
    // away here without a walk down the trie.
    bool pair_possible(uint8_t a, uint8_t b) const {
      return (pair_bits_[a][b >> 6] >> (b & 63)) & 1;
    }

    bool first_byte_[256] = {};
    bool one_byte_pattern_[256] = {};  // the byte alone is a pattern
    uint64_t pair_bits_[256][4] = {};  // the first two bytes of a longer pattern
    int first_bytes_ = 0;              // distinct first bytes
    int only_first_byte_ = -1;         // the one first byte all patterns share; -1: none or several
    // The distinct first bytes when there are few (a vector compare each): kMaxScanBytes at most.
    static constexpr int kMaxScanBytes = 6;
    uint8_t scan_bytes_[kMaxScanBytes] = {};
  };
  // Appends the segments of `text` from byte `from` on (`first`: it begins the input) found with
  // `matcher`.
  void split_with(const Matcher& matcher, std::string_view text, bool first, std::vector<Cut>* out,
                  size_t from = 0) const;
  // Whether every occurrence of tokens_[index] in any raw text is cut as that token, whatever
  // surrounds it (boundaries()).
  bool cut_alike_everywhere(size_t index) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<TokenId, uint32_t> by_id_;
  absl::flat_hash_map<std::string, TokenId> by_content_;
  Matcher raw_;
  Matcher normalized_;
  Matcher boundary_;  // the special tokens boundaries() looks for
  uint32_t max_id_plus_one_ = 0;
};

}  // namespace kvgate::tokenizer
