// Tokens to the Program's nodes, with jinja2's grammar (its Parser, method for method): statement
// tags in parse_statement.cc, expressions in parse_expression.cc.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace kvgate::jinja {

class Parser {
 public:
  // `program` holds the source the tokens view into; parse() fills its body and names.
  Parser(std::vector<Token> tokens, detail::Program* program);
  Status parse();

 private:
  // Statements.
  Result<Body> subparse(std::initializer_list<std::string_view> end_tags);
  Result<Body> parse_statements(std::initializer_list<std::string_view> end_tags, bool drop_needle);
  Status parse_statement(Body* out);
  Status parse_tag(const Token& token, Body* out);
  Result<StmtPtr> parse_if();
  Result<StmtPtr> parse_for();
  Result<StmtPtr> parse_set();
  Result<StmtPtr> parse_macro();
  Result<StmtPtr> parse_call_block();
  Result<StmtPtr> parse_filter_block();
  Result<StmtPtr> parse_with();
  Result<StmtPtr> parse_print();
  Result<StmtPtr> parse_generation();
  Result<StmtPtr> parse_loop_control();
  Status parse_signature(MacroDef* def);
  Result<MacroDef> parse_macro_body(MacroDef def, std::string_view end_tag);
  Result<Target> parse_assign_target(std::initializer_list<std::string_view> extra_end_names);
  Result<Target> to_target(const Expr& e, int line);
  // Whether jinja2's compiler folds `e` to a constant (literals, operators, pure filters, tests).
  static bool is_constant(const Expr& e);
  // Wraps the constant subexpressions of `e` that slice in FoldedExpr.
  static void mark_folds(ExprPtr* e);

  // Expressions.
  Result<ExprPtr> parse_expression(bool with_condexpr = true);
  Result<ExprPtr> parse_condexpr();
  Result<ExprPtr> parse_or();
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  Result<ExprPtr> parse_compare();
  Result<ExprPtr> parse_math1();
  Result<ExprPtr> parse_concat();
  Result<ExprPtr> parse_math2();
  Result<ExprPtr> parse_pow();
  Result<ExprPtr> parse_unary(bool with_filter = true);
  Result<ExprPtr> parse_primary();
  // `simplified`: primaries only (assignment targets); `with_condexpr`: allow x if c else y.
  Result<ExprPtr> parse_tuple(bool simplified, bool with_condexpr,
                              std::initializer_list<std::string_view> extra_end_names,
                              bool explicit_parentheses);
  Result<ExprPtr> parse_list();
  Result<ExprPtr> parse_dict();
  Result<ExprPtr> parse_postfix(ExprPtr node);
  Result<ExprPtr> parse_filter_expr(ExprPtr node);
  Result<ExprPtr> parse_subscript(ExprPtr node);
  Result<ExprPtr> parse_subscribed();
  Status parse_call_args(CallArgs* args);
  Result<ExprPtr> parse_call(ExprPtr node);
  // `x | f(...) | g`; with `start_inline` the first filter has no `|` before it.
  Result<ExprPtr> parse_filter(ExprPtr node, bool start_inline);
  Result<std::unique_ptr<FilterExpr>> parse_one_filter(ExprPtr node);
  Result<ExprPtr> parse_test(ExprPtr node);

  // Tokens.
  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool is_name(std::string_view name) const {
    return current().type == Tok::kName && current().text == name;
  }
  bool skip_if(Tok type);
  bool skip_if_name(std::string_view name);
  Result<const Token*> expect(Tok type);
  Status expect_name(std::string_view name);
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end_names) const;

  Status error(int line, std::string what) const;
  Status unexpected(const Token& t) const;
  NameId intern(std::string_view name);
  std::string_view keep(std::string s);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  detail::Program* program_;
  // The macros (and call blocks) being parsed: a body mentioning varargs, kwargs or caller gets
  // them (jinja2 looks into nested macros too).
  std::vector<MacroDef*> macros_;
  int loop_depth_ = 0;
  int nesting_ = 0;      // expressions within expressions
  int block_depth_ = 0;  // tags within tags
};

}  // namespace kvgate::jinja
