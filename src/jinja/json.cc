#include "jinja/json.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>

#include "absl/container/flat_hash_map.h"
#include "jinja/operators.h"
#include "jinja/py_str.h"
#include "jinja/unicode.h"

namespace kvgate::jinja {
namespace {

Status json_error(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

bool has_repeated_keys(const std::vector<std::pair<Value, Value>>& items) {
  if (items.size() <= 16) {
    for (size_t i = 1; i < items.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (items[i].first.str() == items[j].first.str()) return true;
      }
    }
    return false;
  }
  absl::flat_hash_map<std::string_view, bool> seen;
  for (const auto& item : items) {
    if (!seen.try_emplace(item.first.str(), true).second) return true;
  }
  return false;
}

// Python's json.loads keeps the last value of a repeated key, at the first key's position.
void drop_repeated_keys(DictObj* dict) {
  if (!has_repeated_keys(dict->items)) return;
  std::vector<std::pair<Value, Value>> all = std::move(dict->items);
  dict->items.clear();
  absl::flat_hash_map<std::string_view, size_t> position;
  for (auto& [key, value] : all) {
    auto [it, inserted] = position.try_emplace(key.str(), dict->items.size());
    if (inserted) {
      dict->items.emplace_back(std::move(key), std::move(value));
    } else {
      dict->items[it->second].second = std::move(value);
    }
  }
}

Result<Value> convert(simdjson::dom::element e, int depth) {
  if (depth > 512) return json_error("the context JSON nests too deeply");
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      auto list = make_ref<ListObj>();
      simdjson::dom::array array;
      if (e.get_array().get(array) != simdjson::SUCCESS) return json_error("bad JSON array");
      list->items.reserve(array.size());
      for (simdjson::dom::element item : array) {
        auto v = convert(item, depth + 1);
        if (!v.ok()) return v.status();
        list->items.push_back(std::move(*v));
      }
      return Value::list(std::move(list));
    }
    case simdjson::dom::element_type::OBJECT: {
      auto dict = make_ref<DictObj>();
      simdjson::dom::object object;
      if (e.get_object().get(object) != simdjson::SUCCESS) return json_error("bad JSON object");
      for (simdjson::dom::key_value_pair member : object) {
        auto v = convert(member.value, depth + 1);
        if (!v.ok()) return v.status();
        dict->items.emplace_back(Value::borrowed(member.key), std::move(*v));
      }
      drop_repeated_keys(dict.get());
      return Value::dict(std::move(dict));
    }
    case simdjson::dom::element_type::INT64:
      return Value::integer(e.get_int64().value_unsafe());
    case simdjson::dom::element_type::UINT64:
      return json_error("the context JSON holds an integer beyond 64 bits");
    case simdjson::dom::element_type::DOUBLE:
      return Value::number(e.get_double().value_unsafe());
    case simdjson::dom::element_type::STRING:
      return Value::borrowed(e.get_string().value_unsafe());
    case simdjson::dom::element_type::BOOL:
      return Value::boolean(e.get_bool().value_unsafe());
    case simdjson::dom::element_type::NULL_VALUE:
      return Value::none();
  }
  return Value::none();
}

// "\uXXXX" for a UTF-16 code unit (v < 0x10000).
void append_hex4(unsigned v, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  const char escaped[6] = {
      '\\', 'u', kHex[(v >> 12) & 0xF], kHex[(v >> 8) & 0xF], kHex[(v >> 4) & 0xF], kHex[v & 0xF]};
  out->append(escaped, sizeof escaped);
}

void append_json_string(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x80) {
      const size_t start = i;
      const char32_t c = decode_at(s, &i);
      if (!ensure_ascii) {
        out->append(s.substr(start, i - start));
      } else if (c >= 0x10000) {
        const char32_t v = c - 0x10000;
        append_hex4(0xD800 | (v >> 10), out);
        append_hex4(0xDC00 | (v & 0x3FF), out);
      } else {
        append_hex4(c, out);
      }
      continue;
    }
    ++i;
    switch (b) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (b < 0x20 || (b == 0x7F && ensure_ascii)) {
          append_hex4(b, out);
        } else {
          out->push_back(static_cast<char>(b));
        }
    }
  }
  out->push_back('"');
}

void append_json_float(double f, std::string* out) {
  if (std::isnan(f)) {
    *out += "NaN";
  } else if (std::isinf(f)) {
    *out += f < 0 ? "-Infinity" : "Infinity";
  } else {
    append_float(f, out);
  }
}

class Writer {
 public:
  Writer(const JsonStyle& style, std::string* out) : style_(style), out_(out) {}

  Status write(const Value& v) {
    if (++depth_ > 512) return json_error("RecursionError: too deeply nested for tojson");
    Status s = write_value(v);
    --depth_;
    return s;
  }

 private:
  Status write_value(const Value& v) {
    switch (v.kind()) {
      case Kind::kNone:
        *out_ += "null";
        return absl::OkStatus();
      case Kind::kBool:
        *out_ += v.as_bool() ? "true" : "false";
        return absl::OkStatus();
      case Kind::kInt:
        return append_repr(v, out_);
      case Kind::kFloat:
        append_json_float(v.as_double(), out_);
        return absl::OkStatus();
      case Kind::kString:
        append_json_string(v.str(), style_.ensure_ascii, out_);
        return absl::OkStatus();
      case Kind::kList:
        if (v.seq() == SeqKind::kList || v.seq() == SeqKind::kTuple) return write_list(v.list());
        break;
      case Kind::kDict:
        return write_dict(v.dict());
      default:
        break;
    }
    return json_error("Object of type " + std::string(type_name(v)) + " is not JSON serializable");
  }

  void newline() {
    out_->push_back('\n');
    for (int i = 0; i < level_; ++i) *out_ += style_.indent;
  }

  void open(char c) {
    out_->push_back(c);
    if (style_.indented) {
      ++level_;
      newline();
    }
  }

  void separate() {
    *out_ += style_.item_separator;
    if (style_.indented) newline();
  }

  void close(char c) {
    if (style_.indented) {
      --level_;
      newline();
    }
    out_->push_back(c);
  }

  Status write_list(const ListObj& list) {
    if (list.items.empty()) {
      *out_ += "[]";
      return absl::OkStatus();
    }
    open('[');
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (i > 0) separate();
      if (Status s = write(list.items[i]); !s.ok()) return s;
    }
    close(']');
    return absl::OkStatus();
  }

  Status write_key(const Value& key) {
    switch (key.kind()) {
      case Kind::kString:
        append_json_string(key.str(), style_.ensure_ascii, out_);
        return absl::OkStatus();
      case Kind::kFloat: {
        std::string s;
        append_json_float(key.as_double(), &s);
        append_json_string(s, false, out_);
        return absl::OkStatus();
      }
      case Kind::kBool:
        *out_ += key.as_bool() ? "\"true\"" : "\"false\"";
        return absl::OkStatus();
      case Kind::kInt:
        out_->push_back('"');
        (void)append_repr(key, out_);
        out_->push_back('"');
        return absl::OkStatus();
      case Kind::kNone:
        *out_ += "\"null\"";
        return absl::OkStatus();
      default:
        return json_error("keys must be str, int, float, bool or None, not " +
                          std::string(type_name(key)));
    }
  }

  Status write_dict(const DictObj& dict) {
    if (dict.items.empty()) {
      *out_ += "{}";
      return absl::OkStatus();
    }
    std::vector<const std::pair<Value, Value>*> items;
    items.reserve(dict.items.size());
    for (const auto& item : dict.items) items.push_back(&item);
    if (style_.sort_keys) {
      Status error = absl::OkStatus();
      std::stable_sort(items.begin(), items.end(), [&](const auto* a, const auto* b) {
        if (!error.ok()) return false;
        auto less = py_compare(a->first, b->first, CompareOp::kLt);
        if (!less.ok()) {
          error = less.status();
          return false;
        }
        return *less;
      });
      if (!error.ok()) return error;
    }
    open('{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) separate();
      if (Status s = write_key(items[i]->first); !s.ok()) return s;
      *out_ += style_.key_separator;
      if (Status s = write(items[i]->second); !s.ok()) return s;
    }
    close('}');
    return absl::OkStatus();
  }

  const JsonStyle& style_;
  std::string* out_;
  int level_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Value> parse_json_object(std::string_view json, simdjson::dom::parser* parser) {
  simdjson::dom::element doc;
  if (auto err = parser->parse(json.data(), json.size()).get(doc); err != simdjson::SUCCESS) {
    return json_error(std::string("the context is not valid JSON (") +
                      simdjson::error_message(err) + ")");
  }
  if (doc.type() != simdjson::dom::element_type::OBJECT) {
    return json_error("the context must be a JSON object");
  }
  return convert(doc, 0);
}

Status append_json(const Value& v, const JsonStyle& style, std::string* out) {
  return Writer(style, out).write(v);
}

}  // namespace kvgate::jinja
