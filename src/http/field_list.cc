#include "kvgate/http/field_list.h"

#include <cassert>

#include "boost/beast/core/string.hpp"
#include "http/detail/kept_room.h"

namespace kvgate::http {

void FieldList::add(std::string_view name, std::string_view value) {
  // One allocation for a usual head: an engine's answer carries a few short fields.
  if (bytes_.capacity() < 256) bytes_.reserve(256);
  const auto at = static_cast<uint32_t>(bytes_.size());
  spans_.push_back(Span{.at = at,
                        .value_at = at + static_cast<uint32_t>(name.size()),
                        .name_size = static_cast<uint32_t>(name.size()),
                        .value_size = static_cast<uint32_t>(value.size())});
  bytes_.append(name);
  bytes_.append(value);
}

void FieldList::add_all(std::string_view block, std::span<const Field> fields) {
  const auto base = static_cast<uint32_t>(bytes_.size());
  const auto offset = [&](std::string_view s) {
    assert(s.data() >= block.data() && s.data() + s.size() <= block.data() + block.size());
    return base + static_cast<uint32_t>(s.data() - block.data());
  };
  bytes_.append(block);
  for (const Field& f : fields) {
    spans_.push_back(Span{.at = offset(f.name),
                          .value_at = offset(f.value),
                          .name_size = static_cast<uint32_t>(f.name.size()),
                          .value_size = static_cast<uint32_t>(f.value.size())});
  }
}

std::string_view FieldList::get(std::string_view name) const {
  for (const Span& s : spans_) {
    if (s.name_size != name.size()) continue;
    const std::string_view candidate(bytes_.data() + s.at, s.name_size);
    if (boost::beast::iequals(candidate, name)) {
      return std::string_view(bytes_.data() + s.value_at, s.value_size);
    }
  }
  return {};
}

FieldList::Field FieldList::operator[](size_t i) const {
  const Span& s = spans_[i];
  return Field{.name = std::string_view(bytes_.data() + s.at, s.name_size),
               .value = std::string_view(bytes_.data() + s.value_at, s.value_size)};
}

void FieldList::truncate(size_t count) {
  if (count >= spans_.size()) return;
  bytes_.resize(spans_[count].at);
  spans_.resize(count);
}

void FieldList::clear() {
  detail::clear_keeping_room(bytes_, kKeptRoom);
  spans_.clear();
}

}  // namespace kvgate::http
