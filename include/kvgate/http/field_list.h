// The fields of a parsed HTTP head, in arrival order, kept flat: one string holds every name and
// value, and a small inline array where each starts.
//
// Beast's own fields keep each field as a node of a list and of a case-insensitive tree: an
// allocation per field and a tree insertion, about 1,300 instructions for the five fields of an
// engine's answer (callgrind). A proxy reads two or three fields of that answer, by name, once;
// a scan of a handful of fields that compares lengths first finds them for less. The store costs
// one allocation for the whole head.
//
//   FieldList fields;
//   fields.add("Content-Type", "application/json");
//   fields.get("content-type");  // "application/json": names match without regard to case
//
// Threading: none of its own; a value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"

namespace kvgate::http {

class FieldList {
 public:
  struct Field {
    std::string_view name;  // as the peer spelled it
    std::string_view value;
  };

  void add(std::string_view name, std::string_view value);
  // Adds `fields`, whose names and values all lie within `block` (a received head's field lines),
  // copying the block once instead of each name and value: a parser's path for a whole head.
  void add_all(std::string_view block, std::span<const Field> fields);
  // The value of the first field called `name` (any case); empty if there is none.
  std::string_view get(std::string_view name) const;

  size_t size() const { return spans_.size(); }
  bool empty() const { return spans_.empty(); }
  Field operator[](size_t i) const;
  // Keeps the first `count` fields.
  void truncate(size_t count);
  // Keeps the room of a usual head (kKeptRoom) for the next one, not that of a large one.
  void clear();

  static constexpr size_t kKeptRoom = 4096;
  // The bytes of storage held, used or not.
  size_t room() const { return bytes_.capacity(); }

 private:
  struct Span {
    uint32_t at;        // the name's first byte in bytes_
    uint32_t value_at;  // the value's
    uint32_t name_size;
    uint32_t value_size;
  };
  std::string bytes_;
  absl::InlinedVector<Span, 8> spans_;
};

}  // namespace kvgate::http
