// The methods a template may call on Python's built-in types, as the immutable sandbox allows
// them: str's (startswith, split, strip, format, ...), list's and tuple's index and count, dict's
// get, items, keys and values. The methods that would mutate a list or dict exist but are blocked.
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace kvgate::jinja {

enum class Access : uint8_t {
  kMissing,  // no such method: `x.name` looks for an item instead
  kAllowed,
  kBlocked,  // the sandbox's "unsafe" (list.append, dict.update)
};

// Whether the str, list, tuple or dict `self` has the method `name`.
Access method_access(const Value& self, std::string_view name);

// self.name(*args); `name` must be a method of self.
Result<Value> call_method(Evaluator& ev, const Value& self, std::string_view name, Args& args);

// `self.name` without the call: a bound method (printing it is an error, calling it works).
Value bound_method(const Value& self, std::string_view name);

}  // namespace kvgate::jinja
