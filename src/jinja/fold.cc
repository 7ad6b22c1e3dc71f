// Which expressions jinja2's compiler evaluates ahead of time ("constant folding"), which matters
// where that evaluation differs from the rendering's: a slice it folds goes through the sandbox's
// getitem (FoldedExpr).
#include "jinja/parser.h"

namespace kvgate::jinja {

bool Parser::is_constant(const Expr& e) {
  auto all = [](const std::vector<ExprPtr>& items) {
    for (const ExprPtr& item : items) {
      if (!is_constant(*item)) return false;
    }
    return true;
  };
  auto args_constant = [&](const CallArgs& args) {
    if (!all(args.positional)) return false;
    for (const auto& kw : args.keywords) {
      if (!is_constant(*kw.second)) return false;
    }
    return true;
  };
  switch (e.kind) {
    case ExprKind::kLiteral:
      return true;
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kAnd:
    case ExprKind::kOr:
    case ExprKind::kConcat:
      return all(static_cast<const ItemsExpr&>(e).items);
    case ExprKind::kDict:
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        if (!is_constant(*k) || !is_constant(*v)) return false;
      }
      return true;
    case ExprKind::kNot:
    case ExprKind::kNegate:
    case ExprKind::kPositive:
      return is_constant(*static_cast<const UnaryExpr&>(e).operand);
    case ExprKind::kBinary: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      return is_constant(*b.left) && is_constant(*b.right);
    }
    case ExprKind::kCompare: {
      const auto& c = static_cast<const CompareExpr&>(e);
      if (!is_constant(*c.first)) return false;
      for (const auto& [op, operand] : c.rest) {
        if (!is_constant(*operand)) return false;
      }
      return true;
    }
    case ExprKind::kCondition: {
      const auto& c = static_cast<const ConditionExpr&>(e);
      return is_constant(*c.test) && is_constant(*c.then) &&
             (!c.otherwise || is_constant(*c.otherwise));
    }
    case ExprKind::kAttribute:
      return is_constant(*static_cast<const AttributeExpr&>(e).object);
    case ExprKind::kItem: {
      const auto& i = static_cast<const ItemExpr&>(e);
      return is_constant(*i.object) && is_constant(*i.index);
    }
    case ExprKind::kSlice: {
      const auto& s = static_cast<const SliceExpr&>(e);
      for (const ExprPtr* part : {&s.start, &s.stop, &s.step}) {
        if (*part && !is_constant(**part)) return false;
      }
      return true;
    }
    case ExprKind::kFilter: {
      const auto& f = static_cast<const FilterExpr&>(e);
      // Filters that take jinja2's context are never folded.
      const bool takes_context = f.name == "map" || f.name == "select" || f.name == "reject" ||
                                 f.name == "selectattr" || f.name == "rejectattr";
      return !takes_context && f.operand && is_constant(*f.operand) && args_constant(f.args);
    }
    case ExprKind::kTest: {
      const auto& t = static_cast<const TestExpr&>(e);
      return is_constant(*t.operand) && args_constant(t.args);
    }
    case ExprKind::kFolded:
      return is_constant(*static_cast<const FoldedExpr&>(e).inner);
    case ExprKind::kName:
    case ExprKind::kCall:
      return false;
  }
  return false;
}

namespace {

// The direct subexpressions of `e`.
std::vector<ExprPtr*> children(Expr& e) {
  std::vector<ExprPtr*> out;
  auto add_args = [&](CallArgs& args) {
    for (ExprPtr& p : args.positional) out.push_back(&p);
    for (auto& kw : args.keywords) out.push_back(&kw.second);
  };
  switch (e.kind) {
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kAnd:
    case ExprKind::kOr:
    case ExprKind::kConcat:
      for (ExprPtr& item : static_cast<ItemsExpr&>(e).items) out.push_back(&item);
      break;
    case ExprKind::kDict:
      for (auto& [k, v] : static_cast<DictExpr&>(e).items) {
        out.push_back(&k);
        out.push_back(&v);
      }
      break;
    case ExprKind::kNot:
    case ExprKind::kNegate:
    case ExprKind::kPositive:
      out.push_back(&static_cast<UnaryExpr&>(e).operand);
      break;
    case ExprKind::kBinary:
      out.push_back(&static_cast<BinaryExpr&>(e).left);
      out.push_back(&static_cast<BinaryExpr&>(e).right);
      break;
    case ExprKind::kCompare:
      out.push_back(&static_cast<CompareExpr&>(e).first);
      for (auto& [op, operand] : static_cast<CompareExpr&>(e).rest) out.push_back(&operand);
      break;
    case ExprKind::kCondition: {
      auto& c = static_cast<ConditionExpr&>(e);
      out.push_back(&c.test);
      out.push_back(&c.then);
      if (c.otherwise) out.push_back(&c.otherwise);
      break;
    }
    case ExprKind::kAttribute:
      out.push_back(&static_cast<AttributeExpr&>(e).object);
      break;
    case ExprKind::kItem:
      out.push_back(&static_cast<ItemExpr&>(e).object);
      out.push_back(&static_cast<ItemExpr&>(e).index);
      break;
    case ExprKind::kSlice: {
      auto& s = static_cast<SliceExpr&>(e);
      for (ExprPtr* part : {&s.start, &s.stop, &s.step}) {
        if (*part) out.push_back(part);
      }
      break;
    }
    case ExprKind::kCall:
      out.push_back(&static_cast<CallExpr&>(e).callee);
      add_args(static_cast<CallExpr&>(e).args);
      break;
    case ExprKind::kFilter:
      if (static_cast<FilterExpr&>(e).operand) out.push_back(&static_cast<FilterExpr&>(e).operand);
      add_args(static_cast<FilterExpr&>(e).args);
      break;
    case ExprKind::kTest:
      out.push_back(&static_cast<TestExpr&>(e).operand);
      add_args(static_cast<TestExpr&>(e).args);
      break;
    case ExprKind::kFolded:
      out.push_back(&static_cast<FoldedExpr&>(e).inner);
      break;
    case ExprKind::kLiteral:
    case ExprKind::kName:
      break;
  }
  return out;
}

bool has_slice(Expr& e) {
  if (e.kind == ExprKind::kSlice) return true;
  for (ExprPtr* child : children(e)) {
    if (has_slice(**child)) return true;
  }
  return false;
}

}  // namespace

void Parser::mark_folds(ExprPtr* e) {
  if (!has_slice(**e)) return;
  for (ExprPtr* child : children(**e)) {
    if ((*child)->kind != ExprKind::kSlice) mark_folds(child);
  }
  if ((*e)->kind != ExprKind::kSlice && is_constant(**e)) {
    const int line = (*e)->line;
    *e = std::make_unique<FoldedExpr>(line, std::move(*e));
  }
}

}  // namespace kvgate::jinja
