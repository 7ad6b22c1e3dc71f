// The functions a template finds without a context variable of that name: jinja2's range (capped
// as the sandbox caps it), namespace, dict, cycler and joiner, and transformers' raise_exception
// and strftime_now.
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace kvgate::jinja {

// The global `name` (a Builtin value), or an undefined value naming it.
Value global_named(std::string_view name);

Result<Value> call_global(Evaluator& ev, Builtin which, Args& args);

// namespace(...) objects: the one thing a template may assign attributes to.
class NamespaceObj final : public RichObject {
 public:
  std::string_view type_name() const override { return "Namespace"; }
  bool repr(std::string* out) const override;
  Value getattr(std::string_view name) const override;
  void setattr(Value name, Value value) { attrs_.set(std::move(name), std::move(value)); }
  DictObj& attrs() { return attrs_; }
  void release_references() override { attrs_.items.clear(); }

 private:
  DictObj attrs_;
};

}  // namespace kvgate::jinja
