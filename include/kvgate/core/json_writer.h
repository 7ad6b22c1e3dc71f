// JsonWriter: appends compact JSON to a caller-owned string (reuse the string to avoid allocation).
// Commas between members and elements are inserted automatically.
//
//   JsonWriter w(&out);
//   w.begin_object(); w.key("id"); w.value("x"); w.key("n"); w.value(3); w.end_object();
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(unsigned v) { return value(static_cast<uint64_t>(v)); }
  JsonWriter& value(long long v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(unsigned long long v) { return value(static_cast<uint64_t>(v)); }
  JsonWriter& value(double v);  // non-finite values are written as null
  JsonWriter& null();
  template <class T>
  JsonWriter& value(const std::optional<T>& v) {  // null when empty
    return v ? value(*v) : null();
  }
  // Inserts already-serialized JSON as one value.
  JsonWriter& raw(std::string_view json);

  template <class T>
  JsonWriter& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

 private:
  void separate();
  std::string* out_;
  std::vector<bool> first_{true};  // per open container: no member written yet
  bool after_key_ = false;
};

// Appends `s` to `out` as a JSON string literal (quotes included), escaping as RFC 8259 requires.
void append_json_string(std::string* out, std::string_view s);

}  // namespace kvgate
