// str.format() as the sandbox runs it: {} {0} {name}, .attr and [key] lookups through the
// sandbox's rules, !r !s !a, and the format spec mini-language for str, int and float
// ([[fill]align][sign][#][0][width][,|_][.precision][type]). Nested {} in a spec are not
// supported.
#pragma once

#include "jinja/value.h"

namespace kvgate::jinja {

Result<Value> str_format(Evaluator& ev, const Value& format, Args& args);

}  // namespace kvgate::jinja
