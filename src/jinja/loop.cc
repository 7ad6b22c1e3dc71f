#include "jinja/loop.h"

#include "jinja/methods.h"
#include "jinja/operators.h"

namespace kvgate::jinja {

bool LoopObj::repr(std::string* out) const {
  *out += "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(length()) + ">";
  return true;
}

Value LoopObj::getattr(std::string_view name) const {
  const auto n = static_cast<int64_t>(length());
  const auto i = static_cast<int64_t>(index0_);
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem") {
    if (i == 0) return Value::undefined(Hint::kMessage, "there is no previous item");
    return items_->items[index0_ - 1];
  }
  if (name == "nextitem") {
    if (i + 1 >= n) return Value::undefined(Hint::kMessage, "there is no next item");
    return items_->items[index0_ + 1];
  }
  if (name == "cycle" || name == "changed") {
    // The loop object outlives nothing it is bound to: the bound method holds a reference.
    Value self = Value::object(Ref<RichObject>(const_cast<LoopObj*>(this)));
    return bound_method(self, name);
  }
  return RichObject::getattr(name);
}

Result<Value> LoopObj::call(Evaluator&, Args&) {
  return absl::InvalidArgumentError(
      "The loop must be defined as 'recursive' to call it (recursive loops are not supported)");
}

Result<Value> LoopObj::call_method(Evaluator& ev, std::string_view name, Args& args) {
  if (!args.keywords.empty()) {
    return absl::InvalidArgumentError("loop." + std::string(name) +
                                      "() takes no keyword arguments");
  }
  if (name == "cycle") {
    if (args.positional.empty()) {
      return absl::InvalidArgumentError("no items for cycling given");
    }
    return args.positional[index0_ % args.positional.size()];
  }
  if (name == "changed") {
    std::vector<Value> now(args.positional.begin(), args.positional.end());
    bool same = last_changed_.has_value() && last_changed_->size() == now.size();
    for (size_t k = 0; same && k < now.size(); ++k) same = py_equal((*last_changed_)[k], now[k]);
    if (same) return Value::boolean(false);
    last_changed_ = std::move(now);
    return Value::boolean(true);
  }
  return RichObject::call_method(ev, name, args);
}

}  // namespace kvgate::jinja
