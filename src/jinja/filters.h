// jinja2's filters (`x | name(args)`), transformers' tojson in place of jinja2's own.
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace kvgate::jinja {

// The filter `name`, or null.
FilterFn find_filter(std::string_view name);
// A jinja2 filter this module does not implement (a parse error says so, not "no such filter").
bool is_jinja_filter(std::string_view name);

}  // namespace kvgate::jinja
