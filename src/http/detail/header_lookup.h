// A header's value by name, for the few fields a parsed message has.
//
// beast::http::fields::find() walks its tree with a case-insensitive ordering that lowers every
// character it compares: about 550 instructions to find content-type among three fields of an
// engine's answer (callgrind). A message carries a handful of fields, so a scan in arrival order
// that compares lengths first, and only names of the same length without regard to case, finds
// the same field (the first of that name, as find() does) for a fraction of that.
//
// Threading: none of its own; the fields must not change during the call.
#pragma once

#include <string_view>

#include "boost/beast/core/string.hpp"
#include "boost/beast/http/fields.hpp"

namespace kvgate::http::detail {

// The value of the first field called `name` (any case); empty if there is none.
inline std::string_view header_value(const boost::beast::http::fields& fields,
                                     std::string_view name) {
  for (const auto& field : fields) {
    const std::string_view candidate = field.name_string();
    if (candidate.size() == name.size() && boost::beast::iequals(candidate, name)) {
      return field.value();
    }
  }
  return {};
}

}  // namespace kvgate::http::detail
