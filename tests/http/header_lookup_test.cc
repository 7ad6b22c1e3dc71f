// header_value(): the first field of a name, in any case, as beast::http::fields::find() gives it.
#include "http/detail/header_lookup.h"

#include <gtest/gtest.h>

namespace kvgate::http::detail {
namespace {

TEST(HeaderLookup, FindsTheFirstFieldOfANameInAnyCase) {
  boost::beast::http::fields fields;
  fields.insert("Content-Type", "application/json");
  fields.insert("x-request-id", "first");
  fields.insert("X-Request-Id", "second");
  fields.insert("x-request-ix", "same length, other name");
  for (const char* name : {"content-type", "CONTENT-TYPE", "Content-Type"}) {
    EXPECT_EQ(header_value(fields, name), "application/json") << name;
    EXPECT_EQ(header_value(fields, name), fields[name]) << "as fields::operator[] finds it";
  }
  EXPECT_EQ(header_value(fields, "X-REQUEST-ID"), "first");
  EXPECT_EQ(header_value(fields, "x-request-id"), fields["x-request-id"]);
  EXPECT_EQ(header_value(fields, "x-request-ix"), "same length, other name");
  EXPECT_EQ(header_value(fields, "x-request"), "");
  EXPECT_EQ(header_value(fields, "x-request-idx"), "");
  EXPECT_EQ(header_value(fields, ""), "");
  EXPECT_EQ(header_value(boost::beast::http::fields(), "content-type"), "");
}

}  // namespace
}  // namespace kvgate::http::detail
