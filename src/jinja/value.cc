#include "jinja/value.h"

#include <array>

#include "jinja/operators.h"

namespace kvgate::jinja {
namespace {

// The types an undefined value's hint can name (kept as an index so a Value stays 32 bytes).
constexpr std::array<std::string_view, 15> kHintTypes = {
    "object", "str",       "int",         "float", "bool",  "NoneType",  "list",     "tuple",
    "dict",   "Namespace", "LoopContext", "Macro", "range", "generator", "Undefined"};

uint8_t hint_type_index(std::string_view type) {
  for (size_t i = 0; i < kHintTypes.size(); ++i) {
    if (kHintTypes[i] == type) return static_cast<uint8_t>(i);
  }
  return 0;
}

}  // namespace

Value Value::string(std::string s, bool markup) {
  Value v(Kind::kString);
  auto* obj = new StrObj(std::move(s));
  v.obj_ = obj;
  obj->refs = 1;
  v.u_.chars = obj->s.data();
  v.size_ = obj->s.size();
  v.flags_ = markup ? kMarkupFlag : 0;
  return v;
}

Value Value::substring(const Value& owner, std::string_view part) {
  Value v = owner;
  v.u_.chars = part.data();
  v.size_ = part.size();
  v.flags_ = 0;
  return v;
}

Value Value::list(Ref<ListObj> list) {
  Value v(Kind::kList);
  v.obj_ = list.get();
  ++v.obj_->refs;
  return v;
}

Value Value::dict(Ref<DictObj> dict) {
  Value v(Kind::kDict);
  v.obj_ = dict.get();
  ++v.obj_->refs;
  return v;
}

Value Value::object(Ref<RichObject> object) {
  Value v(Kind::kObject);
  v.obj_ = object.get();
  ++v.obj_->refs;
  return v;
}

Value Value::undefined(Hint hint, std::string_view what, std::string_view type, const Value* keep) {
  Value v;
  v.aux_ = static_cast<uint8_t>(hint);
  v.flags_ = hint_type_index(type);
  v.u_.chars = what.data();
  v.size_ = what.size();
  if (keep != nullptr && keep->obj_ != nullptr) {
    v.obj_ = keep->obj_;
    ++v.obj_->refs;
  }
  return v;
}

std::string_view Value::hint_type() const { return kHintTypes[flags_ % kHintTypes.size()]; }

bool Value::append_in_place(std::string_view tail) {
  if (kind_ != Kind::kString || obj_ == nullptr || obj_->refs != 1 || flags_ != 0) return false;
  auto* s = static_cast<StrObj*>(obj_);
  // Only when the value still spans its whole string (not a substring of it).
  if (u_.chars != s->s.data() || size_ != s->s.size()) return false;
  const char* begin = s->s.data();
  if (tail.data() >= begin && tail.data() < begin + s->s.capacity()) return false;
  s->s.append(tail);
  u_.chars = s->s.data();
  size_ = s->s.size();
  return true;
}

const Value* DictObj::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

const Value* DictObj::find(const Value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& [k, v] : items) {
    if (py_equal(k, key)) return &v;
  }
  return nullptr;
}

void DictObj::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value RichObject::getattr(std::string_view name) const {
  return Value::undefined(Hint::kAttribute, name, type_name());
}

Result<Value> RichObject::call(Evaluator&, Args&) {
  return absl::InvalidArgumentError("'" + std::string(type_name()) + "' object is not callable");
}

Result<Value> RichObject::call_method(Evaluator&, std::string_view name, Args&) {
  return absl::InvalidArgumentError("'" + std::string(type_name()) + "' object has no method '" +
                                    std::string(name) + "'");
}

std::string_view type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return v.markup() ? "Markup" : "str";
    case Kind::kList:
      switch (v.seq()) {
        case SeqKind::kList:
          return "list";
        case SeqKind::kTuple:
          return "tuple";
        case SeqKind::kRange:
          return "range";
        case SeqKind::kGenerator:
          return "generator";
        case SeqKind::kIterator:
          return "list_reverseiterator";
        case SeqKind::kDictKeys:
          return "dict_keys";
        case SeqKind::kDictValues:
          return "dict_values";
        case SeqKind::kDictItems:
          return "dict_items";
      }
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kObject:
      return v.object().type_name();
    case Kind::kBuiltin:
      return "builtin_function_or_method";
  }
  return "object";
}

Status bind_args(const Args& args, std::string_view what,
                 std::initializer_list<std::string_view> params, size_t required, Value* out) {
  const size_t n = params.size();
  if (args.positional.size() > n) {
    return absl::InvalidArgumentError(std::string(what) + "() takes at most " + std::to_string(n) +
                                      " argument(s) (" + std::to_string(args.positional.size()) +
                                      " given)");
  }
  uint64_t given = 0;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    out[i] = args.positional[i];
    given |= uint64_t{1} << i;
  }
  for (const auto& [name, value] : args.keywords) {
    size_t i = 0;
    for (std::string_view p : params) {
      if (p == name) break;
      ++i;
    }
    if (i == n) {
      return absl::InvalidArgumentError(
          std::string(what) + "() got an unexpected keyword argument '" + std::string(name) + "'");
    }
    if (given & (uint64_t{1} << i)) {
      return absl::InvalidArgumentError(
          std::string(what) + "() got multiple values for argument '" + std::string(name) + "'");
    }
    out[i] = value;
    given |= uint64_t{1} << i;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!(given & (uint64_t{1} << i))) {
      return absl::InvalidArgumentError(std::string(what) + "() missing required argument '" +
                                        std::string(*(params.begin() + i)) + "'");
    }
  }
  return absl::OkStatus();
}

}  // namespace kvgate::jinja
