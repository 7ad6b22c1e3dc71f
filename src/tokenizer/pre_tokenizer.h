// Pre-tokenizers: cut a normalized piece of text into the words the model encodes one by one
// (tokenizer.json "pre_tokenizer"), as Hugging Face's pre-tokenizer of the same name cuts it.
//
// Threading: immutable after construction.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvgate/core/result.h"
#include "simdjson.h"

namespace kvgate::tokenizer {

struct Piece {
  std::string text;
  // Begins where the whole input begins (Metaspace's "first" scheme prepends only there).
  bool first = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their parts, in order; empty parts are dropped.
  virtual void pre_tokenize(std::vector<Piece>* pieces) const = 0;
};

// From the "pre_tokenizer" object (null: none, returns nullptr).
Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(
    simdjson::simdjson_result<simdjson::dom::element> field);

}  // namespace kvgate::tokenizer
