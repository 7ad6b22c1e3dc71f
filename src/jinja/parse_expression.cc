// jinja2's expression grammar, lowest precedence first: x if c else y, or, and, not, comparisons
// (in, not in, chained), + -, ~, * / // %, **, unary - +, then primaries with their postfix
// subscripts, calls, filters and `is` tests.
#include "jinja/filters.h"
#include "jinja/parser.h"
#include "jinja/status_macros.h"
#include "jinja/tests.h"

namespace kvgate::jinja {
namespace {

// Deep enough for any real template, shallow enough for the stack.
constexpr int kMaxNesting = 150;

bool is_compare_token(Tok t) {
  return t == Tok::kEq || t == Tok::kNe || t == Tok::kLt || t == Tok::kLe || t == Tok::kGt ||
         t == Tok::kGe;
}

CompareOp compare_op(Tok t) {
  switch (t) {
    case Tok::kEq:
      return CompareOp::kEq;
    case Tok::kNe:
      return CompareOp::kNe;
    case Tok::kLt:
      return CompareOp::kLt;
    case Tok::kLe:
      return CompareOp::kLe;
    case Tok::kGt:
      return CompareOp::kGt;
    default:
      return CompareOp::kGe;
  }
}

class NestingGuard {
 public:
  explicit NestingGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~NestingGuard() { --*depth_; }
  bool too_deep() const { return *depth_ > kMaxNesting; }

 private:
  int* depth_;
};

}  // namespace

Result<ExprPtr> Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

Result<ExprPtr> Parser::parse_condexpr() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr expr1, parse_or());
  while (skip_if_name("if")) {
    auto cond = std::make_unique<ConditionExpr>(line);
    JINJA_ASSIGN_OR_RETURN(cond->test, parse_or());
    if (skip_if_name("else")) {
      JINJA_ASSIGN_OR_RETURN(cond->otherwise, parse_condexpr());
    }
    cond->then = std::move(expr1);
    expr1 = std::move(cond);
  }
  return expr1;
}

Result<ExprPtr> Parser::parse_or() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (skip_if_name("or")) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    auto node = std::make_unique<ItemsExpr>(ExprKind::kOr, line);
    node->items.push_back(std::move(left));
    node->items.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

Result<ExprPtr> Parser::parse_and() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (skip_if_name("and")) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    auto node = std::make_unique<ItemsExpr>(ExprKind::kAnd, line);
    node->items.push_back(std::move(left));
    node->items.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

Result<ExprPtr> Parser::parse_not() {
  if (is_name("not")) {
    const int line = next().line;
    NestingGuard guard(&nesting_);
    if (guard.too_deep()) return error(line, "expression nests too deeply");
    JINJA_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
    return ExprPtr(std::make_unique<UnaryExpr>(ExprKind::kNot, line, std::move(operand)));
  }
  return parse_compare();
}

Result<ExprPtr> Parser::parse_compare() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr expr, parse_math1());
  std::unique_ptr<CompareExpr> cmp;
  while (true) {
    CompareOp op;
    if (is_compare_token(current().type)) {
      op = compare_op(next().type);
    } else if (skip_if_name("in")) {
      op = CompareOp::kIn;
    } else if (is_name("not") && look().type == Tok::kName && look().text == "in") {
      next();
      next();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    JINJA_ASSIGN_OR_RETURN(ExprPtr operand, parse_math1());
    if (!cmp) {
      cmp = std::make_unique<CompareExpr>(line);
      cmp->first = std::move(expr);
    }
    cmp->rest.emplace_back(op, std::move(operand));
  }
  if (!cmp) return expr;
  return ExprPtr(std::move(cmp));
}

Result<ExprPtr> Parser::parse_math1() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, parse_concat());
  while (current().type == Tok::kAdd || current().type == Tok::kSub) {
    const BinaryOp op = next().type == Tok::kAdd ? BinaryOp::kAdd : BinaryOp::kSub;
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, parse_concat());
    left = std::make_unique<BinaryExpr>(line, op, std::move(left), std::move(right));
  }
  return left;
}

Result<ExprPtr> Parser::parse_concat() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr first, parse_math2());
  if (current().type != Tok::kTilde) return first;
  auto node = std::make_unique<ItemsExpr>(ExprKind::kConcat, line);
  node->items.push_back(std::move(first));
  while (skip_if(Tok::kTilde)) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr part, parse_math2());
    node->items.push_back(std::move(part));
  }
  return ExprPtr(std::move(node));
}

Result<ExprPtr> Parser::parse_math2() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, parse_pow());
  while (true) {
    BinaryOp op;
    switch (current().type) {
      case Tok::kMul:
        op = BinaryOp::kMul;
        break;
      case Tok::kDiv:
        op = BinaryOp::kDiv;
        break;
      case Tok::kFloorDiv:
        op = BinaryOp::kFloorDiv;
        break;
      case Tok::kMod:
        op = BinaryOp::kMod;
        break;
      default:
        return left;
    }
    next();
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, parse_pow());
    left = std::make_unique<BinaryExpr>(line, op, std::move(left), std::move(right));
  }
}

Result<ExprPtr> Parser::parse_pow() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, parse_unary());
  while (skip_if(Tok::kPow)) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, parse_unary());
    left = std::make_unique<BinaryExpr>(line, BinaryOp::kPow, std::move(left), std::move(right));
  }
  return left;
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  const int line = current().line;
  NestingGuard guard(&nesting_);
  if (guard.too_deep()) return error(line, "expression nests too deeply");
  ExprPtr node;
  if (skip_if(Tok::kSub)) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    node = std::make_unique<UnaryExpr>(ExprKind::kNegate, line, std::move(operand));
  } else if (skip_if(Tok::kAdd)) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    node = std::make_unique<UnaryExpr>(ExprKind::kPositive, line, std::move(operand));
  } else {
    JINJA_ASSIGN_OR_RETURN(node, parse_primary());
  }
  JINJA_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) {
    JINJA_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
  }
  return node;
}

Result<ExprPtr> Parser::parse_primary() {
  const Token& token = current();
  const int line = token.line;
  switch (token.type) {
    case Tok::kName: {
      next();
      const std::string_view name = token.text;
      if (name == "true" || name == "True") {
        return ExprPtr(std::make_unique<LiteralExpr>(line, Value::boolean(true)));
      }
      if (name == "false" || name == "False") {
        return ExprPtr(std::make_unique<LiteralExpr>(line, Value::boolean(false)));
      }
      if (name == "none" || name == "None") {
        return ExprPtr(std::make_unique<LiteralExpr>(line, Value::none()));
      }
      const NameId id = intern(name);
      for (MacroDef* m : macros_) {
        m->uses_varargs |= name == "varargs";
        m->uses_kwargs |= name == "kwargs";
        m->uses_caller |= name == "caller";
      }
      return ExprPtr(std::make_unique<NameExpr>(line, id, name));
    }
    case Tok::kString: {
      std::string s = next().string;
      while (current().type == Tok::kString) s += next().string;
      return ExprPtr(std::make_unique<LiteralExpr>(line, Value::borrowed(keep(std::move(s)))));
    }
    case Tok::kInteger:
      return ExprPtr(std::make_unique<LiteralExpr>(line, Value::integer(next().integer)));
    case Tok::kFloat:
      return ExprPtr(std::make_unique<LiteralExpr>(line, Value::number(next().number)));
    case Tok::kLParen: {
      next();
      NestingGuard guard(&nesting_);
      if (guard.too_deep()) return error(line, "expression nests too deeply");
      JINJA_ASSIGN_OR_RETURN(ExprPtr node, parse_tuple(false, true, {}, true));
      JINJA_RETURN_IF_ERROR(expect(Tok::kRParen).status());
      return node;
    }
    case Tok::kLBracket:
      return parse_list();
    case Tok::kLBrace:
      return parse_dict();
    default:
      return unexpected(token);
  }
}

Result<ExprPtr> Parser::parse_tuple(bool simplified, bool with_condexpr,
                                    std::initializer_list<std::string_view> extra_end_names,
                                    bool explicit_parentheses) {
  const int line = current().line;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) JINJA_RETURN_IF_ERROR(expect(Tok::kComma).status());
    if (is_tuple_end(extra_end_names)) break;
    ExprPtr item;
    if (simplified) {
      JINJA_ASSIGN_OR_RETURN(item, parse_primary());
    } else {
      JINJA_ASSIGN_OR_RETURN(item, parse_expression(with_condexpr));
    }
    args.push_back(std::move(item));
    if (current().type == Tok::kComma) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parentheses) {
      return error(current().line, "Expected an expression, got " + describe(current()));
    }
  }
  auto tuple = std::make_unique<ItemsExpr>(ExprKind::kTuple, line);
  tuple->items = std::move(args);
  return ExprPtr(std::move(tuple));
}

Result<ExprPtr> Parser::parse_list() {
  const int line = next().line;
  NestingGuard guard(&nesting_);
  if (guard.too_deep()) return error(line, "expression nests too deeply");
  auto list = std::make_unique<ItemsExpr>(ExprKind::kList, line);
  while (current().type != Tok::kRBracket) {
    if (!list->items.empty()) JINJA_RETURN_IF_ERROR(expect(Tok::kComma).status());
    if (current().type == Tok::kRBracket) break;
    JINJA_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
    list->items.push_back(std::move(item));
  }
  JINJA_RETURN_IF_ERROR(expect(Tok::kRBracket).status());
  return ExprPtr(std::move(list));
}

Result<ExprPtr> Parser::parse_dict() {
  const int line = next().line;
  NestingGuard guard(&nesting_);
  if (guard.too_deep()) return error(line, "expression nests too deeply");
  auto dict = std::make_unique<DictExpr>(line);
  while (current().type != Tok::kRBrace) {
    if (!dict->items.empty()) JINJA_RETURN_IF_ERROR(expect(Tok::kComma).status());
    if (current().type == Tok::kRBrace) break;
    JINJA_ASSIGN_OR_RETURN(ExprPtr key, parse_expression());
    JINJA_RETURN_IF_ERROR(expect(Tok::kColon).status());
    JINJA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    dict->items.emplace_back(std::move(key), std::move(value));
  }
  JINJA_RETURN_IF_ERROR(expect(Tok::kRBrace).status());
  return ExprPtr(std::move(dict));
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (current().type == Tok::kDot || current().type == Tok::kLBracket) {
      JINJA_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (current().type == Tok::kLParen) {
      JINJA_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (current().type == Tok::kPipe) {
      JINJA_ASSIGN_OR_RETURN(node, parse_filter(std::move(node), false));
    } else if (is_name("is")) {
      JINJA_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (current().type == Tok::kLParen) {
      JINJA_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::parse_subscript(ExprPtr node) {
  const Token& token = next();
  const int line = token.line;
  if (token.type == Tok::kDot) {
    const Token& attr = next();
    if (attr.type == Tok::kName) {
      return ExprPtr(std::make_unique<AttributeExpr>(line, std::move(node), attr.text));
    }
    if (attr.type != Tok::kInteger) return error(attr.line, "expected name or number");
    auto index = std::make_unique<LiteralExpr>(line, Value::integer(attr.integer));
    return ExprPtr(std::make_unique<ItemExpr>(line, std::move(node), std::move(index)));
  }
  std::vector<ExprPtr> args;
  while (current().type != Tok::kRBracket) {
    if (!args.empty()) JINJA_RETURN_IF_ERROR(expect(Tok::kComma).status());
    JINJA_ASSIGN_OR_RETURN(ExprPtr arg, parse_subscribed());
    args.push_back(std::move(arg));
  }
  JINJA_RETURN_IF_ERROR(expect(Tok::kRBracket).status());
  ExprPtr index;
  if (args.size() == 1) {
    index = std::move(args[0]);
  } else {
    auto tuple = std::make_unique<ItemsExpr>(ExprKind::kTuple, line);
    tuple->items = std::move(args);
    index = std::move(tuple);
  }
  return ExprPtr(std::make_unique<ItemExpr>(line, std::move(node), std::move(index)));
}

Result<ExprPtr> Parser::parse_subscribed() {
  const int line = current().line;
  auto slice = std::make_unique<SliceExpr>(line);
  if (!skip_if(Tok::kColon)) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr node, parse_expression());
    if (current().type != Tok::kColon) return node;
    next();
    slice->start = std::move(node);
  }
  if (current().type != Tok::kColon && current().type != Tok::kRBracket &&
      current().type != Tok::kComma) {
    JINJA_ASSIGN_OR_RETURN(slice->stop, parse_expression());
  }
  if (skip_if(Tok::kColon)) {
    if (current().type != Tok::kRBracket && current().type != Tok::kComma) {
      JINJA_ASSIGN_OR_RETURN(slice->step, parse_expression());
    }
  }
  return ExprPtr(std::move(slice));
}

Status Parser::parse_call_args(CallArgs* args) {
  JINJA_RETURN_IF_ERROR(expect(Tok::kLParen).status());
  bool require_comma = false;
  while (current().type != Tok::kRParen) {
    if (require_comma) {
      JINJA_RETURN_IF_ERROR(expect(Tok::kComma).status());
      if (current().type == Tok::kRParen) break;
    }
    if (current().type == Tok::kMul || current().type == Tok::kPow) {
      return error(current().line, "*args and **kwargs in calls are not supported");
    }
    if (current().type == Tok::kName && look().type == Tok::kAssign) {
      const std::string_view key = next().text;
      next();
      JINJA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      args->keywords.emplace_back(key, std::move(value));
    } else {
      if (!args->keywords.empty()) {
        return error(current().line, "invalid syntax for function call expression");
      }
      JINJA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      args->positional.push_back(std::move(value));
    }
    require_comma = true;
  }
  JINJA_RETURN_IF_ERROR(expect(Tok::kRParen).status());
  return absl::OkStatus();
}

Result<ExprPtr> Parser::parse_call(ExprPtr node) {
  auto call = std::make_unique<CallExpr>(current().line);
  JINJA_RETURN_IF_ERROR(parse_call_args(&call->args));
  call->callee = std::move(node);
  return ExprPtr(std::move(call));
}

Result<std::unique_ptr<FilterExpr>> Parser::parse_one_filter(ExprPtr node) {
  JINJA_ASSIGN_OR_RETURN(const Token* name, expect(Tok::kName));
  auto filter = std::make_unique<FilterExpr>(name->line);
  std::string dotted(name->text);
  while (skip_if(Tok::kDot)) {
    JINJA_ASSIGN_OR_RETURN(const Token* part, expect(Tok::kName));
    dotted += "." + std::string(part->text);
  }
  filter->name = keep(dotted);
  filter->fn = find_filter(filter->name);
  if (filter->fn == nullptr) {
    if (is_jinja_filter(filter->name)) {
      return error(name->line, "the filter '" + dotted + "' is not supported");
    }
    return error(name->line, "No filter named '" + dotted + "'.");
  }
  if (current().type == Tok::kLParen) JINJA_RETURN_IF_ERROR(parse_call_args(&filter->args));
  filter->operand = std::move(node);
  return filter;
}

Result<ExprPtr> Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (current().type == Tok::kPipe || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    JINJA_ASSIGN_OR_RETURN(node, parse_one_filter(std::move(node)));
  }
  return node;
}

Result<ExprPtr> Parser::parse_test(ExprPtr node) {
  const int line = next().line;  // `is`
  const bool negated = skip_if_name("not");
  JINJA_ASSIGN_OR_RETURN(const Token* name, expect(Tok::kName));
  auto test = std::make_unique<TestExpr>(line);
  std::string dotted(name->text);
  while (skip_if(Tok::kDot)) {
    JINJA_ASSIGN_OR_RETURN(const Token* part, expect(Tok::kName));
    dotted += "." + std::string(part->text);
  }
  test->name = keep(dotted);
  test->fn = find_test(test->name);
  if (test->fn == nullptr) return error(line, "No test named '" + dotted + "'.");
  const Tok t = current().type;
  if (t == Tok::kLParen) {
    JINJA_RETURN_IF_ERROR(parse_call_args(&test->args));
  } else if ((t == Tok::kName || t == Tok::kString || t == Tok::kInteger || t == Tok::kFloat ||
              t == Tok::kLBracket || t == Tok::kLBrace) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) return error(current().line, "You cannot chain multiple tests with is");
    JINJA_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
    JINJA_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
    test->args.positional.push_back(std::move(arg));
  }
  test->operand = std::move(node);
  if (negated) return ExprPtr(std::make_unique<UnaryExpr>(ExprKind::kNot, line, std::move(test)));
  return ExprPtr(std::move(test));
}

}  // namespace kvgate::jinja
