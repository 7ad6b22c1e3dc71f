// Sequence and mapping filters: length, first, last, default, list, items, join, map, select,
// reject, selectattr, rejectattr, unique, sort, reverse, dictsort, min, max, sum, attr. Where
// jinja2 returns a generator (map, select, unique, items, reverse) so does this: single-use,
// always true, without len().
#include <algorithm>
#include <optional>

#include "jinja/filter_functions.h"
#include "jinja/filters.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/py_str.h"
#include "jinja/status_macros.h"
#include "jinja/tests.h"
#include "jinja/unicode.h"

namespace kvgate::jinja::filters {
namespace {

Value generator(std::vector<Value> items) {
  return Value::list(make_ref<ListObj>(std::move(items), SeqKind::kGenerator));
}

// jinja2's make_attrgetter: "a.b.0" looks up item a, then b, then index 0.
class AttrGetter {
 public:
  AttrGetter(Value attribute, bool ignore_case, Value fallback = Value::none())
      : ignore_case_(ignore_case), fallback_(std::move(fallback)) {
    if (attribute.is_none()) return;
    if (!attribute.is_string()) {
      parts_.push_back(std::move(attribute));
      return;
    }
    const std::string_view path = attribute.str();
    size_t start = 0;
    while (true) {
      const size_t dot = path.find('.', start);
      const std::string_view part = path.substr(start, dot - start);
      const bool digits =
          !part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos;
      if (digits && part.size() < 18) {
        parts_.push_back(Value::integer(std::stoll(std::string(part))));
      } else {
        parts_.push_back(Value::substring(attribute, part));
      }
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
  }

  Result<Value> operator()(Evaluator& ev, Value item) const {
    for (const Value& part : parts_) {
      JINJA_ASSIGN_OR_RETURN(item, ev.getitem(item, part));
      if (!fallback_.is_none() && item.is_undefined()) item = fallback_;
    }
    if (ignore_case_ && item.is_string()) return Value::string(py_lower(item.str()));
    return item;
  }

 private:
  std::vector<Value> parts_;
  bool ignore_case_;
  Value fallback_;
};

Status unexpected_keyword(std::string_view name) {
  return absl::InvalidArgumentError("Unexpected keyword argument '" + std::string(name) + "'");
}

// Lexicographic `a < b` over sort keys, as Python compares the lists jinja2's sort builds.
Result<bool> keys_less(const std::vector<Value>& a, const std::vector<Value>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (py_equal(a[i], b[i])) continue;
    return py_compare(a[i], b[i], CompareOp::kLt);
  }
  return a.size() < b.size();
}

template <class Key, class Less>
Result<std::vector<size_t>> stable_order(const std::vector<Key>& keys, bool reverse, Less less) {
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status error = absl::OkStatus();
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if (!error.ok()) return false;
    Result<bool> r = reverse ? less(keys[y], keys[x]) : less(keys[x], keys[y]);
    if (!r.ok()) {
      error = r.status();
      return false;
    }
    return *r;
  });
  if (!error.ok()) return error;
  return order;
}

Result<Value> select_or_reject(Evaluator& ev, const Value& v, Args& args, bool select,
                               bool lookup_attr) {
  if (!py_truthy(v)) return generator({});
  size_t off = 0;
  std::optional<AttrGetter> getter;
  if (lookup_attr) {
    if (args.positional.empty()) {
      return absl::InvalidArgumentError("Missing parameter for attribute name");
    }
    getter.emplace(args.positional[0], false);
    off = 1;
  }
  TestFn test = nullptr;
  Args test_args;
  if (args.positional.size() > off) {
    const Value& name = args.positional[off];
    if (name.is_string()) test = find_test(name.str());
    if (test == nullptr) {
      std::string shown;
      (void)append_repr(name, &shown);
      return absl::InvalidArgumentError("No test named " + shown + ".");
    }
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off + 1),
                                args.positional.end());
  }
  test_args.keywords = args.keywords;
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  std::vector<Value> kept;
  for (Value& item : items) {
    Value subject = item;
    if (getter) {
      JINJA_ASSIGN_OR_RETURN(subject, (*getter)(ev, item));
    }
    bool passed;
    if (test != nullptr) {
      Args call_args = test_args;
      JINJA_ASSIGN_OR_RETURN(passed, test(ev, subject, call_args));
    } else {
      passed = py_truthy(subject);
    }
    if (passed == select) kept.push_back(std::move(item));
  }
  return generator(std::move(kept));
}

Result<Value> min_or_max(Evaluator& ev, const Value& v, Args& args, bool want_max) {
  Value p[2] = {Value::boolean(false), Value::none()};
  JINJA_RETURN_IF_ERROR(
      bind_args(args, want_max ? "max" : "min", {"case_sensitive", "attribute"}, 0, p));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  if (items.empty()) {
    return Value::undefined(Hint::kMessage, "No aggregated item, sequence was empty.");
  }
  const AttrGetter key(p[1], !py_truthy(p[0]));
  size_t best = 0;
  JINJA_ASSIGN_OR_RETURN(Value best_key, key(ev, items[0]));
  for (size_t i = 1; i < items.size(); ++i) {
    JINJA_ASSIGN_OR_RETURN(Value k, key(ev, items[i]));
    JINJA_ASSIGN_OR_RETURN(bool better,
                           py_compare(k, best_key, want_max ? CompareOp::kGt : CompareOp::kLt));
    if (better) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

}  // namespace

Result<Value> length(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(bind_args(args, "length", {}, 0, nullptr));
  switch (v.kind()) {
    case Kind::kUndefined:
      return Value::integer(0);
    case Kind::kString:
      return Value::integer(static_cast<int64_t>(char_count(v.str())));
    case Kind::kList:
      if (v.seq() == SeqKind::kGenerator || v.seq() == SeqKind::kIterator) break;
      return Value::integer(static_cast<int64_t>(v.list().items.size()));
    case Kind::kDict:
      return Value::integer(static_cast<int64_t>(v.dict().items.size()));
    case Kind::kObject:
      if (v.object().type_name() == "LoopContext") return v.object().getattr("length");
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError("object of type '" + std::string(type_name(v)) +
                                    "' has no len()");
}

Result<Value> first(Evaluator& ev, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(bind_args(args, "first", {}, 0, nullptr));
  if (v.is_list()) {
    ListObj& list = v.list();
    const bool single_use = list.seq == SeqKind::kGenerator || list.seq == SeqKind::kIterator;
    const size_t at = single_use ? list.consumed : 0;
    if (at < list.items.size()) {
      if (single_use) ++list.consumed;
      return list.items[at];
    }
  } else if (v.is_dict()) {
    if (!v.dict().items.empty()) return v.dict().items.front().first;
  } else {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
    if (!items.empty()) return items.front();
  }
  return Value::undefined(Hint::kMessage, "No first item, sequence was empty.");
}

Result<Value> last(Evaluator& ev, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(bind_args(args, "last", {}, 0, nullptr));
  const bool reversible =
      v.is_undefined() || v.is_string() || v.is_dict() ||
      (v.is_list() && v.seq() != SeqKind::kGenerator && v.seq() != SeqKind::kIterator);
  if (!reversible) {
    return absl::InvalidArgumentError("'" + std::string(type_name(v)) +
                                      "' object is not reversible");
  }
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  if (items.empty()) return Value::undefined(Hint::kMessage, "No last item, sequence was empty.");
  return items.back();
}

Result<Value> default_value(Evaluator&, const Value& v, Args& args) {
  Value p[2] = {Value::borrowed(""), Value::boolean(false)};
  JINJA_RETURN_IF_ERROR(bind_args(args, "default", {"default_value", "boolean"}, 0, p));
  if (v.is_undefined() || (py_truthy(p[1]) && !py_truthy(v))) return p[0];
  return v;
}

Result<Value> list(Evaluator& ev, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(bind_args(args, "list", {}, 0, nullptr));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  return Value::list(make_ref<ListObj>(std::move(items), SeqKind::kList));
}

Result<Value> items(Evaluator&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(bind_args(args, "items", {}, 0, nullptr));
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) return absl::InvalidArgumentError("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  pairs.reserve(v.dict().items.size());
  for (const auto& [key, value] : v.dict().items) {
    pairs.push_back(
        Value::list(make_ref<ListObj>(std::vector<Value>{key, value}, SeqKind::kTuple)));
  }
  return generator(std::move(pairs));
}

Result<Value> join(Evaluator& ev, const Value& v, Args& args) {
  Value p[2] = {Value::borrowed(""), Value::none()};
  JINJA_RETURN_IF_ERROR(bind_args(args, "join", {"d", "attribute"}, 0, p));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  JINJA_ASSIGN_OR_RETURN(Value separator, to_str_value(p[0]));
  std::optional<AttrGetter> getter;
  if (!p[1].is_none()) getter.emplace(p[1], false);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator.str();
    if (getter) {
      JINJA_ASSIGN_OR_RETURN(Value item, (*getter)(ev, items[i]));
      JINJA_RETURN_IF_ERROR(append_str(item, &out));
    } else {
      JINJA_RETURN_IF_ERROR(append_str(items[i], &out));
    }
  }
  return Value::string(std::move(out));
}

Result<Value> map(Evaluator& ev, const Value& v, Args& args) {
  if (!py_truthy(v)) return generator({});
  std::vector<Value> out;
  const bool by_attribute = args.positional.empty() &&
                            std::any_of(args.keywords.begin(), args.keywords.end(),
                                        [](const auto& kw) { return kw.first == "attribute"; });
  if (by_attribute) {
    Value attribute, fallback = Value::none();
    for (const auto& [name, value] : args.keywords) {
      if (name == "attribute") {
        attribute = value;
      } else if (name == "default") {
        fallback = value;
      } else {
        return unexpected_keyword(name);
      }
    }
    const AttrGetter getter(attribute, false, fallback);
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
    for (Value& item : items) {
      JINJA_ASSIGN_OR_RETURN(Value mapped, getter(ev, std::move(item)));
      out.push_back(std::move(mapped));
    }
    return generator(std::move(out));
  }
  if (args.positional.empty()) return absl::InvalidArgumentError("map requires a filter argument");
  const Value& name = args.positional[0];
  const FilterFn filter = name.is_string() ? find_filter(name.str()) : nullptr;
  if (filter == nullptr) {
    std::string shown;
    (void)append_repr(name, &shown);
    return absl::InvalidArgumentError("No filter named " + shown + ".");
  }
  Args rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keywords = args.keywords;
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  for (const Value& item : items) {
    Args call_args = rest;
    JINJA_ASSIGN_OR_RETURN(Value mapped, filter(ev, item, call_args));
    out.push_back(std::move(mapped));
  }
  return generator(std::move(out));
}

Result<Value> select(Evaluator& ev, const Value& v, Args& args) {
  return select_or_reject(ev, v, args, true, false);
}
Result<Value> reject(Evaluator& ev, const Value& v, Args& args) {
  return select_or_reject(ev, v, args, false, false);
}
Result<Value> selectattr(Evaluator& ev, const Value& v, Args& args) {
  return select_or_reject(ev, v, args, true, true);
}
Result<Value> rejectattr(Evaluator& ev, const Value& v, Args& args) {
  return select_or_reject(ev, v, args, false, true);
}

Result<Value> unique(Evaluator& ev, const Value& v, Args& args) {
  Value p[2] = {Value::boolean(false), Value::none()};
  JINJA_RETURN_IF_ERROR(bind_args(args, "unique", {"case_sensitive", "attribute"}, 0, p));
  const AttrGetter key(p[1], !py_truthy(p[0]));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  std::vector<Value> seen, kept;
  for (Value& item : items) {
    JINJA_ASSIGN_OR_RETURN(Value k, key(ev, item));
    if (!py_hashable(k)) {
      return absl::InvalidArgumentError("unhashable type: '" + std::string(type_name(k)) + "'");
    }
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, k); })) {
      continue;
    }
    seen.push_back(std::move(k));
    kept.push_back(std::move(item));
  }
  return generator(std::move(kept));
}

Result<Value> sort(Evaluator& ev, const Value& v, Args& args) {
  Value p[3] = {Value::boolean(false), Value::boolean(false), Value::none()};
  JINJA_RETURN_IF_ERROR(bind_args(args, "sort", {"reverse", "case_sensitive", "attribute"}, 0, p));
  const bool ignore_case = !py_truthy(p[1]);
  std::vector<AttrGetter> getters;
  if (p[2].is_string()) {
    const std::string_view all = p[2].str();
    size_t start = 0;
    while (true) {
      const size_t comma = all.find(',', start);
      getters.emplace_back(Value::substring(p[2], all.substr(start, comma - start)), ignore_case);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  } else {
    getters.emplace_back(p[2], ignore_case);
  }
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  std::vector<std::vector<Value>> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    std::vector<Value> key;
    for (const AttrGetter& g : getters) {
      JINJA_ASSIGN_OR_RETURN(Value k, g(ev, item));
      key.push_back(std::move(k));
    }
    keys.push_back(std::move(key));
  }
  JINJA_ASSIGN_OR_RETURN(std::vector<size_t> order, stable_order(keys, py_truthy(p[0]), keys_less));
  auto out = make_ref<ListObj>();
  out->items.reserve(items.size());
  for (size_t i : order) out->items.push_back(items[i]);
  return Value::list(std::move(out));
}

Result<Value> reverse(Evaluator& ev, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(bind_args(args, "reverse", {}, 0, nullptr));
  if (v.is_string()) {
    const std::string_view s = v.str();
    std::string out;
    out.reserve(s.size());
    for (size_t end = s.size(); end > 0;) {
      size_t start = end - 1;
      while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      out.append(s.substr(start, end - start));
      end = start;
    }
    return Value::string(std::move(out), v.markup());
  }
  const bool single_use =
      v.is_list() && (v.seq() == SeqKind::kGenerator || v.seq() == SeqKind::kIterator);
  if (!v.is_list() && !v.is_dict() && !v.is_undefined()) {
    return absl::InvalidArgumentError("argument must be iterable");
  }
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  std::reverse(items.begin(), items.end());
  // reversed() where Python can, else a reversed list.
  return Value::list(
      make_ref<ListObj>(std::move(items), single_use ? SeqKind::kList : SeqKind::kIterator));
}

Result<Value> dictsort(Evaluator&, const Value& v, Args& args) {
  Value p[3] = {Value::boolean(false), Value::borrowed("key"), Value::boolean(false)};
  JINJA_RETURN_IF_ERROR(bind_args(args, "dictsort", {"case_sensitive", "by", "reverse"}, 0, p));
  size_t pos;
  if (p[1].is_string() && p[1].str() == "key") {
    pos = 0;
  } else if (p[1].is_string() && p[1].str() == "value") {
    pos = 1;
  } else {
    return absl::InvalidArgumentError("You can only sort by either \"key\" or \"value\"");
  }
  if (!v.is_dict()) {
    return absl::InvalidArgumentError("'" + std::string(type_name(v)) +
                                      "' object has no attribute 'items'");
  }
  const bool ignore_case = !py_truthy(p[0]);
  std::vector<Value> keys;
  for (const auto& item : v.dict().items) {
    const Value& k = pos == 0 ? item.first : item.second;
    keys.push_back(ignore_case && k.is_string() ? Value::string(py_lower(k.str())) : k);
  }
  JINJA_ASSIGN_OR_RETURN(std::vector<size_t> order,
                         stable_order(keys, py_truthy(p[2]), [](const Value& a, const Value& b) {
                           return py_compare(a, b, CompareOp::kLt);
                         }));
  auto out = make_ref<ListObj>();
  for (size_t i : order) {
    const auto& [key, value] = v.dict().items[i];
    out->items.push_back(
        Value::list(make_ref<ListObj>(std::vector<Value>{key, value}, SeqKind::kTuple)));
  }
  return Value::list(std::move(out));
}

Result<Value> min(Evaluator& ev, const Value& v, Args& args) {
  return min_or_max(ev, v, args, false);
}
Result<Value> max(Evaluator& ev, const Value& v, Args& args) {
  return min_or_max(ev, v, args, true);
}

Result<Value> sum(Evaluator& ev, const Value& v, Args& args) {
  Value p[2] = {Value::none(), Value::integer(0)};
  JINJA_RETURN_IF_ERROR(bind_args(args, "sum", {"attribute", "start"}, 0, p));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(v));
  std::optional<AttrGetter> getter;
  if (!p[0].is_none()) getter.emplace(p[0], false);
  Value total = p[1];
  for (Value& item : items) {
    if (getter) {
      JINJA_ASSIGN_OR_RETURN(item, (*getter)(ev, std::move(item)));
    }
    JINJA_ASSIGN_OR_RETURN(total, py_binary(BinaryOp::kAdd, std::move(total), item));
  }
  return total;
}

Result<Value> attr(Evaluator&, const Value& v, Args& args) {
  Value name;
  JINJA_RETURN_IF_ERROR(bind_args(args, "attr", {"name"}, 1, &name));
  if (!name.is_string()) {
    return absl::InvalidArgumentError("attribute name must be string, not '" +
                                      std::string(type_name(name)) + "'");
  }
  // Like `v.name` without the fallback to `v[name]`.
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_string() || v.is_list() || v.is_dict()) {
    switch (method_access(v, name.str())) {
      case Access::kAllowed:
        return bound_method(v, name.str());
      case Access::kBlocked:
        return Value::undefined(Hint::kUnsafe, name.str(), type_name(v), &name);
      case Access::kMissing:
        break;
    }
  } else if (v.is_object()) {
    return Value::keeping_hint(v.object().getattr(name.str()), name);
  }
  return Value::undefined(Hint::kAttribute, name.str(), type_name(v), &name);
}

}  // namespace kvgate::jinja::filters
