// jinja2's tests (tests.py), each with its Python signature.
#include "jinja/tests.h"

#include "jinja/filters.h"
#include "jinja/operators.h"
#include "jinja/py_str.h"
#include "jinja/status_macros.h"
#include "jinja/unicode.h"

namespace kvgate::jinja {
namespace {

Result<bool> no_arg(const Args& args, std::string_view what) {
  JINJA_RETURN_IF_ERROR(bind_args(args, what, {}, 0, nullptr));
  return true;
}

#define JINJA_PREDICATE(fn_name, what, expr)                     \
  Result<bool> fn_name(Evaluator&, const Value& v, Args& args) { \
    JINJA_RETURN_IF_ERROR(no_arg(args, what).status());          \
    return (expr);                                               \
  }

JINJA_PREDICATE(is_defined, "defined", !v.is_undefined())
JINJA_PREDICATE(is_undefined, "undefined", v.is_undefined())
JINJA_PREDICATE(is_none, "none", v.is_none())
JINJA_PREDICATE(is_boolean, "boolean", v.is_bool())
JINJA_PREDICATE(is_false, "false", v.is_bool() && !v.as_bool())
JINJA_PREDICATE(is_true, "true", v.is_bool() && v.as_bool())
JINJA_PREDICATE(is_integer, "integer", v.is_int())
JINJA_PREDICATE(is_float, "float", v.is_float())
JINJA_PREDICATE(is_number, "number", v.is_number())
JINJA_PREDICATE(is_string, "string", v.is_string())
JINJA_PREDICATE(is_mapping, "mapping", v.is_dict())
JINJA_PREDICATE(is_escaped, "escaped", v.is_string() && v.markup())
JINJA_PREDICATE(is_iterable, "iterable",
                v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() ||
                    (v.is_object() && v.object().type_name() == "LoopContext"))
// len() and __getitem__: str, list, tuple, range, dict, and Undefined (which has both).
JINJA_PREDICATE(is_sequence, "sequence",
                v.is_string() || v.is_dict() || v.is_undefined() ||
                    (v.is_list() && (v.seq() == SeqKind::kList || v.seq() == SeqKind::kTuple ||
                                     v.seq() == SeqKind::kRange)))
// Undefined defines __call__ (to fail), so Python calls it callable.
JINJA_PREDICATE(is_callable, "callable",
                v.is_builtin() || v.is_undefined() || (v.is_object() && v.object().callable()))

#undef JINJA_PREDICATE

Result<Value> remainder(const Value& v, const Value& by) {
  return py_binary(BinaryOp::kMod, v, by);
}

Result<bool> is_odd(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_arg(args, "odd").status());
  JINJA_ASSIGN_OR_RETURN(Value r, remainder(v, Value::integer(2)));
  return py_equal(r, Value::integer(1));
}

Result<bool> is_even(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_arg(args, "even").status());
  JINJA_ASSIGN_OR_RETURN(Value r, remainder(v, Value::integer(2)));
  return py_equal(r, Value::integer(0));
}

Result<bool> is_divisibleby(Evaluator&, const Value& v, Args& args) {
  Value num;
  JINJA_RETURN_IF_ERROR(bind_args(args, "divisibleby", {"num"}, 1, &num));
  JINJA_ASSIGN_OR_RETURN(Value r, remainder(v, num));
  return py_equal(r, Value::integer(0));
}

Result<bool> string_case(const Value& v, bool want_lower) {
  JINJA_ASSIGN_OR_RETURN(Value s, to_str_value(v));
  bool cased = false;
  const std::string_view text = s.str();
  for (size_t i = 0; i < text.size();) {
    const char32_t c = decode_at(text, &i);
    if (want_lower ? (py_isupper_char(c) || py_istitle_char(c))
                   : (py_islower_char(c) || py_istitle_char(c))) {
      return false;
    }
    if (want_lower ? py_islower_char(c) : py_isupper_char(c)) cased = true;
  }
  return cased;
}

Result<bool> is_lower(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_arg(args, "lower").status());
  return string_case(v, true);
}

Result<bool> is_upper(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_arg(args, "upper").status());
  return string_case(v, false);
}

Result<bool> is_in(Evaluator&, const Value& v, Args& args) {
  Value seq;
  JINJA_RETURN_IF_ERROR(bind_args(args, "in", {"seq"}, 1, &seq));
  return py_contains(seq, v);
}

// Python's `is`: singletons, small ints (CPython caches -5..256), the same string or object.
Result<bool> is_sameas(Evaluator&, const Value& v, Args& args) {
  Value other;
  JINJA_RETURN_IF_ERROR(bind_args(args, "sameas", {"other"}, 1, &other));
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return v.as_bool() == other.as_bool();
    case Kind::kInt:
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Kind::kString:
      return v.str().data() == other.str().data() && v.str().size() == other.str().size();
    case Kind::kBuiltin:
      return v.builtin_id() == other.builtin_id();
    case Kind::kList:
    case Kind::kDict:
    case Kind::kObject:
      return v.identity() == other.identity();
    default:
      return false;
  }
}

template <CompareOp op>
Result<bool> compare_test(Evaluator&, const Value& v, Args& args) {
  Value other;
  JINJA_RETURN_IF_ERROR(bind_args(args, "compare", {"b"}, 1, &other));
  return py_compare(v, other, op);
}

Result<bool> is_filter(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_arg(args, "filter").status());
  return v.is_string() && find_filter(v.str()) != nullptr;
}

Result<bool> is_test(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(no_arg(args, "test").status());
  return v.is_string() && find_test(v.str()) != nullptr;
}

struct NamedTest {
  std::string_view name;
  TestFn fn;
};

constexpr NamedTest kTests[] = {
    {"odd", is_odd},
    {"even", is_even},
    {"divisibleby", is_divisibleby},
    {"defined", is_defined},
    {"undefined", is_undefined},
    {"filter", is_filter},
    {"test", is_test},
    {"none", is_none},
    {"boolean", is_boolean},
    {"false", is_false},
    {"true", is_true},
    {"integer", is_integer},
    {"float", is_float},
    {"lower", is_lower},
    {"upper", is_upper},
    {"string", is_string},
    {"mapping", is_mapping},
    {"number", is_number},
    {"sequence", is_sequence},
    {"iterable", is_iterable},
    {"callable", is_callable},
    {"sameas", is_sameas},
    {"escaped", is_escaped},
    {"in", is_in},
    {"==", compare_test<CompareOp::kEq>},
    {"eq", compare_test<CompareOp::kEq>},
    {"equalto", compare_test<CompareOp::kEq>},
    {"!=", compare_test<CompareOp::kNe>},
    {"ne", compare_test<CompareOp::kNe>},
    {">", compare_test<CompareOp::kGt>},
    {"gt", compare_test<CompareOp::kGt>},
    {"greaterthan", compare_test<CompareOp::kGt>},
    {"ge", compare_test<CompareOp::kGe>},
    {">=", compare_test<CompareOp::kGe>},
    {"<", compare_test<CompareOp::kLt>},
    {"lt", compare_test<CompareOp::kLt>},
    {"lessthan", compare_test<CompareOp::kLt>},
    {"<=", compare_test<CompareOp::kLe>},
    {"le", compare_test<CompareOp::kLe>},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const NamedTest& t : kTests) {
    if (t.name == name) return t.fn;
  }
  return nullptr;
}

}  // namespace kvgate::jinja
