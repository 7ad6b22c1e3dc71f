// Expressions, and the sandbox's rules for attributes, items, slices, calls and iteration.
#include "jinja/evaluator.h"
#include "jinja/globals.h"
#include "jinja/methods.h"
#include "jinja/py_str.h"
#include "jinja/restore.h"
#include "jinja/status_macros.h"
#include "jinja/unicode.h"

namespace kvgate::jinja {
namespace {

// Python's PySlice_AdjustIndices: the first index, the step and how many items a slice takes.
struct SliceIndices {
  int64_t start = 0, stop = 0, step = 1, count = 0;
};

SliceIndices adjust_slice(int64_t length, const Value& start_v, const Value& stop_v, int64_t step) {
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) {
      i += length;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= length) {
      i = step < 0 ? length - 1 : length;
    }
    return i;
  };
  SliceIndices r;
  r.step = step;
  r.start = clamp(start_v, step < 0 ? length - 1 : 0);
  const int64_t stop = clamp(stop_v, step < 0 ? -1 : length);
  r.stop = stop;
  if (step < 0) {
    r.count = stop < r.start ? (r.start - stop - 1) / (-step) + 1 : 0;
  } else {
    r.count = r.start < stop ? (stop - r.start - 1) / step + 1 : 0;
  }
  return r;
}

bool subscriptable_sequence(const Value& v) {
  return v.is_list() &&
         (v.seq() == SeqKind::kList || v.seq() == SeqKind::kTuple || v.seq() == SeqKind::kRange);
}

// What jinja2's compiler can write back as a Python literal (its has_safe_repr).
bool literal_repr(const Value& v) {
  switch (v.kind()) {
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kString:
      return true;
    case Kind::kList:
      if (v.seq() == SeqKind::kRange) return true;
      if (v.seq() != SeqKind::kList && v.seq() != SeqKind::kTuple) return false;
      for (const Value& item : v.list().items) {
        if (!literal_repr(item)) return false;
      }
      return true;
    case Kind::kDict:
      for (const auto& [key, value] : v.dict().items) {
        if (!literal_repr(key) || !literal_repr(value)) return false;
      }
      return true;
    default:
      return false;
  }
}

Value missing_item(const Value& obj, const Value& key) {
  if (key.is_string()) return Value::undefined(Hint::kAttribute, key.str(), type_name(obj), &key);
  std::string shown;
  if (!append_repr(key, &shown).ok()) shown = "?";
  const Value text = Value::string(std::move(shown));
  return Value::undefined(Hint::kItem, text.str(), type_name(obj), &text);
}

}  // namespace

Result<Value> Evaluator::eval(const Expr& e) {
  Result<Value> r = eval_inner(e);
  if (!r.ok() && error_line_ == 0) error_line_ = e.line;
  return r;
}

Result<Value> Evaluator::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return static_cast<const LiteralExpr&>(e).value;
    case ExprKind::kName:
      return lookup(static_cast<const NameExpr&>(e).id);
    case ExprKind::kList:
    case ExprKind::kTuple:
      return eval_items(static_cast<const ItemsExpr&>(e));
    case ExprKind::kDict:
      return eval_dict(static_cast<const DictExpr&>(e));
    case ExprKind::kNot: {
      JINJA_ASSIGN_OR_RETURN(Value v, eval(*static_cast<const UnaryExpr&>(e).operand));
      return Value::boolean(!py_truthy(v));
    }
    case ExprKind::kNegate: {
      JINJA_ASSIGN_OR_RETURN(Value v, eval(*static_cast<const UnaryExpr&>(e).operand));
      return py_negate(v);
    }
    case ExprKind::kPositive: {
      JINJA_ASSIGN_OR_RETURN(Value v, eval(*static_cast<const UnaryExpr&>(e).operand));
      return py_positive(v);
    }
    case ExprKind::kBinary: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      JINJA_ASSIGN_OR_RETURN(Value left, eval(*b.left));
      JINJA_ASSIGN_OR_RETURN(Value right, eval(*b.right));
      return py_binary(b.op, std::move(left), right);
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      const auto& items = static_cast<const ItemsExpr&>(e).items;
      JINJA_ASSIGN_OR_RETURN(Value left, eval(*items[0]));
      if (py_truthy(left) == (e.kind == ExprKind::kOr)) return left;
      return eval(*items[1]);
    }
    case ExprKind::kConcat:
      return eval_concat(static_cast<const ItemsExpr&>(e));
    case ExprKind::kCompare:
      return eval_compare(static_cast<const CompareExpr&>(e));
    case ExprKind::kCondition: {
      const auto& c = static_cast<const ConditionExpr&>(e);
      JINJA_ASSIGN_OR_RETURN(Value test, eval(*c.test));
      if (py_truthy(test)) return eval(*c.then);
      if (c.otherwise) return eval(*c.otherwise);
      return Value::undefined(Hint::kMessage,
                              "the inline if-expression evaluated to false and no else section "
                              "was defined");
    }
    case ExprKind::kAttribute: {
      const auto& a = static_cast<const AttributeExpr&>(e);
      JINJA_ASSIGN_OR_RETURN(Value object, eval(*a.object));
      return getattr(object, a.name);
    }
    case ExprKind::kItem:
      return eval_item(static_cast<const ItemExpr&>(e));
    case ExprKind::kSlice:
      return absl::InvalidArgumentError("a slice outside a subscript");
    case ExprKind::kCall:
      return eval_call(static_cast<const CallExpr&>(e));
    case ExprKind::kFilter:
      return eval_filter(static_cast<const FilterExpr&>(e), nullptr);
    case ExprKind::kFolded: {
      const Expr& inner = *static_cast<const FoldedExpr&>(e).inner;
      if (folding_) return eval(inner);
      {
        Restore<bool> folding(&folding_, true);
        Result<Value> folded = eval(inner);
        if (folded.ok() && literal_repr(*folded)) return folded;
      }
      error_line_ = 0;
      return eval(inner);
    }
    case ExprKind::kTest: {
      const auto& t = static_cast<const TestExpr&>(e);
      JINJA_ASSIGN_OR_RETURN(Value operand, eval(*t.operand));
      Args args;
      JINJA_RETURN_IF_ERROR(eval_args(t.args, &args));
      JINJA_ASSIGN_OR_RETURN(bool passed, t.fn(*this, operand, args));
      return Value::boolean(passed);
    }
  }
  return Value();
}

Result<Value> Evaluator::eval_items(const ItemsExpr& e) {
  auto list = make_ref<ListObj>();
  list->seq = e.kind == ExprKind::kTuple ? SeqKind::kTuple : SeqKind::kList;
  list->items.reserve(e.items.size());
  for (const ExprPtr& item : e.items) {
    JINJA_ASSIGN_OR_RETURN(Value v, eval(*item));
    list->items.push_back(std::move(v));
  }
  return Value::list(std::move(list));
}

Result<Value> Evaluator::eval_dict(const DictExpr& e) {
  auto dict = make_ref<DictObj>();
  for (const auto& [key_expr, value_expr] : e.items) {
    JINJA_ASSIGN_OR_RETURN(Value key, eval(*key_expr));
    JINJA_ASSIGN_OR_RETURN(Value value, eval(*value_expr));
    if (!py_hashable(key)) {
      return absl::InvalidArgumentError("unhashable type: '" + std::string(type_name(key)) + "'");
    }
    if (key.is_undefined()) return undefined_error(key);
    dict->set(std::move(key), std::move(value));
  }
  return Value::dict(std::move(dict));
}

Result<Value> Evaluator::eval_concat(const ItemsExpr& e) {
  std::string s;
  for (const ExprPtr& part : e.items) {
    JINJA_ASSIGN_OR_RETURN(Value v, eval(*part));
    JINJA_RETURN_IF_ERROR(append_str(v, &s));
  }
  return Value::string(std::move(s));
}

Result<Value> Evaluator::eval_compare(const CompareExpr& e) {
  JINJA_ASSIGN_OR_RETURN(Value left, eval(*e.first));
  for (const auto& [op, expr] : e.rest) {
    JINJA_ASSIGN_OR_RETURN(Value right, eval(*expr));
    JINJA_ASSIGN_OR_RETURN(bool holds, py_compare(left, right, op));
    if (!holds) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Result<Value> Evaluator::eval_item(const ItemExpr& e) {
  JINJA_ASSIGN_OR_RETURN(Value object, eval(*e.object));
  if (e.index->kind == ExprKind::kSlice) {
    return eval_slice(object, static_cast<const SliceExpr&>(*e.index));
  }
  JINJA_ASSIGN_OR_RETURN(Value key, eval(*e.index));
  return getitem(object, key);
}

Result<Value> Evaluator::eval_slice(const Value& obj, const SliceExpr& s) {
  Value bounds[3] = {Value::none(), Value::none(), Value::none()};
  const ExprPtr* exprs[3] = {&s.start, &s.stop, &s.step};
  for (int i = 0; i < 3; ++i) {
    if (*exprs[i]) {
      JINJA_ASSIGN_OR_RETURN(bounds[i], eval(**exprs[i]));
    }
  }
  // jinja2 slices with Python's own obj[a:b:c], not through the sandbox's getitem: whatever
  // fails is an error, not undefined (except in what jinja2 folds when compiling, which goes
  // through getitem).
  if (obj.is_undefined()) return undefined_error(obj);
  auto fail = [&](std::string what) -> Result<Value> {
    if (folding_) return Value::undefined(Hint::kItem, "[slice]", type_name(obj));
    return absl::InvalidArgumentError(std::move(what));
  };
  if (!obj.is_string() && !subscriptable_sequence(obj)) {
    return fail("'" + std::string(type_name(obj)) + "' object is not subscriptable");
  }
  for (const Value& b : bounds) {
    if (!b.is_none() && !b.is_integral()) {
      return fail("slice indices must be integers or None or have an __index__ method");
    }
  }
  const int64_t step = bounds[2].is_none() ? 1 : bounds[2].as_int();
  if (step == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  if (obj.is_string()) {
    const std::string_view str = obj.str();
    const bool ascii = is_ascii(str);
    const int64_t length = static_cast<int64_t>(ascii ? str.size() : char_count(str));
    const SliceIndices r = adjust_slice(length, bounds[0], bounds[1], step);
    if (step == 1) {
      const size_t begin =
          ascii ? static_cast<size_t>(r.start) : byte_offset(str, static_cast<size_t>(r.start));
      const size_t end = ascii ? static_cast<size_t>(r.start + r.count)
                               : byte_offset(str, static_cast<size_t>(r.start + r.count));
      return Value::substring(obj, str.substr(begin, end - begin));
    }
    std::vector<std::string_view> chars;
    chars.reserve(static_cast<size_t>(length));
    for (size_t i = 0; i < str.size();) {
      const size_t start = i;
      decode_at(str, &i);
      chars.push_back(str.substr(start, i - start));
    }
    std::string out;
    for (int64_t k = 0, i = r.start; k < r.count; ++k, i += step)
      out += chars[static_cast<size_t>(i)];
    return Value::string(std::move(out));
  }
  const ListObj& list = obj.list();
  const SliceIndices r =
      adjust_slice(static_cast<int64_t>(list.items.size()), bounds[0], bounds[1], step);
  auto out = make_ref<ListObj>();
  out->seq = list.seq;
  out->items.reserve(static_cast<size_t>(r.count));
  for (int64_t k = 0, i = r.start; k < r.count; ++k, i += step) {
    out->items.push_back(list.items[static_cast<size_t>(i)]);
  }
  if (list.seq == SeqKind::kRange) {
    out->range_start = list.range_start + r.start * list.range_step;
    out->range_step = list.range_step * step;
    out->range_stop = list.range_start + r.stop * list.range_step;
  }
  return Value::list(std::move(out));
}

Result<Value> Evaluator::getattr(const Value& obj, std::string_view name, const Value* keep) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (name.substr(0, 2) == "__") return Value::undefined(Hint::kUnsafe, name, type_name(obj), keep);
  switch (obj.kind()) {
    case Kind::kString:
    case Kind::kList:
    case Kind::kDict:
      switch (method_access(obj, name)) {
        case Access::kAllowed:
          return bound_method(obj, name);
        case Access::kBlocked:
          return Value::undefined(Hint::kUnsafe, name, type_name(obj), keep);
        case Access::kMissing:
          break;
      }
      if (obj.is_dict()) {
        if (const Value* v = obj.dict().find(name)) return *v;
      }
      break;
    case Kind::kObject:
      return keep ? Value::keeping_hint(obj.object().getattr(name), *keep)
                  : obj.object().getattr(name);
    default:
      break;
  }
  return Value::undefined(Hint::kAttribute, name, type_name(obj), keep);
}

Result<Value> Evaluator::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_dict()) {
    if (py_hashable(key)) {
      if (const Value* v = obj.dict().find(key)) return *v;
    }
  } else if (key.is_integral() && (obj.is_string() || subscriptable_sequence(obj))) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      const std::string_view s = obj.str();
      const bool ascii = is_ascii(s);
      const int64_t n = static_cast<int64_t>(ascii ? s.size() : char_count(s));
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        const size_t begin =
            ascii ? static_cast<size_t>(i) : byte_offset(s, static_cast<size_t>(i));
        size_t end = begin;
        decode_at(s, &end);
        return Value::substring(obj, s.substr(begin, end - begin));
      }
    } else {
      const auto& items = obj.list().items;
      const auto n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
    }
    return missing_item(obj, key);
  }
  if (key.is_string()) {
    if (obj.is_object()) return Value::keeping_hint(obj.object().getattr(key.str()), key);
    if (obj.is_string() || obj.is_list() || obj.is_dict()) {
      switch (method_access(obj, key.str())) {
        case Access::kAllowed:
          return bound_method(obj, key.str());
        case Access::kBlocked:
          return Value::undefined(Hint::kUnsafe, key.str(), type_name(obj), &key);
        case Access::kMissing:
          break;
      }
    }
  }
  return missing_item(obj, key);
}

Status Evaluator::eval_args(const CallArgs& in, Args* out) {
  for (const ExprPtr& e : in.positional) {
    JINJA_ASSIGN_OR_RETURN(Value v, eval(*e));
    out->positional.push_back(std::move(v));
  }
  for (const auto& [name, e] : in.keywords) {
    JINJA_ASSIGN_OR_RETURN(Value v, eval(*e));
    out->keywords.emplace_back(name, std::move(v));
  }
  return absl::OkStatus();
}

Result<Value> Evaluator::eval_call(const CallExpr& e) {
  // obj.method(...) on a str, list or dict calls the method without making a bound method.
  if (e.callee->kind == ExprKind::kAttribute) {
    const auto& a = static_cast<const AttributeExpr&>(*e.callee);
    JINJA_ASSIGN_OR_RETURN(Value object, eval(*a.object));
    if ((object.is_string() || object.is_list() || object.is_dict()) &&
        a.name.substr(0, 2) != "__" && method_access(object, a.name) == Access::kAllowed) {
      Args args;
      JINJA_RETURN_IF_ERROR(eval_args(e.args, &args));
      return call_method(*this, object, a.name, args);
    }
    JINJA_ASSIGN_OR_RETURN(Value callee, getattr(object, a.name));
    Args args;
    JINJA_RETURN_IF_ERROR(eval_args(e.args, &args));
    return call(callee, args);
  }
  JINJA_ASSIGN_OR_RETURN(Value callee, eval(*e.callee));
  Args args;
  JINJA_RETURN_IF_ERROR(eval_args(e.args, &args));
  return call(callee, args);
}

Result<Value> Evaluator::call(const Value& callee, Args& args) {
  switch (callee.kind()) {
    case Kind::kUndefined:
      return undefined_error(callee);
    case Kind::kBuiltin:
      return call_global(*this, callee.builtin_id(), args);
    case Kind::kObject:
      if (callee.object().callable()) return callee.object().call(*this, args);
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError("'" + std::string(type_name(callee)) +
                                    "' object is not callable");
}

Result<Value> Evaluator::eval_filter(const FilterExpr& e, const Value* operand) {
  Value subject;
  if (operand != nullptr) {
    subject = *operand;
  } else {
    JINJA_ASSIGN_OR_RETURN(subject, eval(*e.operand));
  }
  Args args;
  JINJA_RETURN_IF_ERROR(eval_args(e.args, &args));
  return e.fn(*this, subject, args);
}

Result<std::vector<Value>> Evaluator::iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Kind::kUndefined:
      return out;
    case Kind::kString: {
      const std::string_view s = v.str();
      for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        decode_at(s, &i);
        out.push_back(Value::substring(v, s.substr(start, i - start)));
      }
      return out;
    }
    case Kind::kList: {
      ListObj& list = v.list();
      if (list.seq == SeqKind::kGenerator || list.seq == SeqKind::kIterator) {
        out.assign(list.items.begin() + static_cast<std::ptrdiff_t>(list.consumed),
                   list.items.end());
        list.consumed = list.items.size();
        return out;
      }
      return list.items;
    }
    case Kind::kDict:
      out.reserve(v.dict().items.size());
      for (const auto& item : v.dict().items) out.push_back(item.first);
      return out;
    default:
      return absl::InvalidArgumentError("'" + std::string(type_name(v)) +
                                        "' object is not iterable");
  }
}

}  // namespace kvgate::jinja
