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

// A stretch of the input: an added token's id, or text for the pre-tokenizer and the model.
struct Segment {
  std::optional<TokenId> token;
  Piece text;
};

// The same as a view into the text that was cut (no copy: most raw stretches of a resent chat
// are found in the encode cache and never need one).
struct Cut {
  std::optional<TokenId> token;
  std::string_view text;
  bool first = false;  // begins the input
};

class AddedVocabulary {
 public:
  // From the "added_tokens" list; `normalizer` (may be null) is the tokenizer's.
  static Result<AddedVocabulary> from_json(simdjson::simdjson_result<simdjson::dom::element> field,
                                           const Normalizer* normalizer);

  // `text` cut at the tokens found in the raw text (normalized=false); the stretches between
  // them stay raw. What a stretch becomes (split_stretch(), then the pre-tokenizer and the model)
  // depends only on its bytes and on whether it begins the input: the encode cache keys on that.
  void split_raw(std::string_view text, std::vector<Cut>* out) const;
  // A raw stretch normalized and cut at the tokens found in normalized text.
  void split_stretch(Piece stretch, const Normalizer* normalizer, std::vector<Segment>* out) const;

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
    bool empty() const { return terminal_.empty(); }

   private:
    uint32_t nodes_ = 1;                                // node 0 is the root
    absl::flat_hash_map<uint64_t, uint32_t> edges_;     // node << 8 | byte -> child
    absl::flat_hash_map<uint32_t, uint32_t> terminal_;  // node -> token index
    bool first_byte_[256] = {};
    int first_bytes_ = 0;       // distinct first bytes
    int only_first_byte_ = -1;  // the one first byte all patterns share; -1: none or several
  };
  // Appends the segments of `text` (`first`: it begins the input) found with `matcher`.
  void split_with(const Matcher& matcher, std::string_view text, bool first,
                  std::vector<Cut>* out) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<TokenId, uint32_t> by_id_;
  absl::flat_hash_map<std::string, TokenId> by_content_;
  Matcher raw_;
  Matcher normalized_;
  uint32_t max_id_plus_one_ = 0;
};

}  // namespace kvgate::tokenizer
