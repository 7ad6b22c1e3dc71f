// Template: a Jinja2 template, rendered byte for byte as Python's jinja2 renders it in the
// environment Hugging Face transformers gives chat templates (the `chat_template` a model ships in
// its tokenizer_config.json): ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks,
// loop controls, the {% generation %} tag, transformers' `tojson`, `raise_exception` and
// `strftime_now`, and the default (lenient) Undefined.
//
// What a template may use (anything else fails with an error naming the line, when parsing where
// the source shows it, never with a different output):
//   syntax      {{ }}, {% %}, {# #}, `-` and `+` whitespace control, {% raw %}
//   statements  if/elif/else; for (else, unpacking, `if` filter, loop.*, break, continue); set
//               (names, tuples, namespace attributes, {% set %} blocks); macro with defaults,
//               varargs, kwargs and caller; call; filter blocks; with; print; generation
//   expressions Python's operators with jinja2's precedence, literals, slices, calls with keyword
//               arguments, filters and `is` tests, % and str.format() formatting; str, list and
//               dict methods (those the immutable sandbox blocks fail when called)
//   filters     abs attr capitalize center count d default dictsort e escape first float
//               forceescape format indent int items join last length list lower map max min
//               reject rejectattr replace reverse round safe select selectattr sort string sum
//               title tojson trim truncate unique upper wordcount
//   tests       boolean callable defined divisibleby eq equalto escaped even false filter float ge
//               greaterthan gt in integer iterable le lessthan lower lt mapping ne none number odd
//               sameas sequence string test true undefined upper == != < <= > >=
//   globals     range namespace dict cycler joiner raise_exception strftime_now
// Not supported: {% block %}, {% extends %}, {% include %}, {% import %}, recursive loops, *args
// and **kwargs in calls, the filters batch, slice, groupby, wordwrap, urlize, urlencode, xmlattr,
// striptags, filesizeformat, pprint, random, lipsum(), \N{...} escapes, complex numbers.
// Integers are 64-bit: where Python would grow one past that, rendering fails. Printing what
// Python prints with a memory address (a generator, a bound method) fails too.
//
// Threading: a parsed Template is immutable; render() may run on any number of threads at once.
// Each thread keeps one JSON parser for render(), as large as the largest context it parsed.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kvgate/core/result.h"

namespace kvgate::jinja {

namespace detail {
struct Program;
}

class Template {
 public:
  // Parses `source`. An error (syntax, or a construct not supported) is InvalidArgument and names
  // `origin` and the template line: "<origin>:<line>: <what>".
  static Result<Template> parse(std::string_view source, std::string_view origin);

  // Renders with the variables of `context_json`, a JSON object (e.g. {"messages": [...],
  // "tools": null, "add_generation_prompt": true, "bos_token": "<s>"}); its objects keep their
  // key order, integers stay integers. raise_exception("msg") in the template is
  // InvalidArgument whose message is exactly msg; any other runtime error (an attribute of an
  // undefined value, bad operand types, a blocked method) is InvalidArgument naming the line as
  // parse() does.
  Result<std::string> render(std::string_view context_json) const;

 private:
  explicit Template(std::shared_ptr<const detail::Program> program)
      : program_(std::move(program)) {}

  std::shared_ptr<const detail::Program> program_;
};

}  // namespace kvgate::jinja
