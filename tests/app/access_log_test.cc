#include "app/access_log.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <regex>

namespace kvgate::app {
namespace {

AccessRecord generation() {
  return {.method = "POST",
          .path = "/v1/completions",
          .request_id = "abc",
          .client = "10.1.2.3",
          .status = 200,
          .duration_ms = 812.44,
          .model = "m",
          .worker = "http://w:8000",
          .rank = 1,
          .routed = true,
          .matched_blocks = 12,
          .decision_us = 4.25,
          .ttft_ms = 35.06,
          .queued_ms = 120.5,
          .attempts = 2,
          .prompt_tokens = 1200,
          .completion_tokens = 40};
}

TEST(AccessLog, TextLineForAGeneration) {
  EXPECT_EQ(AccessLog::line(AccessLogFormat::kText, generation()),
            "POST /v1/completions 200 model=m worker=http://w:8000 rank=1 matched=12 "
            "decision_us=4.2 ttft_ms=35.1 queued_ms=120.5 duration_ms=812.4 attempts=2 id=abc\n");
}

TEST(AccessLog, TextLineForAnotherRouteLeavesOutWhatDoesNotApply) {
  const AccessRecord r{
      .method = "GET", .path = "/v1/models", .request_id = "", .status = 401, .duration_ms = 0.04};
  EXPECT_EQ(AccessLog::line(AccessLogFormat::kText, r),
            "GET /v1/models 401 duration_ms=0.0 id=-\n");
}

TEST(AccessLog, JsonLineParsesWithEveryField) {
  const std::string line = AccessLog::line(AccessLogFormat::kJson, generation());
  ASSERT_EQ(line.back(), '\n');
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(line).get(doc), simdjson::SUCCESS) << line;
  EXPECT_EQ(doc["path"].get_string().value(), "/v1/completions");
  EXPECT_EQ(doc["status"].get_uint64().value(), 200u);
  EXPECT_EQ(doc["worker"].get_string().value(), "http://w:8000");
  EXPECT_EQ(doc["rank"].get_int64().value(), 1);
  EXPECT_EQ(doc["matched_blocks"].get_uint64().value(), 12u);
  EXPECT_DOUBLE_EQ(doc["ttft_ms"].get_double().value(), 35.06);
  EXPECT_DOUBLE_EQ(doc["queued_ms"].get_double().value(), 120.5);
  EXPECT_EQ(doc["request_id"].get_string().value(), "abc");
  EXPECT_EQ(doc["client"].get_string().value(), "10.1.2.3");
  EXPECT_EQ(doc["prompt_tokens"].get_int64().value(), 1200);
  EXPECT_EQ(doc["completion_tokens"].get_int64().value(), 40);
  // When it was written: RFC 3339, UTC, milliseconds.
  const std::string time(doc["time"].get_string().value());
  EXPECT_TRUE(std::regex_match(time, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << time;
  // A stream-less answer has no TTFT; an unrouted one no decision.
  AccessRecord bare = generation();
  bare.ttft_ms = -1;
  bare.queued_ms = -1;
  bare.routed = false;
  const std::string b = AccessLog::line(AccessLogFormat::kJson, bare);
  EXPECT_EQ(b.find("ttft_ms"), std::string::npos) << b;
  EXPECT_EQ(b.find("queued_ms"), std::string::npos) << b;
  EXPECT_EQ(b.find("decision_us"), std::string::npos) << b;
}

// Times are written to three decimals, never a sum's binary noise.
TEST(AccessLog, JsonTimesHaveThreeDecimals) {
  AccessRecord r = generation();
  r.duration_ms = 0.035432000000000005;
  r.ttft_ms = 12.0000000001;
  r.decision_us = 4.2500001;
  const std::string line = AccessLog::line(AccessLogFormat::kJson, r);
  EXPECT_NE(line.find("\"duration_ms\":0.035,"), std::string::npos) << line;
  EXPECT_NE(line.find("\"ttft_ms\":12,"), std::string::npos) << line;
  EXPECT_NE(line.find("\"decision_us\":4.25,"), std::string::npos) << line;
}

TEST(AccessLog, OffWritesNothingAndFormatsParse) {
  int lines = 0;
  AccessLog off(AccessLogFormat::kOff, [&](std::string_view) { ++lines; });
  off.write(generation());
  EXPECT_EQ(lines, 0);
  AccessLog on(AccessLogFormat::kText, [&](std::string_view) { ++lines; });
  on.write(generation());
  EXPECT_EQ(lines, 1);
  EXPECT_EQ(*parse_access_log_format("json"), AccessLogFormat::kJson);
  EXPECT_FALSE(parse_access_log_format("xml").ok());
}

}  // namespace
}  // namespace kvgate::app
