// PostProcessor: the special tokens an encoding gets around its text when the caller asks for
// them (tokenizer.json "post_processor"): TemplateProcessing's single-sequence template, BERT's
// and RoBERTa's fixed ones. ByteLevel only trims offsets, which this tokenizer does not keep.
//
// Threading: immutable after construction.
#pragma once

#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/result.h"
#include "simdjson.h"

namespace kvgate::tokenizer {

struct PostProcessor {
  std::vector<TokenId> prefix;  // before the text's ids
  std::vector<TokenId> suffix;  // after them

  static Result<PostProcessor> from_json(simdjson::simdjson_result<simdjson::dom::element> field);
};

}  // namespace kvgate::tokenizer
