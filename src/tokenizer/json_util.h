// Reading tokenizer.json fields with defaults (simdjson DOM).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "simdjson.h"

namespace kvgate::tokenizer {

using JsonField = simdjson::simdjson_result<simdjson::dom::element>;

// True if the field exists and is not null; then *out is it.
inline bool present(JsonField field, simdjson::dom::element* out) {
  return field.get(*out) == simdjson::SUCCESS && !out->is_null();
}

inline std::string_view string_or(simdjson::simdjson_result<simdjson::dom::element> e,
                                  std::string_view fallback) {
  std::string_view v;
  return e.get_string().get(v) == simdjson::SUCCESS ? v : fallback;
}

inline bool bool_or(simdjson::simdjson_result<simdjson::dom::element> e, bool fallback) {
  bool v = false;
  return e.get_bool().get(v) == simdjson::SUCCESS ? v : fallback;
}

inline int64_t int_or(simdjson::simdjson_result<simdjson::dom::element> e, int64_t fallback) {
  int64_t v = 0;
  return e.get_int64().get(v) == simdjson::SUCCESS ? v : fallback;
}

// The parts of a "Sequence" component: `make` (make_normalizer, make_pre_tokenizer,
// make_decoder) on each element of the list under `key`; parts that are none are skipped.
// `what` names the component in errors ("normalizer").
template <typename T, typename Make>
Result<std::vector<std::unique_ptr<T>>> read_parts(simdjson::dom::element json,
                                                   std::string_view key, std::string_view what,
                                                   Make make) {
  simdjson::dom::array list;
  if (json[key].get_array().get(list) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(std::string(what) + " Sequence: \"" + std::string(key) +
                                      "\" is not a list");
  }
  std::vector<std::unique_ptr<T>> parts;
  for (simdjson::dom::element e : list) {
    auto part = make(JsonField(simdjson::dom::element(e)));
    if (!part.ok()) return part.status();
    if (*part) parts.push_back(std::move(*part));
  }
  return parts;
}

}  // namespace kvgate::tokenizer
