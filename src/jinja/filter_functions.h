// The filter functions filters.cc registers by name: text and number filters in text_filters.cc,
// sequence and mapping filters in sequence_filters.cc. Each follows jinja2's own function
// (filters.py) and its Python signature.
#pragma once

#include "jinja/evaluator.h"

namespace kvgate::jinja::filters {

#define JINJA_FILTER(name) Result<Value> name(Evaluator& ev, const Value& v, Args& args)

// text_filters.cc
JINJA_FILTER(trim);
JINJA_FILTER(upper);
JINJA_FILTER(lower);
JINJA_FILTER(capitalize);
JINJA_FILTER(title);
JINJA_FILTER(replace);
JINJA_FILTER(string);
JINJA_FILTER(safe);
JINJA_FILTER(escape);
JINJA_FILTER(forceescape);
JINJA_FILTER(to_int);
JINJA_FILTER(to_float);
JINJA_FILTER(abs);
JINJA_FILTER(round);
JINJA_FILTER(indent);
JINJA_FILTER(wordcount);
JINJA_FILTER(truncate);
JINJA_FILTER(format);
JINJA_FILTER(center);
JINJA_FILTER(tojson);

// sequence_filters.cc
JINJA_FILTER(length);
JINJA_FILTER(first);
JINJA_FILTER(last);
JINJA_FILTER(default_value);
JINJA_FILTER(list);
JINJA_FILTER(items);
JINJA_FILTER(join);
JINJA_FILTER(map);
JINJA_FILTER(select);
JINJA_FILTER(reject);
JINJA_FILTER(selectattr);
JINJA_FILTER(rejectattr);
JINJA_FILTER(unique);
JINJA_FILTER(sort);
JINJA_FILTER(reverse);
JINJA_FILTER(dictsort);
JINJA_FILTER(min);
JINJA_FILTER(max);
JINJA_FILTER(sum);
JINJA_FILTER(attr);

#undef JINJA_FILTER

// soft_str(): str(v), keeping a string (and Markup) as it is.
Result<Value> soft_str(const Value& v);

}  // namespace kvgate::jinja::filters
