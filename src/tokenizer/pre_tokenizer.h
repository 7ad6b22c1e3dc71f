// Pre-tokenizers: cut a normalized piece of text into the words the model encodes one by one
// (tokenizer.json "pre_tokenizer"), as Hugging Face's pre-tokenizer of the same name cuts it.
//
// Threading: immutable after construction.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "simdjson.h"

namespace kvgate::tokenizer {

// A piece of text to encode: a view into the stretch being encoded, or into a PieceStore when a
// pre-tokenizer rewrote it. Splitting a piece only narrows the view: no bytes are copied.
struct Piece {
  std::string_view text;
  // Begins where the whole input begins (Metaspace's "first" scheme prepends only there).
  bool first = false;
};

// The text pre-tokenizers rewrite (ByteLevel's byte characters, Metaspace's word marks), kept in
// blocks that never move while the pieces viewing them are alive: until clear().
class PieceStore {
 public:
  // A copy of `text` that stays put until clear().
  std::string_view keep(std::string_view text);
  // Forgets every kept text (their views dangle); blocks past a small reserve are freed, so one
  // huge prompt does not pin its size in the thread for good.
  void clear();

 private:
  static constexpr size_t kBlockBytes = 64 * 1024;
  static constexpr size_t kReserveBytes = 1024 * 1024;
  std::vector<std::string> blocks_;  // each reserved once; appends never reallocate
  size_t current_ = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their parts, in order; empty parts are dropped. Rewritten text goes to
  // `store`, which must outlive the pieces.
  virtual void pre_tokenize(std::vector<Piece>* pieces, PieceStore* store) const = 0;
};

// From the "pre_tokenizer" object (null: none, returns nullptr).
Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(
    simdjson::simdjson_result<simdjson::dom::element> field);

}  // namespace kvgate::tokenizer
