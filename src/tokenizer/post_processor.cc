#include "tokenizer/post_processor.h"

#include <string>

#include "tokenizer/json_util.h"

namespace kvgate::tokenizer {
namespace {

Result<std::vector<TokenId>> special_ids(simdjson::dom::element template_json,
                                         std::string_view name) {
  simdjson::dom::array ids;
  if (template_json["special_tokens"][name]["ids"].get_array().get(ids) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("post_processor: special token \"" + std::string(name) +
                                      "\" has no \"ids\" in \"special_tokens\"");
  }
  std::vector<TokenId> out;
  for (simdjson::dom::element e : ids) {
    uint64_t id = 0;
    if (e.get_uint64().get(id) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("post_processor: a special token id is not a number");
    }
    out.push_back(static_cast<TokenId>(id));
  }
  return out;
}

// `pair`'s first element (the token's id) from BERT's and RoBERTa's ["[CLS]", 101].
std::vector<TokenId> pair_id(simdjson::simdjson_result<simdjson::dom::element> pair) {
  uint64_t id = 0;
  if (pair.at(1).get_uint64().get(id) != simdjson::SUCCESS) return {};
  return {static_cast<TokenId>(id)};
}

Status apply(simdjson::dom::element json, PostProcessor* p) {
  const std::string_view type = string_or(json["type"], "");
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "TemplateProcessing") {
    simdjson::dom::array single;
    if (json["single"].get_array().get(single) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("post_processor TemplateProcessing: no \"single\" list");
    }
    bool seen_sequence = false;
    for (simdjson::dom::element piece : single) {
      std::string_view name;
      if (piece["SpecialToken"]["id"].get_string().get(name) == simdjson::SUCCESS) {
        auto ids = special_ids(json, name);
        if (!ids.ok()) return ids.status();
        auto& into = seen_sequence ? p->suffix : p->prefix;
        into.insert(into.end(), ids->begin(), ids->end());
      } else if (piece["Sequence"].error() == simdjson::SUCCESS) {
        seen_sequence = true;
      } else {
        return absl::InvalidArgumentError(
            "post_processor TemplateProcessing: a \"single\" piece is neither SpecialToken nor "
            "Sequence");
      }
    }
    return absl::OkStatus();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const auto cls = pair_id(json["cls"]);
    const auto sep = pair_id(json["sep"]);
    p->prefix.insert(p->prefix.end(), cls.begin(), cls.end());
    p->suffix.insert(p->suffix.end(), sep.begin(), sep.end());
    return absl::OkStatus();
  }
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (json["processors"].get_array().get(list) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("post_processor Sequence: \"processors\" is not a list");
    }
    for (simdjson::dom::element e : list) {
      if (Status s = apply(e, p); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("post_processor type \"" + std::string(type) +
                                    "\" is not supported");
}

}  // namespace

Result<PostProcessor> PostProcessor::from_json(JsonField field) {
  PostProcessor p;
  simdjson::dom::element json;
  if (!present(field, &json)) return p;
  if (Status s = apply(json, &p); !s.ok()) return s;
  return p;
}

}  // namespace kvgate::tokenizer
