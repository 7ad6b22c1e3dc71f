// Label selectors as kubectl's -l and the API server take them: every operator, matching, the
// canonical text, and errors that say where and what.
#include "kvgate/kube/selector.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace kvgate::kube {
namespace {

using Labels = std::map<std::string, std::string>;

Selector parsed(std::string_view text) {
  Result<Selector> s = Selector::parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : Selector();
}

std::string error_of(std::string_view text) {
  Result<Selector> s = Selector::parse(text);
  EXPECT_FALSE(s.ok()) << text << " parsed as \"" << (s.ok() ? s->text() : "") << "\"";
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(SelectorTest, EmptyMatchesEverything) {
  for (const char* text : {"", "   "}) {
    const Selector s = parsed(text);
    EXPECT_TRUE(s.empty());
    EXPECT_TRUE(s.matches({}));
    EXPECT_TRUE(s.matches({{"app", "x"}}));
    EXPECT_EQ(s.text(), "");
  }
  EXPECT_TRUE(Selector().matches({{"a", "b"}}));
}

TEST(SelectorTest, Equality) {
  for (const char* text : {"app=engine", "app==engine", " app = engine "}) {
    const Selector s = parsed(text);
    EXPECT_TRUE(s.matches({{"app", "engine"}, {"role", "x"}})) << text;
    EXPECT_FALSE(s.matches({{"app", "router"}})) << text;
    EXPECT_FALSE(s.matches({})) << text;
    EXPECT_EQ(s.text(), "app=engine");
  }
  const Selector empty_value = parsed("app=");
  EXPECT_TRUE(empty_value.matches({{"app", ""}}));
  EXPECT_FALSE(empty_value.matches({}));
}

TEST(SelectorTest, InequalityHoldsForAnAbsentLabel) {
  const Selector s = parsed("tier!=canary");
  EXPECT_TRUE(s.matches({}));
  EXPECT_TRUE(s.matches({{"tier", "stable"}}));
  EXPECT_FALSE(s.matches({{"tier", "canary"}}));
}

TEST(SelectorTest, SetTerms) {
  const Selector in = parsed("role in (prefill, decode)");
  EXPECT_TRUE(in.matches({{"role", "prefill"}}));
  EXPECT_TRUE(in.matches({{"role", "decode"}}));
  EXPECT_FALSE(in.matches({{"role", "router"}}));
  EXPECT_FALSE(in.matches({}));
  const Selector notin = parsed("role notin (router)");
  EXPECT_TRUE(notin.matches({}));
  EXPECT_TRUE(notin.matches({{"role", "decode"}}));
  EXPECT_FALSE(notin.matches({{"role", "router"}}));
  // No space is needed between the keyword and the parenthesis.
  EXPECT_TRUE(parsed("role in(decode)").matches({{"role", "decode"}}));
  // An empty value in a set.
  EXPECT_TRUE(parsed("role in (a,)").matches({{"role", ""}}));
}

TEST(SelectorTest, Existence) {
  const Selector has = parsed("gpu");
  EXPECT_TRUE(has.matches({{"gpu", ""}}));
  EXPECT_FALSE(has.matches({{"cpu", "1"}}));
  const Selector lacks = parsed("!draining");
  EXPECT_TRUE(lacks.matches({}));
  EXPECT_FALSE(lacks.matches({{"draining", "true"}}));
  EXPECT_TRUE(parsed("! draining").matches({}));
}

TEST(SelectorTest, EveryTermMustHold) {
  const Selector s = parsed("app=engine,role in (prefill,decode),!draining,zone!=b");
  const Labels good = {{"app", "engine"}, {"role", "decode"}, {"zone", "a"}};
  EXPECT_TRUE(s.matches(good));
  Labels draining = good;
  draining["draining"] = "1";
  EXPECT_FALSE(s.matches(draining));
  Labels router = good;
  router["role"] = "router";
  EXPECT_FALSE(s.matches(router));
  Labels zone_b = good;
  zone_b["zone"] = "b";
  EXPECT_FALSE(s.matches(zone_b));
}

TEST(SelectorTest, PrefixedKeysAndValueCharacters) {
  const Selector s = parsed("app.kubernetes.io/name=vllm-engine_v1.2,kvgate.dev/role");
  EXPECT_TRUE(
      s.matches({{"app.kubernetes.io/name", "vllm-engine_v1.2"}, {"kvgate.dev/role", "x"}}));
  EXPECT_FALSE(s.matches({{"name", "vllm-engine_v1.2"}, {"kvgate.dev/role", "x"}}));
}

TEST(SelectorTest, CanonicalTextSortsAndParsesBack) {
  const Selector s = parsed("zone notin (b,a,b), app==engine, !draining, gpu");
  EXPECT_EQ(s.text(), "app=engine,!draining,gpu,zone notin (a,b)");
  const Selector again = parsed(s.text());
  EXPECT_EQ(again.text(), s.text());
  const Labels labels = {{"app", "engine"}, {"gpu", "1"}, {"zone", "c"}};
  EXPECT_EQ(again.matches(labels), s.matches(labels));
  EXPECT_TRUE(s.matches(labels));
}

TEST(SelectorTest, ErrorsSayWhereAndWhat) {
  const std::string missing_key = error_of("=x");
  EXPECT_NE(missing_key.find("at character 1"), std::string::npos) << missing_key;
  EXPECT_NE(missing_key.find("expected a label key"), std::string::npos) << missing_key;

  const std::string unclosed = error_of("role in (a,b");
  EXPECT_NE(unclosed.find("expected ',' or ')'"), std::string::npos) << unclosed;
  EXPECT_NE(unclosed.find("\"role in (a,b\""), std::string::npos) << "quotes the selector";

  EXPECT_NE(error_of("role in ()").find("must not be empty"), std::string::npos);
  EXPECT_NE(error_of("role in a").find("expected '('"), std::string::npos);
  EXPECT_NE(error_of("a=b c").find("expected ',' or the end"), std::string::npos);
  EXPECT_NE(error_of("a b").find("expected an operator"), std::string::npos);
  EXPECT_NE(error_of("a>1").find("not supported"), std::string::npos);
  EXPECT_NE(error_of("!a=b").find("after '!key'"), std::string::npos);
  EXPECT_NE(error_of("a,").find("expected a label key"), std::string::npos);
  EXPECT_NE(error_of("a,,b").find("expected a label key"), std::string::npos);
}

TEST(SelectorTest, InvalidKeysAndValuesAreRefused) {
  EXPECT_NE(error_of("-app=x").find("start and end with a letter or digit"), std::string::npos);
  EXPECT_NE(error_of(std::string(64, 'k') + "=x").find("longer than 63"), std::string::npos);
  EXPECT_NE(error_of("app=" + std::string(64, 'v')).find("the value is longer than 63"),
            std::string::npos);
  EXPECT_NE(error_of("app=a/b").find("the value may hold only"), std::string::npos);
  EXPECT_NE(error_of("Example.COM/app=x").find("DNS subdomain"), std::string::npos);
  EXPECT_NE(error_of("/app=x").find("prefix (before '/') is empty"), std::string::npos);
  EXPECT_NE(error_of("kvgate.dev/=x").find("the key's name"), std::string::npos);
  EXPECT_NE(error_of("role in (ok,-bad)").find("the value must start"), std::string::npos);
}

}  // namespace
}  // namespace kvgate::kube
