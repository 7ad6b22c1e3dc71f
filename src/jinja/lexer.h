// The template source as tokens, cut exactly where jinja2's lexer cuts it with trim_blocks and
// lstrip_blocks on: text between tags (with `-`/`+` whitespace control applied), tag delimiters,
// and the names, literals and operators inside tags. Comments and {% raw %} markers are gone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"

namespace kvgate::jinja {

enum class Tok : uint8_t {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  // Operators.
  kAdd,
  kSub,
  kDiv,
  kFloorDiv,
  kMul,
  kMod,
  kPow,
  kTilde,
  kLBracket,
  kRBracket,
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kEq,
  kNe,
  kGt,
  kGe,
  kLt,
  kLe,
  kAssign,
  kDot,
  kColon,
  kPipe,
  kComma,
  kSemicolon,
  kEof,
};

struct Token {
  Tok type;
  int line;
  std::string_view text;  // kData: the text; kName: the name; operators: the operator
  std::string string;     // kString: the literal's value (escapes decoded)
  int64_t integer = 0;
  double number = 0;
};

// A description of a token for errors ("end of statement block", "'x'").
std::string describe(const Token& t);

// jinja2 normalizes every newline to \n and drops one trailing newline before lexing.
std::string normalize_source(std::string_view source);

// Tokens of `source` (already normalized; the tokens view into it), ending with kEof. Errors
// are "<origin>:<line>: <what>".
Result<std::vector<Token>> tokenize(std::string_view source, std::string_view origin);

}  // namespace kvgate::jinja
