#include "kvgate/jinja/template.h"

#include <simdjson.h>

#include <exception>

#include "jinja/ast.h"
#include "jinja/evaluator.h"
#include "jinja/json.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/unicode.h"

namespace kvgate::jinja {

namespace {

// Nothing in the module throws on purpose; an allocation failing on an enormous input is turned
// into an error here rather than crossing the API.
template <class F>
auto without_exceptions(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(std::string("jinja: ") + e.what());
  }
}

}  // namespace

Result<Template> Template::parse(std::string_view source, std::string_view origin) {
  return without_exceptions([&]() -> Result<Template> {
    auto program = std::make_shared<detail::Program>();
    program->origin = std::string(origin);
    if (!valid_utf8(source)) {
      return absl::InvalidArgumentError(program->origin + ":1: the template is not valid UTF-8");
    }
    // The tokens and nodes view into program->source: it is set once and never moves.
    program->source = normalize_source(source);
    auto tokens = tokenize(program->source, program->origin);
    if (!tokens.ok()) return tokens.status();
    if (Status s = Parser(std::move(*tokens), program.get()).parse(); !s.ok()) return s;
    return Template(std::move(program));
  });
}

Result<std::string> Template::render(std::string_view context_json) const {
  return without_exceptions([&]() -> Result<std::string> {
    // One parser per thread, reused: its buffers stay allocated between renders, and the strings
    // of the context the render reads stay inside it until the render ends.
    thread_local simdjson::dom::parser parser;
    auto context = parse_json_object(context_json, &parser);
    if (!context.ok()) return context.status();
    Evaluator evaluator(*program_, *context);
    return evaluator.render(program_->source.size() + context_json.size());
  });
}

}  // namespace kvgate::jinja
