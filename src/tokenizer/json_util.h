// Reading tokenizer.json fields with defaults (simdjson DOM).
#pragma once

#include <cstdint>
#include <string_view>

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

}  // namespace kvgate::tokenizer
