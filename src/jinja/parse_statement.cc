// jinja2's statement tags (with the loop-controls extension's break/continue and transformers'
// generation tag), and the parser's token helpers.
#include "jinja/globals.h"
#include "jinja/parser.h"
#include "jinja/status_macros.h"

namespace kvgate::jinja {
namespace {

// Tags jinja2 knows that have no meaning for a chat template rendered from a string.
constexpr std::string_view kUnsupportedTags[] = {"block",     "extends",    "include", "import",
                                                 "from",      "autoescape", "do",      "trans",
                                                 "pluralize", "endtrans"};

// Far more than any template needs (Python itself refuses 20 nested loops); bounds the parser's
// and the evaluator's recursion.
constexpr int kMaxBlockDepth = 100;

}  // namespace

Parser::Parser(std::vector<Token> tokens, detail::Program* program)
    : tokens_(std::move(tokens)), program_(program) {}

Status Parser::parse() {
  program_->loop_id = intern("loop");
  JINJA_ASSIGN_OR_RETURN(program_->body, subparse({}));
  if (current().type != Tok::kEof) return unexpected(current());
  program_->globals.reserve(program_->names.size());
  for (std::string_view name : program_->names) {
    program_->globals.push_back(global_named(name));
  }
  return absl::OkStatus();
}

Status Parser::error(int line, std::string what) const {
  return absl::InvalidArgumentError(program_->origin + ":" + std::to_string(line) + ": " + what);
}

Status Parser::unexpected(const Token& t) const {
  if (t.type == Tok::kEof) return error(t.line, "unexpected end of template");
  return error(t.line, "unexpected " + describe(t));
}

NameId Parser::intern(std::string_view name) {
  auto [it, inserted] =
      program_->name_ids.try_emplace(name, static_cast<NameId>(program_->names.size()));
  if (inserted) program_->names.push_back(name);
  return it->second;
}

std::string_view Parser::keep(std::string s) {
  program_->strings.push_back(std::move(s));
  return program_->strings.back();
}

bool Parser::skip_if(Tok type) {
  if (current().type != type) return false;
  next();
  return true;
}

bool Parser::skip_if_name(std::string_view name) {
  if (!is_name(name)) return false;
  next();
  return true;
}

Result<const Token*> Parser::expect(Tok type) {
  if (current().type == type) return &next();
  Token wanted{type, 0, {}, {}, 0, 0};
  const std::string want = type == Tok::kName ? "name" : describe(wanted);
  if (current().type == Tok::kEof) {
    return error(current().line, "unexpected end of template, expected " + want + ".");
  }
  return error(current().line, "expected token " + want + ", got " + describe(current()));
}

Status Parser::expect_name(std::string_view name) {
  if (skip_if_name(name)) return absl::OkStatus();
  if (current().type == Tok::kEof) {
    return error(current().line,
                 "unexpected end of template, expected '" + std::string(name) + "'.");
  }
  return error(current().line,
               "expected token '" + std::string(name) + "', got " + describe(current()));
}

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_end_names) const {
  const Tok t = current().type;
  if (t == Tok::kVariableEnd || t == Tok::kBlockEnd || t == Tok::kRParen) return true;
  for (std::string_view name : extra_end_names) {
    if (is_name(name)) return true;
  }
  return false;
}

Result<Body> Parser::subparse(std::initializer_list<std::string_view> end_tags) {
  Body body;
  while (current().type != Tok::kEof) {
    const Token& token = current();
    if (token.type == Tok::kData) {
      body.push_back(std::make_unique<TextStmt>(token.line, token.text));
      next();
    } else if (token.type == Tok::kVariableBegin) {
      next();
      JINJA_ASSIGN_OR_RETURN(ExprPtr expr, parse_tuple(false, true, {}, false));
      mark_folds(&expr);
      auto output = std::make_unique<OutputStmt>(token.line, std::move(expr));
      output->constant = is_constant(*output->expr);
      body.push_back(std::move(output));
      JINJA_RETURN_IF_ERROR(expect(Tok::kVariableEnd).status());
    } else if (token.type == Tok::kBlockBegin) {
      next();
      for (std::string_view tag : end_tags) {
        if (is_name(tag)) return body;
      }
      JINJA_RETURN_IF_ERROR(parse_statement(&body));
      JINJA_RETURN_IF_ERROR(expect(Tok::kBlockEnd).status());
    } else {
      return unexpected(token);
    }
  }
  return body;
}

Result<Body> Parser::parse_statements(std::initializer_list<std::string_view> end_tags,
                                      bool drop_needle) {
  skip_if(Tok::kColon);
  JINJA_RETURN_IF_ERROR(expect(Tok::kBlockEnd).status());
  JINJA_ASSIGN_OR_RETURN(Body body, subparse(end_tags));
  if (current().type == Tok::kEof) {
    std::string wanted;
    for (std::string_view tag : end_tags) {
      wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
    }
    return error(current().line, "Unexpected end of template. Jinja was looking for " + wanted);
  }
  if (drop_needle) next();
  return body;
}

Status Parser::parse_statement(Body* out) {
  const Token& token = current();
  if (token.type != Tok::kName) return error(token.line, "tag name expected");
  if (block_depth_ >= kMaxBlockDepth) return error(token.line, "blocks nest too deeply");
  ++block_depth_;
  Status s = parse_tag(token, out);
  --block_depth_;
  return s;
}

Status Parser::parse_tag(const Token& token, Body* out) {
  const std::string_view tag = token.text;
  Result<StmtPtr> stmt = StmtPtr();
  if (tag == "if") {
    stmt = parse_if();
  } else if (tag == "for") {
    stmt = parse_for();
  } else if (tag == "set") {
    stmt = parse_set();
  } else if (tag == "macro") {
    stmt = parse_macro();
  } else if (tag == "call") {
    stmt = parse_call_block();
  } else if (tag == "filter") {
    stmt = parse_filter_block();
  } else if (tag == "with") {
    stmt = parse_with();
  } else if (tag == "print") {
    stmt = parse_print();
  } else if (tag == "generation") {
    stmt = parse_generation();
  } else if (tag == "break" || tag == "continue") {
    stmt = parse_loop_control();
  } else {
    for (std::string_view unsupported : kUnsupportedTags) {
      if (tag == unsupported) {
        return error(token.line, "the tag '" + std::string(tag) + "' is not supported");
      }
    }
    return error(token.line, "Encountered unknown tag '" + std::string(tag) + "'.");
  }
  if (!stmt.ok()) return stmt.status();
  out->push_back(std::move(*stmt));
  return absl::OkStatus();
}

Result<StmtPtr> Parser::parse_if() {
  auto node = std::make_unique<IfStmt>(next().line);
  while (true) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr test, parse_tuple(false, false, {}, false));
    JINJA_ASSIGN_OR_RETURN(Body body, parse_statements({"elif", "else", "endif"}, false));
    node->branches.emplace_back(std::move(test), std::move(body));
    const Token& token = next();
    if (token.text == "elif") continue;
    if (token.text == "else") {
      JINJA_ASSIGN_OR_RETURN(node->otherwise, parse_statements({"endif"}, true));
    }
    break;
  }
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_for() {
  auto node = std::make_unique<ForStmt>(next().line);
  JINJA_ASSIGN_OR_RETURN(node->target, parse_assign_target({"in"}));
  if (node->target.is_tuple ? false : node->target.name == "loop") {
    return error(node->line, "Can't assign to special loop variable in for-loop target");
  }
  JINJA_RETURN_IF_ERROR(expect_name("in"));
  JINJA_ASSIGN_OR_RETURN(node->iterable, parse_tuple(false, false, {"recursive"}, false));
  if (skip_if_name("if")) {
    JINJA_ASSIGN_OR_RETURN(node->filter, parse_expression());
  }
  if (is_name("recursive")) return error(current().line, "recursive loops are not supported");
  ++loop_depth_;
  auto body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  if (!body.ok()) return body.status();
  node->body = std::move(*body);
  if (next().text == "else") {
    JINJA_ASSIGN_OR_RETURN(node->otherwise, parse_statements({"endfor"}, true));
  }
  return StmtPtr(std::move(node));
}

Result<Target> Parser::to_target(const Expr& e, int line) {
  Target t;
  if (e.kind == ExprKind::kName) {
    const auto& name = static_cast<const NameExpr&>(e);
    t.id = name.id;
    t.name = name.name;
    return t;
  }
  if (e.kind == ExprKind::kTuple) {
    t.is_tuple = true;
    for (const ExprPtr& item : static_cast<const ItemsExpr&>(e).items) {
      JINJA_ASSIGN_OR_RETURN(Target sub, to_target(*item, line));
      t.items.push_back(std::move(sub));
    }
    return t;
  }
  return error(line, "can't assign to this expression");
}

Result<Target> Parser::parse_assign_target(
    std::initializer_list<std::string_view> extra_end_names) {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr expr, parse_tuple(true, true, extra_end_names, false));
  return to_target(*expr, line);
}

Result<StmtPtr> Parser::parse_set() {
  const int line = next().line;
  if (current().type == Tok::kName && look().type == Tok::kDot) {
    auto node = std::make_unique<SetAttributeStmt>(line);
    node->object_name = next().text;
    node->object = intern(node->object_name);
    next();
    JINJA_ASSIGN_OR_RETURN(const Token* attr, expect(Tok::kName));
    node->attribute = attr->text;
    if (!skip_if(Tok::kAssign)) {
      return error(line, "{% set namespace.attribute %} blocks are not supported");
    }
    JINJA_ASSIGN_OR_RETURN(node->value, parse_tuple(false, true, {}, false));
    return StmtPtr(std::move(node));
  }
  JINJA_ASSIGN_OR_RETURN(Target target, parse_assign_target({}));
  if (skip_if(Tok::kAssign)) {
    auto node = std::make_unique<SetStmt>(line);
    node->target = std::move(target);
    JINJA_ASSIGN_OR_RETURN(node->value, parse_tuple(false, true, {}, false));
    return StmtPtr(std::move(node));
  }
  auto node = std::make_unique<SetBlockStmt>(line);
  node->target = std::move(target);
  while (skip_if(Tok::kPipe)) {
    JINJA_ASSIGN_OR_RETURN(auto filter, parse_one_filter(nullptr));
    node->filters.push_back(std::move(filter));
  }
  JINJA_ASSIGN_OR_RETURN(node->body, parse_statements({"endset"}, true));
  return StmtPtr(std::move(node));
}

Status Parser::parse_signature(MacroDef* def) {
  JINJA_RETURN_IF_ERROR(expect(Tok::kLParen).status());
  bool has_default = false;
  while (current().type != Tok::kRParen) {
    if (!def->params.empty()) JINJA_RETURN_IF_ERROR(expect(Tok::kComma).status());
    JINJA_ASSIGN_OR_RETURN(const Token* name, expect(Tok::kName));
    Param p;
    p.name = name->text;
    p.id = intern(p.name);
    if (skip_if(Tok::kAssign)) {
      JINJA_ASSIGN_OR_RETURN(p.default_value, parse_expression());
      has_default = true;
    } else if (has_default) {
      return error(name->line, "non-default argument follows default argument");
    }
    def->params.push_back(std::move(p));
  }
  return expect(Tok::kRParen).status();
}

Result<MacroDef> Parser::parse_macro_body(MacroDef def, std::string_view end_tag) {
  macros_.push_back(&def);
  const int saved_loop_depth = std::exchange(loop_depth_, 0);
  auto body = parse_statements({end_tag}, true);
  loop_depth_ = saved_loop_depth;
  macros_.pop_back();
  if (!body.ok()) return body.status();
  def.body = std::move(*body);
  return def;
}

Result<StmtPtr> Parser::parse_macro() {
  auto node = std::make_unique<MacroStmt>(next().line);
  JINJA_ASSIGN_OR_RETURN(const Token* name, expect(Tok::kName));
  MacroDef def;
  def.name = name->text;
  node->id = intern(def.name);
  JINJA_RETURN_IF_ERROR(parse_signature(&def));
  JINJA_ASSIGN_OR_RETURN(node->def, parse_macro_body(std::move(def), "endmacro"));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_call_block() {
  auto node = std::make_unique<CallBlockStmt>(next().line);
  MacroDef def;
  def.name = "caller";
  if (current().type == Tok::kLParen) JINJA_RETURN_IF_ERROR(parse_signature(&def));
  JINJA_ASSIGN_OR_RETURN(ExprPtr call, parse_expression());
  if (call->kind != ExprKind::kCall) return error(node->line, "expected call");
  node->call.reset(static_cast<CallExpr*>(call.release()));
  JINJA_ASSIGN_OR_RETURN(node->caller, parse_macro_body(std::move(def), "endcall"));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_filter_block() {
  auto node = std::make_unique<FilterBlockStmt>(next().line);
  bool first = true;
  while (first || skip_if(Tok::kPipe)) {
    first = false;
    JINJA_ASSIGN_OR_RETURN(auto filter, parse_one_filter(nullptr));
    node->filters.push_back(std::move(filter));
  }
  JINJA_ASSIGN_OR_RETURN(node->body, parse_statements({"endfilter"}, true));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_with() {
  auto node = std::make_unique<WithStmt>(next().line);
  while (current().type != Tok::kBlockEnd) {
    if (!node->assignments.empty()) JINJA_RETURN_IF_ERROR(expect(Tok::kComma).status());
    JINJA_ASSIGN_OR_RETURN(Target target, parse_assign_target({}));
    JINJA_RETURN_IF_ERROR(expect(Tok::kAssign).status());
    JINJA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    node->assignments.emplace_back(std::move(target), std::move(value));
  }
  JINJA_ASSIGN_OR_RETURN(node->body, parse_statements({"endwith"}, true));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_print() {
  const int line = next().line;
  // {% print a, b %} writes each expression (not a tuple); a body of outputs does that.
  auto node = std::make_unique<ScopeStmt>(line);
  while (current().type != Tok::kBlockEnd) {
    if (!node->body.empty()) JINJA_RETURN_IF_ERROR(expect(Tok::kComma).status());
    JINJA_ASSIGN_OR_RETURN(ExprPtr expr, parse_expression());
    node->body.push_back(std::make_unique<OutputStmt>(line, std::move(expr)));
  }
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_generation() {
  auto node = std::make_unique<ScopeStmt>(next().line);
  JINJA_ASSIGN_OR_RETURN(node->body, parse_statements({"endgeneration"}, true));
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_loop_control() {
  const Token& token = next();
  if (loop_depth_ == 0) {
    return error(token.line, "'" + std::string(token.text) + "' outside a loop");
  }
  return StmtPtr(std::make_unique<Stmt>(
      token.text == "break" ? StmtKind::kBreak : StmtKind::kContinue, token.line));
}

}  // namespace kvgate::jinja
