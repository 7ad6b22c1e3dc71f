// JSON in and out: the render context parsed into values (objects keep their key order and a
// repeated key keeps its last value, as Python's json.loads does), and values written back as
// Python's json.dumps writes them (the `tojson` filter transformers installs).
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace simdjson::dom {
class parser;
}

namespace kvgate::jinja {

// Parses `json`, a JSON object. Its strings stay in `parser`, which must outlive the values and
// parse nothing else meanwhile.
Result<Value> parse_json_object(std::string_view json, simdjson::dom::parser* parser);

// json.dumps's arguments.
struct JsonStyle {
  bool ensure_ascii = false;
  bool indented = false;
  std::string indent;  // one level, when indented
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(v): a TypeError for what JSON cannot hold (undefined, namespace, a generator).
Status append_json(const Value& v, const JsonStyle& style, std::string* out);

}  // namespace kvgate::jinja
