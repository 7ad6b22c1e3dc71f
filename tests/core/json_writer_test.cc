#include "kvgate/core/json_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <optional>

namespace kvgate {
namespace {

TEST(JsonWriter, NestedContainersGetCommasRight) {
  std::string s;
  JsonWriter w(&s);
  w.begin_object().member("a", 1).key("b").begin_array().value(true).null().value(2.5).end_array();
  w.key("c").begin_object().end_object().member("d", "x").end_object();
  EXPECT_EQ(s, R"({"a":1,"b":[true,null,2.5],"c":{},"d":"x"})");
}

TEST(JsonWriter, EscapesControlQuotesAndBackslash) {
  std::string s;
  append_json_string(&s, std::string_view("a\"b\\c\nd\x01\x7f\xc3\xa9", 11));
  EXPECT_EQ(s, "\"a\\\"b\\\\c\\nd\\u0001\x7f\xc3\xa9\"");
}

TEST(JsonWriter, IntegersAndNonFinite) {
  std::string s;
  JsonWriter w(&s);
  w.begin_array()
      .value(std::numeric_limits<uint64_t>::max())
      .value(int64_t{-5})
      .value(std::numeric_limits<double>::infinity())
      .end_array();
  EXPECT_EQ(s, "[18446744073709551615,-5,null]");
}

TEST(JsonWriter, OptionalsAreTheirValueOrNull) {
  std::string s;
  JsonWriter w(&s);
  w.begin_object()
      .member("set", std::optional<uint64_t>(7))
      .member("unset", std::optional<double>())
      .end_object();
  EXPECT_EQ(s, R"({"set":7,"unset":null})");
}

}  // namespace
}  // namespace kvgate
