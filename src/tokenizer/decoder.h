// Decoders: token strings back to text (tokenizer.json "decoder"), as Hugging Face's decoders of
// the same names chain them: each rewrites the list of token strings, and the result is their
// concatenation.
//
// Threading: immutable after construction.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvgate/core/result.h"
#include "simdjson.h"

namespace kvgate::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>* tokens) const = 0;
};

// From the "decoder" object (null: none, returns nullptr).
Result<std::unique_ptr<Decoder>> make_decoder(
    simdjson::simdjson_result<simdjson::dom::element> field);

// `bytes` as UTF-8, each ill-formed sequence replaced by U+FFFD (Rust's from_utf8_lossy).
std::string lossy_utf8(std::string_view bytes);

}  // namespace kvgate::tokenizer
