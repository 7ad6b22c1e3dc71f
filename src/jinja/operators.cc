#include "jinja/operators.h"

#include <cmath>
#include <limits>

#include "jinja/percent_format.h"
#include "jinja/py_str.h"

namespace kvgate::jinja {
namespace {

std::string quoted_type(const Value& v) { return "'" + std::string(type_name(v)) + "'"; }

Status unsupported(std::string_view op, const Value& a, const Value& b) {
  return type_error("unsupported operand type(s) for " + std::string(op) + ": " + quoted_type(a) +
                    " and " + quoted_type(b));
}

Status overflow() {
  return absl::InvalidArgumentError(
      "integer overflow (Python's integers are unbounded; kvgate's "
      "are 64-bit)");
}

// The sequences == compares item by item (generators and dict_values compare by identity).
bool compares_by_items(SeqKind k) {
  return k == SeqKind::kList || k == SeqKind::kTuple || k == SeqKind::kRange ||
         k == SeqKind::kDictKeys || k == SeqKind::kDictItems;
}

bool same_items_any_order(const ListObj& a, const ListObj& b) {
  if (a.items.size() != b.items.size()) return false;
  for (const Value& x : a.items) {
    bool found = false;
    for (const Value& y : b.items) {
      if (py_equal(x, y)) {
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_float() || b.is_float()) {
    if (a.is_float() && b.is_float()) return a.as_double() == b.as_double();
    const double f = a.is_float() ? a.as_double() : b.as_double();
    const int64_t i = a.is_float() ? b.as_int() : a.as_int();
    // Exact, as Python compares int with float.
    if (!std::isfinite(f) || f != std::floor(f)) return false;
    if (f < -9.2233720368547758e18 || f >= 9.2233720368547758e18) return false;
    return static_cast<int64_t>(f) == i;
  }
  return a.as_int() == b.as_int();
}

template <class T>
bool ordered(const T& a, const T& b, CompareOp op) {
  switch (op) {
    case CompareOp::kLt:
      return a < b;
    case CompareOp::kLe:
      return a <= b;
    case CompareOp::kGt:
      return a > b;
    case CompareOp::kGe:
      return a >= b;
    default:
      return false;
  }
}

std::string_view op_symbol(CompareOp op) {
  switch (op) {
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
    case CompareOp::kGt:
      return ">";
    case CompareOp::kGe:
      return ">=";
    default:
      return "==";
  }
}

Result<Value> repeat(const Value& seq, int64_t times) {
  const bool empty = seq.is_string() ? seq.str().empty() : seq.list().items.empty();
  if (times < 0 || empty) times = 0;
  if (seq.is_string()) {
    const std::string_view s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(times) > (uint64_t{1} << 28) / s.size()) {
      return absl::InvalidArgumentError("string repetition too large");
    }
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out), seq.markup());
  }
  const ListObj& list = seq.list();
  if (!list.items.empty() &&
      static_cast<uint64_t>(times) > (uint64_t{1} << 24) / list.items.size()) {
    return absl::InvalidArgumentError("list repetition too large");
  }
  auto out = make_ref<ListObj>();
  out->seq = list.seq;
  for (int64_t i = 0; i < times; ++i) {
    out->items.insert(out->items.end(), list.items.begin(), list.items.end());
  }
  return Value::list(std::move(out));
}

bool repeatable(const Value& v) {
  return v.is_string() ||
         (v.is_list() && (v.seq() == SeqKind::kList || v.seq() == SeqKind::kTuple));
}

// Markup + str escapes the plain side (markupsafe's __add__ / __radd__).
Value as_markup_operand(const Value& v) {
  if (v.markup()) return v;
  std::string escaped;
  append_html_escaped(v.str(), &escaped);
  return Value::string(std::move(escaped), true);
}

Result<Value> add(Value a, const Value& b) {
  if (a.is_string() && b.is_string()) {
    if (a.markup() || b.markup()) {
      const Value l = as_markup_operand(a), r = as_markup_operand(b);
      std::string s(l.str());
      s += r.str();
      return Value::string(std::move(s), true);
    }
    if (a.str().empty()) return b;
    if (a.append_in_place(b.str())) return a;
    std::string s;
    s.reserve(a.str().size() + b.str().size());
    s += a.str();
    s += b.str();
    return Value::string(std::move(s));
  }
  if (a.is_list() && b.is_list() && a.seq() == b.seq() &&
      (a.seq() == SeqKind::kList || a.seq() == SeqKind::kTuple)) {
    auto out = make_ref<ListObj>(a.list().items, a.seq());
    out->items.insert(out->items.end(), b.list().items.begin(), b.list().items.end());
    return Value::list(std::move(out));
  }
  if (a.is_string() && !b.is_undefined()) {
    return type_error("can only concatenate str (not \"" + std::string(type_name(b)) +
                      "\") to str");
  }
  if (a.is_list() && a.seq() == SeqKind::kList && !b.is_undefined()) {
    return type_error("can only concatenate list (not \"" + std::string(type_name(b)) +
                      "\") to list");
  }
  return unsupported("+", a, b);
}

Result<Value> int_arith(BinaryOp op, int64_t x, int64_t y) {
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      if (__builtin_add_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::kSub:
      if (__builtin_sub_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::kMul:
      if (__builtin_mul_overflow(x, y, &r)) return overflow();
      return Value::integer(r);
    case BinaryOp::kDiv:
      if (y == 0) return absl::InvalidArgumentError("division by zero");
      return Value::number(static_cast<double>(x) / static_cast<double>(y));
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return overflow();
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == BinaryOp::kFloorDiv ? q : m);
    }
    case BinaryOp::kPow: {
      if (y < 0) {
        if (x == 0) {
          return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
        }
        return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      int64_t result = 1, base = x;
      for (int64_t e = y; e > 0; e >>= 1) {
        if (e & 1) {
          if (__builtin_mul_overflow(result, base, &result)) return overflow();
        }
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow();
      }
      return Value::integer(result);
    }
  }
  return overflow();
}

Result<Value> float_arith(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::kAdd:
      return Value::number(x + y);
    case BinaryOp::kSub:
      return Value::number(x - y);
    case BinaryOp::kMul:
      return Value::number(x * y);
    case BinaryOp::kDiv:
      if (y == 0) return absl::InvalidArgumentError("float division by zero");
      return Value::number(x / y);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) {
        return absl::InvalidArgumentError(op == BinaryOp::kMod ? "float modulo"
                                                               : "float floor division by zero");
      }
      // CPython's float_divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return Value::number(op == BinaryOp::kMod ? mod : floordiv);
    }
    case BinaryOp::kPow: {
      if (x == 0 && y < 0) {
        return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
      }
      if (x < 0 && y != std::floor(y) && std::isfinite(y)) {
        return absl::InvalidArgumentError(
            "a negative number to a fractional power is complex in Python (not supported)");
      }
      const double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
        return absl::InvalidArgumentError("(34, 'Numerical result out of range')");
      }
      return Value::number(r);
    }
  }
  return Value::number(0);
}

constexpr std::string_view kOpSymbols[] = {"+", "-", "*", "/", "//", "%", "** or pow()"};

}  // namespace

bool py_truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return v.as_bool();
    case Kind::kInt:
      return v.as_int() != 0;
    case Kind::kFloat:
      return v.as_double() != 0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kList:
      if (v.seq() == SeqKind::kGenerator || v.seq() == SeqKind::kIterator) return true;
      return !v.list().items.empty();
    case Kind::kDict:
      return !v.dict().items.empty();
    case Kind::kObject:
    case Kind::kBuiltin:
      return true;
  }
  return false;
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      const ListObj &x = a.list(), &y = b.list();
      if (&x == &y) return true;
      if (x.seq != y.seq || !compares_by_items(x.seq)) return false;
      if (x.seq == SeqKind::kDictKeys || x.seq == SeqKind::kDictItems) {
        return same_items_any_order(x, y);
      }
      if (x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!py_equal(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const DictObj &x = a.dict(), &y = b.dict();
      if (&x == &y) return true;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [key, value] : x.items) {
        const Value* other = y.find(key);
        if (other == nullptr || !py_equal(value, *other)) return false;
      }
      return true;
    }
    case Kind::kObject:
      return a.identity() == b.identity();
    case Kind::kBuiltin:
      return a.builtin_id() == b.builtin_id();
    default:
      return false;
  }
}

Status undefined_error(const Value& v) {
  const std::string what(v.hint_what());
  switch (v.hint()) {
    case Hint::kName:
      return absl::InvalidArgumentError("'" + what + "' is undefined");
    case Hint::kAttribute:
      return absl::InvalidArgumentError("'" + std::string(v.hint_type()) +
                                        " object' has no attribute '" + what + "'");
    case Hint::kItem:
      return absl::InvalidArgumentError("'" + std::string(v.hint_type()) +
                                        " object' has no element " + what);
    case Hint::kUnsafe:
      return absl::InvalidArgumentError("access to attribute '" + what + "' of '" +
                                        std::string(v.hint_type()) +
                                        "' object is unsafe (the sandbox blocks it)");
    case Hint::kMessage:
      return absl::InvalidArgumentError(what);
    case Hint::kPlain:
      break;
  }
  return absl::InvalidArgumentError("undefined value");
}

Result<bool> py_compare(const Value& a, const Value& b, CompareOp op) {
  switch (op) {
    case CompareOp::kEq:
      return py_equal(a, b);
    case CompareOp::kNe:
      return !py_equal(a, b);
    case CompareOp::kIn:
      return py_contains(b, a);
    case CompareOp::kNotIn: {
      auto r = py_contains(b, a);
      if (!r.ok()) return r.status();
      return !*r;
    }
    default:
      break;
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return ordered(a.as_double(), b.as_double(), op);
    return ordered(a.as_int(), b.as_int(), op);
  }
  if (a.is_string() && b.is_string()) return ordered(a.str(), b.str(), op);
  if (a.is_list() && b.is_list() && a.seq() == b.seq() &&
      (a.seq() == SeqKind::kList || a.seq() == SeqKind::kTuple)) {
    const auto &x = a.list().items, &y = b.list().items;
    size_t i = 0;
    while (i < x.size() && i < y.size() && py_equal(x[i], y[i])) ++i;
    if (i < x.size() && i < y.size()) return py_compare(x[i], y[i], op);
    return ordered(x.size(), y.size(), op);
  }
  return type_error("'" + std::string(op_symbol(op)) + "' not supported between instances of " +
                    quoted_type(a) + " and " + quoted_type(b));
}

bool py_hashable(const Value& v) {
  if (v.is_dict()) return false;
  if (v.is_list()) {
    if (v.seq() != SeqKind::kTuple) return v.seq() == SeqKind::kRange;
    for (const Value& item : v.list().items) {
      if (!py_hashable(item)) return false;
    }
  }
  return true;
}

Result<bool> py_contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kString:
      if (item.is_undefined()) return undefined_error(item);
      if (!item.is_string()) {
        return type_error("'in <string>' requires string as left operand, not " +
                          std::string(type_name(item)));
      }
      return container.str().find(item.str()) != std::string_view::npos;
    case Kind::kList:
      for (const Value& x : container.list().items) {
        if (py_equal(x, item)) return true;
      }
      return false;
    case Kind::kDict:
      if (!py_hashable(item)) return type_error("unhashable type: " + quoted_type(item));
      return container.dict().find(item) != nullptr;
    case Kind::kUndefined:
      return false;
    default:
      return type_error("argument of type " + quoted_type(container) + " is not iterable");
  }
}

Result<Value> py_binary(BinaryOp op, Value a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  // str % x formats any x, an undefined one too (as "").
  if (op == BinaryOp::kMod && a.is_string()) return percent_format(a, b);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return float_arith(op, a.as_double(), b.as_double());
    return int_arith(op, a.as_int(), b.as_int());
  }
  switch (op) {
    case BinaryOp::kAdd:
      return add(std::move(a), b);
    case BinaryOp::kMul:
      if (repeatable(a) && b.is_integral()) return repeat(a, b.as_int());
      if (a.is_integral() && repeatable(b)) return repeat(b, a.as_int());
      if (a.is_string() || b.is_string()) {
        return type_error("can't multiply sequence by non-int of type " +
                          quoted_type(a.is_string() ? b : a));
      }
      break;
    case BinaryOp::kMod:
      if (a.is_string()) return percent_format(a, b);
      break;
    default:
      break;
  }
  return unsupported(kOpSymbols[static_cast<int>(op)], a, b);
}

Result<Value> py_negate(const Value& v) {
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_float()) return Value::number(-v.as_double());
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) return overflow();
    return Value::integer(-v.as_int());
  }
  return type_error("bad operand type for unary -: " + quoted_type(v));
}

Result<Value> py_positive(const Value& v) {
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_float()) return v;
  if (v.is_integral()) return Value::integer(v.as_int());
  return type_error("bad operand type for unary +: " + quoted_type(v));
}

}  // namespace kvgate::jinja
