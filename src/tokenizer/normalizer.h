// Normalizers: rewrite a piece of input text before it is pre-tokenized (tokenizer.json
// "normalizer"). Each does what Hugging Face's normalizer of the same name does to the text; the
// tokenizer keeps no offsets, so only the text matters.
//
// Threading: immutable after construction.
#pragma once

#include <memory>
#include <string>

#include "kvgate/core/result.h"
#include "simdjson.h"

namespace kvgate::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string* text) const = 0;
};

// From the "normalizer" object (null: none, returns nullptr).
Result<std::unique_ptr<Normalizer>> make_normalizer(
    simdjson::simdjson_result<simdjson::dom::element> field);

}  // namespace kvgate::tokenizer
