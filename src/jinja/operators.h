// Python's semantics for the operators a template uses: truth, ==, ordering, `in`, arithmetic on
// int/float/bool, + and * on str/list/tuple, % formatting, and the errors Python raises for the
// rest (TypeError, ZeroDivisionError, jinja2's UndefinedError).
#pragma once

#include "jinja/value.h"

namespace kvgate::jinja {

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

bool py_truthy(const Value& v);
bool py_equal(const Value& a, const Value& b);
// <, <=, >, >= (and == / != / in / not in, for the tests that take an operator name).
Result<bool> py_compare(const Value& a, const Value& b, CompareOp op);
// `item in container`.
Result<bool> py_contains(const Value& container, const Value& item);
// `a op b`; `a` is taken by value so that a string only it holds can grow in place.
Result<Value> py_binary(BinaryOp op, Value a, const Value& b);
Result<Value> py_negate(const Value& v);
Result<Value> py_positive(const Value& v);

// The error for using undefined `v` (printing is fine; arithmetic, attributes and calls are not).
Status undefined_error(const Value& v);

// Python's `hash()` equality classes: false for values a set or dict key cannot hold.
bool py_hashable(const Value& v);

}  // namespace kvgate::jinja
