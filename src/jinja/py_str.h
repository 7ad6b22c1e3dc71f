// Values as Python prints them: str() (what {{ x }} writes) and repr() (what a list or dict shows
// of its items), floats as Python's shortest round-trip repr, strings quoted as Python quotes them.
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace kvgate::jinja {

// Appends str(v). An error where Python would print an object's address (a generator, a bound
// method), which a template's output cannot depend on.
Status append_str(const Value& v, std::string* out);
Status append_repr(const Value& v, std::string* out);
Status append_dict_repr(const DictObj& dict, std::string* out);

// repr(float): 1.0, 0.1, 1e+16, 1e-05, inf, nan.
void append_float(double f, std::string* out);
// repr(str): 'it', "it's", with Python's escapes for unprintable characters.
void append_string_repr(std::string_view s, std::string* out);
// markupsafe.escape(): & < > " ' as HTML entities.
void append_html_escaped(std::string_view s, std::string* out);

// str(v) as a value: strings stay as they are (no copy).
Result<Value> to_str_value(const Value& v);

}  // namespace kvgate::jinja
