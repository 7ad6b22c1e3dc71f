// The parsed template: expression and statement nodes, and the Program that owns them with the
// template's names (interned to ids) and literal strings. Immutable once parsed.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "jinja/operators.h"
#include "jinja/value.h"

namespace kvgate::jinja {

using NameId = uint32_t;

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind : uint8_t {
  kLiteral,
  kName,
  kList,
  kTuple,
  kDict,
  kNot,
  kNegate,
  kPositive,
  kBinary,
  kAnd,
  kOr,
  kConcat,
  kCompare,
  kCondition,
  kAttribute,
  kItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kFolded,
};

struct Expr {
  Expr(ExprKind kind, int line) : kind(kind), line(line) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
};

struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string_view, ExprPtr>> keywords;
};

struct LiteralExpr : Expr {
  LiteralExpr(int line, Value value) : Expr(ExprKind::kLiteral, line), value(std::move(value)) {}
  Value value;  // scalars and borrowed strings only: shared by every render
};

struct NameExpr : Expr {
  NameExpr(int line, NameId id, std::string_view name)
      : Expr(ExprKind::kName, line), id(id), name(name) {}
  NameId id;
  std::string_view name;
};

// kList, kTuple; kConcat (~), kAnd, kOr use `items` too.
struct ItemsExpr : Expr {
  using Expr::Expr;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int line) : Expr(ExprKind::kDict, line) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// kNot, kNegate, kPositive.
struct UnaryExpr : Expr {
  UnaryExpr(ExprKind kind, int line, ExprPtr operand)
      : Expr(kind, line), operand(std::move(operand)) {}
  ExprPtr operand;
};

struct BinaryExpr : Expr {
  BinaryExpr(int line, BinaryOp op, ExprPtr left, ExprPtr right)
      : Expr(ExprKind::kBinary, line), op(op), left(std::move(left)), right(std::move(right)) {}
  BinaryOp op;
  ExprPtr left, right;
};

struct CompareExpr : Expr {
  explicit CompareExpr(int line) : Expr(ExprKind::kCompare, line) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct ConditionExpr : Expr {
  explicit ConditionExpr(int line) : Expr(ExprKind::kCondition, line) {}
  ExprPtr test, then, otherwise;  // otherwise may be null: undefined
};

struct AttributeExpr : Expr {
  AttributeExpr(int line, ExprPtr object, std::string_view name)
      : Expr(ExprKind::kAttribute, line), object(std::move(object)), name(name) {}
  ExprPtr object;
  std::string_view name;
};

struct ItemExpr : Expr {
  ItemExpr(int line, ExprPtr object, ExprPtr index)
      : Expr(ExprKind::kItem, line), object(std::move(object)), index(std::move(index)) {}
  ExprPtr object, index;  // index may be a SliceExpr
};

struct SliceExpr : Expr {
  explicit SliceExpr(int line) : Expr(ExprKind::kSlice, line) {}
  ExprPtr start, stop, step;  // each may be null
};

struct CallExpr : Expr {
  explicit CallExpr(int line) : Expr(ExprKind::kCall, line) {}
  ExprPtr callee;
  CallArgs args;
};

class Evaluator;
using FilterFn = Result<Value> (*)(Evaluator& ev, const Value& operand, Args& args);
using TestFn = Result<bool> (*)(Evaluator& ev, const Value& operand, Args& args);

struct FilterExpr : Expr {
  explicit FilterExpr(int line) : Expr(ExprKind::kFilter, line) {}
  ExprPtr operand;  // null in {% filter %} and {% set %} blocks: the body's text
  std::string_view name;
  FilterFn fn = nullptr;
  CallArgs args;
};

struct TestExpr : Expr {
  explicit TestExpr(int line) : Expr(ExprKind::kTest, line) {}
  ExprPtr operand;
  std::string_view name;
  TestFn fn = nullptr;
  CallArgs args;
};

// A literal-only expression holding a slice, which jinja2's compiler evaluates ahead ("folds"):
// there a slice goes through the sandbox's getitem (a failing one is undefined), and the result is
// kept if Python can write it back as a literal; otherwise it runs as written (a failing slice is
// an error).
struct FoldedExpr : Expr {
  FoldedExpr(int line, ExprPtr inner) : Expr(ExprKind::kFolded, line), inner(std::move(inner)) {}
  ExprPtr inner;
};

// An assignment target: a name, or a tuple of targets to unpack into.
struct Target {
  bool is_tuple = false;
  NameId id = 0;
  std::string_view name;
  std::vector<Target> items;
};

enum class StmtKind : uint8_t {
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetAttribute,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kScope,  // {% generation %}: its body in a scope of its own
  kBreak,
  kContinue,
};

struct Stmt {
  Stmt(StmtKind kind, int line) : kind(kind), line(line) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};

struct TextStmt : Stmt {
  TextStmt(int line, std::string_view text) : Stmt(StmtKind::kText, line), text(text) {}
  std::string_view text;
};

struct OutputStmt : Stmt {
  OutputStmt(int line, ExprPtr expr) : Stmt(StmtKind::kOutput, line), expr(std::move(expr)) {}
  ExprPtr expr;
  // Made of literals only: jinja2 evaluates it when compiling, whatever its value (FoldedExpr).
  bool constant = false;
};

struct IfStmt : Stmt {
  explicit IfStmt(int line) : Stmt(StmtKind::kIf, line) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
  Body otherwise;
};

struct ForStmt : Stmt {
  explicit ForStmt(int line) : Stmt(StmtKind::kFor, line) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`, may be null
  Body body;
  Body otherwise;
};

struct SetStmt : Stmt {
  explicit SetStmt(int line) : Stmt(StmtKind::kSet, line) {}
  Target target;
  ExprPtr value;
};

struct SetAttributeStmt : Stmt {
  explicit SetAttributeStmt(int line) : Stmt(StmtKind::kSetAttribute, line) {}
  NameId object = 0;
  std::string_view object_name, attribute;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int line) : Stmt(StmtKind::kSetBlock, line) {}
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;  // applied to the body's text in order
  Body body;
};

struct Param {
  NameId id = 0;
  std::string_view name;
  ExprPtr default_value;  // may be null
};

// What a macro (or a call block's caller) is: jinja2 gives it `varargs`, `kwargs` and `caller`
// only when its body mentions them.
struct MacroDef {
  std::string_view name;
  std::vector<Param> params;
  Body body;
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int line) : Stmt(StmtKind::kMacro, line) {}
  NameId id = 0;
  MacroDef def;
};

struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(int line) : Stmt(StmtKind::kCallBlock, line) {}
  MacroDef caller;
  std::unique_ptr<CallExpr> call;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int line) : Stmt(StmtKind::kFilterBlock, line) {}
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int line) : Stmt(StmtKind::kWith, line) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct ScopeStmt : Stmt {
  explicit ScopeStmt(int line) : Stmt(StmtKind::kScope, line) {}
  Body body;
};

}  // namespace kvgate::jinja

namespace kvgate::jinja::detail {

struct Program {
  std::string origin;
  std::string source;               // normalized; text nodes and names view into it
  std::deque<std::string> strings;  // string literals (escapes decoded), stable addresses
  Body body;
  std::vector<std::string_view> names;  // NameId -> name
  absl::flat_hash_map<std::string_view, NameId> name_ids;
  std::vector<Value> globals;  // NameId -> the global of that name, or undefined
  NameId loop_id = 0;          // the name `loop`
};

}  // namespace kvgate::jinja::detail
