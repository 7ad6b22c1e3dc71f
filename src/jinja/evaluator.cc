// Statements: output, if, for, set, macros, call/filter/with blocks, break and continue, with the
// scopes jinja2 gives them.
#include "jinja/evaluator.h"

#include "jinja/globals.h"
#include "jinja/loop.h"
#include "jinja/py_str.h"
#include "jinja/restore.h"
#include "jinja/status_macros.h"

namespace kvgate::jinja {
namespace {

// Python's default recursion limit is 1000 frames; a macro call takes a few of them.
constexpr int kMaxMacroDepth = 200;

}  // namespace

void Scope::set(NameId id, Value v) {
  for (auto& [name, value] : vars) {
    if (name == id) {
      value = std::move(v);
      return;
    }
  }
  vars.emplace_back(id, std::move(v));
}

Evaluator::Evaluator(const detail::Program& program, const Value& context)
    : program_(program), context_(program.names.size()) {
  for (const auto& [key, value] : context.dict().items) {
    if (auto it = program.name_ids.find(key.str()); it != program.name_ids.end()) {
      context_[it->second] = value;
    }
  }
  scope_ = make_ref<Scope>(Ref<Scope>());
}

Result<std::string> Evaluator::render(size_t size_hint) {
  std::string out;
  out.reserve(size_hint);
  out_ = &out;
  Status s = exec_body(program_.body);
  scope_->release_references();
  for (const Ref<Object>& object : tracked_) object->release_references();
  if (s.ok()) return out;
  if (raised_) return s;
  return absl::InvalidArgumentError(program_.origin + ":" + std::to_string(error_line_) + ": " +
                                    std::string(message_of(s)));
}

Status Evaluator::raise(std::string message) {
  raised_ = true;
  return absl::InvalidArgumentError(std::move(message));
}

Value Evaluator::lookup(NameId id) const {
  for (const Scope* s = scope_.get(); s != nullptr; s = s->parent.get()) {
    if (const Value* v = s->find(id)) return *v;
  }
  if (!context_[id].is_undefined()) return context_[id];
  return program_.globals[id];
}

Status Evaluator::exec_body(const Body& body) {
  for (const StmtPtr& s : body) {
    if (Status st = exec(*s); !st.ok()) {
      if (error_line_ == 0) error_line_ = s->line;
      return st;
    }
    if (flow_ != Flow::kNormal) break;
  }
  return absl::OkStatus();
}

Status Evaluator::exec(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::kText:
      *out_ += static_cast<const TextStmt&>(s).text;
      return absl::OkStatus();
    case StmtKind::kOutput:
      return exec_output(static_cast<const OutputStmt&>(s));
    case StmtKind::kIf:
      return exec_if(static_cast<const IfStmt&>(s));
    case StmtKind::kFor:
      return exec_for(static_cast<const ForStmt&>(s));
    case StmtKind::kSet: {
      const auto& set = static_cast<const SetStmt&>(s);
      JINJA_ASSIGN_OR_RETURN(Value v, eval(*set.value));
      return assign(set.target, std::move(v));
    }
    case StmtKind::kSetAttribute:
      return exec_set_attribute(static_cast<const SetAttributeStmt&>(s));
    case StmtKind::kSetBlock:
      return exec_set_block(static_cast<const SetBlockStmt&>(s));
    case StmtKind::kMacro: {
      const auto& m = static_cast<const MacroStmt&>(s);
      track(Ref<Object>(scope_.get()));
      scope_->set(m.id, Value::object(make_ref<MacroObj>(&m.def, scope_)));
      return absl::OkStatus();
    }
    case StmtKind::kCallBlock:
      return exec_call_block(static_cast<const CallBlockStmt&>(s));
    case StmtKind::kFilterBlock:
      return exec_filter_block(static_cast<const FilterBlockStmt&>(s));
    case StmtKind::kWith:
      return exec_with(static_cast<const WithStmt&>(s));
    case StmtKind::kScope:
      return render_scoped(static_cast<const ScopeStmt&>(s).body, out_);
    case StmtKind::kBreak:
      flow_ = Flow::kBreak;
      return absl::OkStatus();
    case StmtKind::kContinue:
      flow_ = Flow::kContinue;
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

Status Evaluator::exec_output(const OutputStmt& s) {
  Restore<bool> folding(&folding_, folding_ || s.constant);
  JINJA_ASSIGN_OR_RETURN(Value v, eval(*s.expr));
  if (v.is_string()) {
    *out_ += v.str();
    return absl::OkStatus();
  }
  return append_str(v, out_);
}

Status Evaluator::exec_if(const IfStmt& s) {
  for (const auto& [test, body] : s.branches) {
    JINJA_ASSIGN_OR_RETURN(Value v, eval(*test));
    if (py_truthy(v)) return exec_body(body);
  }
  return exec_body(s.otherwise);
}

Status Evaluator::exec_for(const ForStmt& s) {
  JINJA_ASSIGN_OR_RETURN(Value iterable, eval(*s.iterable));
  Ref<ListObj> items;
  if (iterable.is_list() && iterable.seq() != SeqKind::kGenerator &&
      iterable.seq() != SeqKind::kIterator) {
    items = Ref<ListObj>(&iterable.list());
  } else {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> all, iterate(iterable));
    items = make_ref<ListObj>(std::move(all), SeqKind::kList);
  }
  const Ref<Scope> outer = scope_;
  if (s.filter) {
    auto kept = make_ref<ListObj>();
    for (const Value& item : items->items) {
      Restore<Ref<Scope>> in_scope(&scope_, make_ref<Scope>(outer));
      JINJA_RETURN_IF_ERROR(assign(s.target, item));
      JINJA_ASSIGN_OR_RETURN(Value keep, eval(*s.filter));
      if (py_truthy(keep)) kept->items.push_back(item);
    }
    items = std::move(kept);
  }
  if (items->items.empty()) return render_scoped(s.otherwise, out_);

  auto loop = make_ref<LoopObj>(items);
  track(Ref<Object>(loop.get()));
  const Value loop_value = Value::object(loop);
  Ref<Scope> iteration;
  for (size_t i = 0; i < items->items.size(); ++i) {
    // A fresh scope per iteration (what one iteration sets the next does not see); reused when
    // no macro kept it.
    if (iteration && iteration->refs == 1) {
      iteration->vars.clear();
    } else {
      iteration = make_ref<Scope>(outer);
    }
    loop->at(i);
    Restore<Ref<Scope>> in_scope(&scope_, iteration);
    scope_->set(program_.loop_id, loop_value);
    JINJA_RETURN_IF_ERROR(assign(s.target, items->items[i]));
    JINJA_RETURN_IF_ERROR(exec_body(s.body));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  return absl::OkStatus();
}

Status Evaluator::assign(const Target& target, Value v) {
  if (!target.is_tuple) {
    scope_->set(target.id, std::move(v));
    return absl::OkStatus();
  }
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(v));
  const size_t want = target.items.size();
  if (items.size() < want) {
    return absl::InvalidArgumentError("not enough values to unpack (expected " +
                                      std::to_string(want) + ", got " +
                                      std::to_string(items.size()) + ")");
  }
  if (items.size() > want) {
    return absl::InvalidArgumentError("too many values to unpack (expected " +
                                      std::to_string(want) + ")");
  }
  for (size_t i = 0; i < want; ++i) {
    JINJA_RETURN_IF_ERROR(assign(target.items[i], std::move(items[i])));
  }
  return absl::OkStatus();
}

Status Evaluator::exec_set_attribute(const SetAttributeStmt& s) {
  const Value object = lookup(s.object);
  JINJA_ASSIGN_OR_RETURN(Value v, eval(*s.value));
  if (!object.is_object() || object.object().type_name() != "Namespace") {
    return absl::InvalidArgumentError("cannot assign attribute on non-namespace object");
  }
  static_cast<NamespaceObj&>(object.object()).setattr(Value::borrowed(s.attribute), std::move(v));
  return absl::OkStatus();
}

Status Evaluator::render_scoped(const Body& body, std::string* out) {
  Restore<Ref<Scope>> in_scope(&scope_, make_ref<Scope>(scope_));
  Restore<std::string*> into(&out_, out);
  return exec_body(body);
}

Result<Value> Evaluator::apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters,
                                       Value operand) {
  for (const auto& f : filters) {
    JINJA_ASSIGN_OR_RETURN(operand, eval_filter(*f, &operand));
  }
  return operand;
}

Status Evaluator::exec_set_block(const SetBlockStmt& s) {
  std::string text;
  JINJA_RETURN_IF_ERROR(render_scoped(s.body, &text));
  JINJA_ASSIGN_OR_RETURN(Value v, apply_filters(s.filters, Value::string(std::move(text))));
  return assign(s.target, std::move(v));
}

Status Evaluator::exec_filter_block(const FilterBlockStmt& s) {
  std::string text;
  JINJA_RETURN_IF_ERROR(render_scoped(s.body, &text));
  JINJA_ASSIGN_OR_RETURN(Value v, apply_filters(s.filters, Value::string(std::move(text))));
  return append_str(v, out_);
}

Status Evaluator::exec_call_block(const CallBlockStmt& s) {
  JINJA_ASSIGN_OR_RETURN(Value callee, eval(*s.call->callee));
  Args args;
  JINJA_RETURN_IF_ERROR(eval_args(s.call->args, &args));
  track(Ref<Object>(scope_.get()));
  args.keywords.emplace_back("caller", Value::object(make_ref<MacroObj>(&s.caller, scope_)));
  JINJA_ASSIGN_OR_RETURN(Value result, call(callee, args));
  return append_str(result, out_);
}

Status Evaluator::exec_with(const WithStmt& s) {
  std::vector<Value> values;
  for (const auto& [target, expr] : s.assignments) {
    JINJA_ASSIGN_OR_RETURN(Value v, eval(*expr));
    values.push_back(std::move(v));
  }
  Restore<Ref<Scope>> in_scope(&scope_, make_ref<Scope>(scope_));
  for (size_t i = 0; i < values.size(); ++i) {
    JINJA_RETURN_IF_ERROR(assign(s.assignments[i].first, std::move(values[i])));
  }
  return exec_body(s.body);
}

Result<Value> Evaluator::call_macro(const MacroDef& def, const Ref<Scope>& closure, Args& args) {
  const std::string name(def.name);
  if (macro_depth_ >= kMaxMacroDepth) {
    return absl::InvalidArgumentError("maximum recursion depth exceeded in macro '" + name + "'");
  }
  Restore<int> depth(&macro_depth_, macro_depth_ + 1);
  Restore<Ref<Scope>> in_scope(&scope_, make_ref<Scope>(closure));
  const size_t n = def.params.size();
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < std::min(n, args.positional.size()); ++i) {
    scope_->set(def.params[i].id, args.positional[i]);
    given[i] = true;
  }
  // Keywords fill the parameters positional arguments did not; the rest are kwargs.
  std::vector<bool> used(args.keywords.size(), false);
  for (size_t i = args.positional.size(); i < n; ++i) {
    for (size_t k = 0; k < args.keywords.size(); ++k) {
      if (!used[k] && args.keywords[k].first == def.params[i].name) {
        scope_->set(def.params[i].id, args.keywords[k].second);
        given[i] = used[k] = true;
        break;
      }
    }
  }
  Value caller = Value::undefined(Hint::kMessage, "No caller defined");
  auto kwargs = make_ref<DictObj>();
  for (size_t k = 0; k < args.keywords.size(); ++k) {
    if (used[k]) continue;
    if (args.keywords[k].first == "caller" && def.uses_caller) {
      caller = args.keywords[k].second;
      continue;
    }
    if (!def.uses_kwargs) {
      if (args.keywords[k].first == "caller") {
        return absl::InvalidArgumentError("macro '" + name +
                                          "' was invoked with two values for the special caller "
                                          "argument");
      }
      return absl::InvalidArgumentError("macro '" + name + "' takes no keyword argument '" +
                                        std::string(args.keywords[k].first) + "'");
    }
    kwargs->items.emplace_back(Value::borrowed(args.keywords[k].first), args.keywords[k].second);
  }
  if (args.positional.size() > n && !def.uses_varargs) {
    return absl::InvalidArgumentError("macro '" + name + "' takes not more than " +
                                      std::to_string(n) + " argument(s)");
  }
  auto find_id = [&](std::string_view special) {
    auto it = program_.name_ids.find(special);
    return it == program_.name_ids.end() ? NameId{0} : it->second;
  };
  if (def.uses_caller) scope_->set(find_id("caller"), std::move(caller));
  if (def.uses_kwargs) scope_->set(find_id("kwargs"), Value::dict(std::move(kwargs)));
  if (def.uses_varargs) {
    auto varargs = make_ref<ListObj>();
    varargs->seq = SeqKind::kTuple;
    for (size_t i = n; i < args.positional.size(); ++i)
      varargs->items.push_back(args.positional[i]);
    scope_->set(find_id("varargs"), Value::list(std::move(varargs)));
  }
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    const Param& p = def.params[i];
    if (p.default_value) {
      JINJA_ASSIGN_OR_RETURN(Value v, eval(*p.default_value));
      scope_->set(p.id, std::move(v));
    } else {
      const Value message =
          Value::string("parameter '" + std::string(p.name) + "' was not provided");
      scope_->set(p.id, Value::undefined(Hint::kMessage, message.str(), {}, &message));
    }
  }
  std::string text;
  Restore<std::string*> into(&out_, &text);
  Restore<Flow> flow(&flow_, Flow::kNormal);
  JINJA_RETURN_IF_ERROR(exec_body(def.body));
  return Value::string(std::move(text));
}

bool MacroObj::repr(std::string* out) const {
  *out += "<Macro '" + std::string(def_->name) + "'>";
  return true;
}

Result<Value> MacroObj::call(Evaluator& ev, Args& args) {
  return ev.call_macro(*def_, closure_, args);
}

}  // namespace kvgate::jinja
