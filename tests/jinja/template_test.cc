// Unit tests of the jinja module: whitespace control, scoping, loops, filters, tests, methods,
// undefined values, Python's str()/repr(), errors and their lines, and concurrent renders. The
// byte-for-byte comparison with Python's jinja2 is reference_test.cc.
#include "kvgate/jinja/template.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace kvgate::jinja {
namespace {

// The rendering, or "error: <message>" (from parse or render).
std::string render(std::string_view source, std::string_view context = "{}") {
  auto t = Template::parse(source, "test.jinja");
  if (!t.ok()) return "error: " + std::string(message_of(t.status()));
  auto out = t->render(context);
  if (!out.ok()) return "error: " + std::string(message_of(out.status()));
  return *out;
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

TEST(TemplateTest, RendersVariablesFromTheContext) {
  EXPECT_EQ(render("Hello {{ name }}!", R"({"name": "world"})"), "Hello world!");
  EXPECT_EQ(render("{{ messages[0].content }}|{{ messages[0]['role'] }}",
                   R"({"messages": [{"role": "user", "content": "hi"}]})"),
            "hi|user");
}

TEST(TemplateTest, TrimBlocksDropsTheNewlineAfterATag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nend"), "yes\nend");
  // Not after an expression.
  EXPECT_EQ(render("{{ 'a' }}\nb"), "a\nb");
}

TEST(TemplateTest, LstripBlocksRemovesIndentationBeforeATag) {
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n"), "  x\n");
  // Not when other text precedes the tag on its line, and not with `+`.
  EXPECT_EQ(render("a {% if true %}b{% endif %}"), "a b");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  // Comments too.
  EXPECT_EQ(render("  {# note #}\nx"), "x");
}

TEST(TemplateTest, DashStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(render("a  \n {{- 'b' -}} \n  c"), "abc");
  EXPECT_EQ(render("a\n\n{%- if true -%}\n\n b {%- endif %}"), "ab");
  EXPECT_EQ(render("a {#- comment -#} b"), "ab");
}

TEST(TemplateTest, RawBlocksKeepTheirText) {
  EXPECT_EQ(render("{% raw %}{{ x }} {% if %}{% endraw %}"), "{{ x }} {% if %}");
}

TEST(TemplateTest, OneTrailingNewlineOfTheSourceIsDropped) {
  EXPECT_EQ(render("a\n"), "a");
  EXPECT_EQ(render("a\n\n"), "a\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(TemplateTest, SetInsideALoopDoesNotLeakButSetInsideIfDoes) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + 10 %}{{ x }} "
                   "{% endfor %}{{ x }}"),
            "11 11 1");
  EXPECT_EQ(render("{% if true %}{% set y = 'in' %}{% endif %}{{ y }}"), "in");
}

TEST(TemplateTest, NamespacesCarryValuesOutOfLoops) {
  EXPECT_EQ(render("{% set ns = namespace(total=0) %}{% for i in range(4) %}"
                   "{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}"),
            "6");
  EXPECT_TRUE(starts_with(render("{% set x = 1 %}{% set x.y = 2 %}"),
                          "error: test.jinja:1: cannot assign attribute"));
}

TEST(TemplateTest, LoopVariables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} "
                   "{% endfor %}"),
            "1032TrueFalse3 2121FalseFalse3 3210FalseTrue3 ");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem|default('-') }}"
                   "{{ loop.nextitem|default('-') }}{{ loop.cycle('a', 'b') }} {% endfor %}"),
            "-2a 13b 2-a ");
}

TEST(TemplateTest, LoopFilterElseBreakContinueAndUnpacking) {
  EXPECT_EQ(render("{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}"),
            "13 33 53 ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}"
                   "{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "023");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                   R"({"d": {"z": 1, "a": 2}})"),
            "z=1;a=2;");
}

TEST(TemplateTest, MacrosWithDefaultsKeywordsAndCaller) {
  EXPECT_EQ(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}"
                   "{{ m(1) }} {{ m(1, 2) }} {{ m(b=3, a=4) }}"),
            "1B 12 43");
  EXPECT_EQ(render("{% macro tag(name) %}<{{ name }}>{{ caller() }}</{{ name }}>{% endmacro %}"
                   "{% call tag('b') %}bold{% endcall %}"),
            "<b>bold</b>");
  EXPECT_TRUE(starts_with(render("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
                          "error: test.jinja:1: macro 'm' takes not more than 1 argument(s)"));
}

TEST(TemplateTest, GenerationAndFilterBlocks) {
  EXPECT_EQ(render("{% generation %}kept {{ 1 }}{% endgeneration %}"), "kept 1");
  EXPECT_EQ(render("{% filter upper %}loud{% endfilter %}"), "LOUD");
  EXPECT_EQ(render("{% set t %}body {{ 2 }}{% endset %}[{{ t }}]"), "[body 2]");
}

TEST(TemplateTest, ValuesPrintAsPythonPrintsThem) {
  EXPECT_EQ(
      render("{{ true }} {{ none }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 10 / 4 }}"),
      "True None 1.0 0.30000000000000004 1e+16 1e-05 2.5");
  EXPECT_EQ(render("{{ ['a', 1, none, {'k': \"it's\"}] }} {{ (1,) }}"),
            "['a', 1, None, {'k': \"it's\"}] (1,)");
  EXPECT_EQ(render(R"({{ x }})", R"({"x": {"n": 1.5e300, "s": "a\nb", "l": []}})"),
            "{'n': 1.5e+300, 's': 'a\\nb', 'l': []}");
}

TEST(TemplateTest, ArithmeticFollowsPython) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'ab' * 2 }} "
                   "{{ [1] + [2] }} {{ 1 ~ 'a' }}"),
            "3 -4 2 1024 abab [1, 2] 1a");
  EXPECT_TRUE(starts_with(render("{{ 'a' + 1 }}"), "error: test.jinja:1: can only concatenate"));
  EXPECT_TRUE(starts_with(render("\n\n{{ 1 / 0 }}"), "error: test.jinja:3: division by zero"));
}

TEST(TemplateTest, UndefinedIsLenientUntilItsAttributesAreUsed) {
  EXPECT_EQ(render("[{{ nope }}]{{ nope is defined }}{{ nope|length }}{{ nope|default('d') }}"
                   "{% for x in nope %}x{% endfor %}{{ d.missing is defined }}",
                   R"({"d": {}})"),
            "[]False0dFalse");
  EXPECT_EQ(render("{{ nope.attr }}"), "error: test.jinja:1: 'nope' is undefined");
  EXPECT_EQ(render("{% if true %}\n{{ d.a.b }}{% endif %}", R"({"d": {}})"),
            "error: test.jinja:2: 'dict object' has no attribute 'a'");
}

TEST(TemplateTest, AnUndefinedValueNamesWhatWasLookedUpAfterTheNameIsGone) {
  // The looked-up names are strings the render built and dropped.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set x = ns['a' ~ 'b'] %}{{ x.foo }}"),
            "error: test.jinja:1: 'Namespace object' has no attribute 'ab'");
  EXPECT_EQ(render("{% set x = d['c' ~ 'd'] %}{{ x.foo }}", R"({"d": {}})"),
            "error: test.jinja:1: 'dict object' has no attribute 'cd'");
}

TEST(TemplateTest, FilterSelection) {
  EXPECT_EQ(render("{{ '  x  '|trim }}|{{ [3, 1, 2]|sort|join(',') }}|{{ [1, 1, 2]|unique|list }}|"
                   "{{ users|map(attribute='name')|join('/') }}|"
                   "{{ users|selectattr('age', 'gt', 20)|map(attribute='name')|list }}",
                   R"({"users": [{"name": "a", "age": 30}, {"name": "b", "age": 10}]})"),
            "x|1,2,3|[1, 2]|a/b|['a']");
  EXPECT_EQ(
      render("{{ 'a\nb'|indent(2, true) }}|{{ 'Hello World'|wordcount }}|{{ 3.14159|round(2) }}|"
             "{{ '42'|int + 1 }}|{{ {'b': 1, 'a': 2}|dictsort }}"),
      "  a\n  b|2|3.14|43|[('a', 2), ('b', 1)]");
}

TEST(TemplateTest, ToJsonIsJsonDumpsWithTransformersDefaults) {
  const std::string ctx = R"({"x": {"b": [1, 2.0, null, true], "a": "é\n\u0001"}})";
  EXPECT_EQ(render("{{ x|tojson }}", ctx), R"({"b": [1, 2.0, null, true], "a": "é\n\u0001"})");
  EXPECT_EQ(
      render("{{ x|tojson(indent=2, sort_keys=true) }}", ctx),
      "{\n  \"a\": \"é\\n\\u0001\",\n  \"b\": [\n    1,\n    2.0,\n    null,\n    true\n  ]\n}");
  EXPECT_EQ(render("{{ x|tojson(ensure_ascii=true, separators=(',', ':')) }}", ctx),
            R"({"b":[1,2.0,null,true],"a":"\u00e9\n\u0001"})");
}

TEST(TemplateTest, TestsWithAndWithoutArguments) {
  EXPECT_EQ(render("{{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ x is sameas false }} "
                   "{{ 'a' is string }} {{ 1 is number }} {{ d is mapping }} {{ none is none }} "
                   "{{ 2 is in [1, 2] }} {{ 3 is not odd }}",
                   R"({"x": false, "d": {}})"),
            "True False True True True True True True False");
}

TEST(TemplateTest, StringListAndDictMethods) {
  EXPECT_EQ(render("{{ s.startswith('<t') }} {{ s.split('>')[1] }} {{ s.strip('<>') }} "
                   "{{ s.replace('t', 'T') }} {{ ' a b '.split() }} {{ 'x'.upper() }}",
                   R"({"s": "<think>x"})"),
            "True x think>x <Think>x ['a', 'b'] X");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z', 0) }} {{ d.keys()|list }} {{ [1, 2].index(2) }}",
                   R"({"d": {"a": 1}})"),
            "1 0 ['a'] 1");
}

TEST(TemplateTest, TheSandboxBlocksMutatingMethods) {
  EXPECT_EQ(render("{{ l.append }}", R"({"l": []})"), "");
  EXPECT_EQ(render("{{ l.append(1) }}", R"({"l": []})"),
            "error: test.jinja:1: access to attribute 'append' of 'list' object is unsafe (the "
            "sandbox blocks it)");
  EXPECT_TRUE(starts_with(render("{{ d.update({}) }}", R"({"d": {}})"), "error:"));
}

TEST(TemplateTest, RaiseExceptionFailsWithExactlyItsMessage) {
  EXPECT_EQ(render("a\n{{ raise_exception('Roles must alternate') }}"),
            "error: Roles must alternate");
  auto t = Template::parse("{{ raise_exception('x') }}", "t");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->render("{}").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TemplateTest, SyntaxErrorsNameTheOriginAndLine) {
  auto t = Template::parse("line one\n{% if x %}\n{{ 1 + }}", "chat.jinja");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(starts_with(std::string(message_of(t.status())), "chat.jinja:3: ")) << t.status();
  EXPECT_EQ(render("{% for x in y %}"),
            "error: test.jinja:1: Unexpected end of template. Jinja was looking for 'endfor' or "
            "'else'");
  EXPECT_EQ(render("{{ x|nosuch }}"), "error: test.jinja:1: No filter named 'nosuch'.");
  EXPECT_EQ(render("{% endif %}"), "error: test.jinja:1: Encountered unknown tag 'endif'.");
}

TEST(TemplateTest, WhatIsNotSupportedIsAnErrorNotADifferentOutput) {
  EXPECT_EQ(render("{% block b %}{% endblock %}"),
            "error: test.jinja:1: the tag 'block' is not supported");
  EXPECT_EQ(render("{% for x in y recursive %}{% endfor %}"),
            "error: test.jinja:1: recursive loops are not supported");
  EXPECT_EQ(render("{{ x|groupby('a') }}"),
            "error: test.jinja:1: the filter 'groupby' is not supported");
  EXPECT_TRUE(starts_with(render("{{ 99999999999999999999 }}"), "error: test.jinja:1: integer"));
  EXPECT_TRUE(starts_with(render("{{ 9223372036854775807 + 1 }}"), "error: test.jinja:1: integer"));
  // Python would print the objects' addresses.
  EXPECT_TRUE(starts_with(render("{{ [1]|select('odd') }}"), "error: test.jinja:1: cannot print"));
  EXPECT_TRUE(starts_with(render("{{ 'x'.upper }}"), "error: test.jinja:1: cannot print"));
}

TEST(TemplateTest, GeneratorsAreSingleUseAndHaveNoLength) {
  EXPECT_EQ(render("{% set g = [1, 2, 3]|select('odd') %}{{ g|list }}{{ g|list }}"), "[1, 3][]");
  EXPECT_TRUE(starts_with(render("{{ [1]|map('string')|length }}"),
                          "error: test.jinja:1: object of type 'generator' has no len()"));
}

TEST(TemplateTest, ContextJsonKeepsKeyOrderIntegersAndTheLastRepeatedKey) {
  EXPECT_EQ(render("{{ d }} {{ d.n is integer }} {{ d.f is float }}",
                   R"({"d": {"z": 1, "a": 2, "z": 3, "n": 7, "f": 7.0}})"),
            "{'z': 3, 'a': 2, 'n': 7, 'f': 7.0} True True");
}

TEST(TemplateTest, ABadContextIsAnError) {
  auto t = Template::parse("{{ x }}", "t");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->render("{not json").ok());
  EXPECT_FALSE(t->render("[1, 2]").ok());
  EXPECT_FALSE(t->render(R"({"x": 123456789012345678901234567890})").ok());
}

TEST(TemplateTest, CopiesShareTheParsedTemplateAndRenderConcurrently) {
  auto parsed = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "{{ m.content|upper }}{% if not loop.last %},{% endif %}{% endfor %}={{ ns.n }}",
      "t");
  ASSERT_TRUE(parsed.ok());
  const Template copy = *parsed;
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string ctx = R"({"messages": [{"content": "a)" + std::to_string(t) +
                                R"("}, {"content": "b)" + std::to_string(i) + R"("}]})";
        const std::string want = "A" + std::to_string(t) + ",B" + std::to_string(i) + "=2";
        auto out = (t % 2 ? copy : *parsed).render(ctx);
        if (!out.ok() || *out != want) ++failures[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace kvgate::jinja
