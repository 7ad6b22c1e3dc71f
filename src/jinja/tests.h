// jinja2's tests (`x is name(args)`): defined, none, string, divisibleby, sameas, ...
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace kvgate::jinja {

// The test `name` (also its operator spellings, `is eq`, `is ==`), or null.
TestFn find_test(std::string_view name);

}  // namespace kvgate::jinja
