// One render of a Program: runs its statements into an output string with jinja2's scoping
// (a for-loop iteration, macro, call, filter, set or with block is a scope of its own; if is not),
// and evaluates expressions with the sandbox's attribute and item rules. Filters, tests, methods
// and globals reach back into it for lookups and calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "jinja/ast.h"
#include "jinja/value.h"

namespace kvgate::jinja {

// The variables one scope assigned; lookups walk out through the parents.
class Scope final : public Object {
 public:
  explicit Scope(Ref<Scope> parent) : parent(std::move(parent)) {}
  const Value* find(NameId id) const {
    for (const auto& [name, value] : vars) {
      if (name == id) return &value;
    }
    return nullptr;
  }
  void set(NameId id, Value v);
  void release_references() override { vars.clear(); }
  Ref<Scope> parent;
  absl::InlinedVector<std::pair<NameId, Value>, 6> vars;
};

class Evaluator {
 public:
  Evaluator(const detail::Program& program, const Value& context);

  // The rendered text, or the error: "<origin>:<line>: <what>", or raise_exception's message.
  Result<std::string> render(size_t size_hint);

  Result<Value> eval(const Expr& e);
  // Sandboxed `obj.name`: methods first, then items (dicts); blocked methods are undefined values
  // that fail when called. `keep` owns `name` when the template does not.
  Result<Value> getattr(const Value& obj, std::string_view name, const Value* keep = nullptr);
  // Sandboxed `obj[key]`: a missing key or index is undefined; a string key falls back to the
  // attribute.
  Result<Value> getitem(const Value& obj, const Value& key);
  Result<Value> call(const Value& callee, Args& args);
  // Python's iter(v) drained: chars of a str, keys of a dict, nothing for undefined; consumes a
  // generator.
  Result<std::vector<Value>> iterate(const Value& v);
  // raise_exception(): the render fails with exactly `message`.
  Status raise(std::string message);

  // A macro called with `args` (and `caller` for {% call %}).
  Result<Value> call_macro(const MacroDef& def, const Ref<Scope>& closure, Args& args);
  // Keeps `object` to release its references when the render ends (see
  // Object::release_references).
  void track(Ref<Object> object) { tracked_.push_back(std::move(object)); }

 private:
  enum class Flow : uint8_t { kNormal, kBreak, kContinue };

  Value lookup(NameId id) const;
  Status exec_body(const Body& body);
  Status exec(const Stmt& s);
  Status exec_output(const OutputStmt& s);
  Status exec_if(const IfStmt& s);
  Status exec_for(const ForStmt& s);
  Status exec_set_attribute(const SetAttributeStmt& s);
  Status exec_set_block(const SetBlockStmt& s);
  Status exec_call_block(const CallBlockStmt& s);
  Status exec_filter_block(const FilterBlockStmt& s);
  Status exec_with(const WithStmt& s);
  // Runs `body` in a new scope, writing into `out`.
  Status render_scoped(const Body& body, std::string* out);
  Status assign(const Target& target, Value v);
  Result<Value> apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters,
                              Value operand);

  Result<Value> eval_inner(const Expr& e);
  Result<Value> eval_items(const ItemsExpr& e);
  Result<Value> eval_dict(const DictExpr& e);
  Result<Value> eval_concat(const ItemsExpr& e);
  Result<Value> eval_compare(const CompareExpr& e);
  Result<Value> eval_item(const ItemExpr& e);
  Result<Value> eval_slice(const Value& obj, const SliceExpr& s);
  Result<Value> eval_call(const CallExpr& e);
  Result<Value> eval_filter(const FilterExpr& e, const Value* operand);
  Status eval_args(const CallArgs& in, Args* out);

  const detail::Program& program_;
  std::vector<Value> context_;  // NameId -> the context's variable, undefined if absent
  Ref<Scope> scope_;
  std::string* out_ = nullptr;
  Flow flow_ = Flow::kNormal;
  int error_line_ = 0;  // the innermost line an error passed through
  bool raised_ = false;
  int macro_depth_ = 0;
  bool folding_ = false;  // evaluating as jinja2's compiler folds constants (FoldedExpr)
  std::vector<Ref<Object>> tracked_;
};

// A macro (or a call block's caller) with the scope it was defined in.
class MacroObj final : public RichObject {
 public:
  MacroObj(const MacroDef* def, Ref<Scope> closure) : def_(def), closure_(std::move(closure)) {}
  std::string_view type_name() const override { return "Macro"; }
  bool repr(std::string* out) const override;
  bool callable() const override { return true; }
  Result<Value> call(Evaluator& ev, Args& args) override;

 private:
  const MacroDef* def_;
  Ref<Scope> closure_;
};

}  // namespace kvgate::jinja
