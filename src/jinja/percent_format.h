// printf-style formatting as Python's `str % args` does it (the `%` operator on a string and the
// `format` filter): %s %r %a %d %i %u %o %x %X %e %E %f %F %g %G %c %%, flags, width, precision,
// `*`, and %(key)s with a mapping.
#pragma once

#include "jinja/value.h"

namespace kvgate::jinja {

// `format % args`: a tuple gives the positional values, a dict the %(key)s ones, anything else
// is the one value.
Result<Value> percent_format(const Value& format, const Value& args);

}  // namespace kvgate::jinja
