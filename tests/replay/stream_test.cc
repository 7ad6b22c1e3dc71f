#include "replay/stream.h"

#include <gtest/gtest.h>

#include "kvgate/http/sse.h"

namespace kvgate::replay {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string chunk(std::string_view text, std::string_view finish = "null") {
  return R"({"id":"cmpl-w3-7","object":"text_completion","created":1,"model":"mock-8b",)"
         R"("choices":[{"index":0,"text":")" +
         std::string(text) + R"(","logprobs":null,"finish_reason":)" + std::string(finish) + "}]}";
}

constexpr std::string_view kUsage =
    R"({"id":"cmpl-w3-7","object":"text_completion","created":1,"model":"mock-8b","choices":[],)"
    R"("usage":{"prompt_tokens":1000,"completion_tokens":3,"total_tokens":1003,)"
    R"("prompt_tokens_details":{"cached_tokens":512}}})";

TEST(StreamReader, TimesContentChunksAndReadsUsage) {
  RequestRecord rec;
  const auto t0 = Clock::now();
  StreamReader r(&rec, t0);
  r.on_event(chunk(" the"), t0 + milliseconds(120));
  r.on_event(chunk(" of"), t0 + milliseconds(135));
  r.on_event(chunk(" kv", "\"length\""), t0 + milliseconds(155));
  r.on_event(kUsage, t0 + milliseconds(156));
  r.on_event("[DONE]", t0 + milliseconds(157));
  r.finish(t0 + milliseconds(158));
  EXPECT_TRUE(r.done());
  EXPECT_FALSE(r.errored());
  EXPECT_EQ(rec.response_id, "cmpl-w3-7");
  EXPECT_NEAR(rec.ttft_s, 0.120, 1e-9);
  ASSERT_EQ(rec.itl_s.size(), 2u);
  EXPECT_NEAR(rec.itl_s[0], 0.015, 1e-6);
  EXPECT_NEAR(rec.itl_s[1], 0.020, 1e-6);
  EXPECT_NEAR(rec.e2e_s, 0.158, 1e-9);
  EXPECT_TRUE(rec.has_usage);
  EXPECT_EQ(rec.usage_prompt_tokens, 1000u);
  EXPECT_EQ(rec.cached_tokens, 512u);
  EXPECT_EQ(rec.output_tokens, 3u);
}

TEST(StreamReader, WithoutUsageCountsContentChunks) {
  RequestRecord rec;
  const auto t0 = Clock::now();
  StreamReader r(&rec, t0);
  r.on_event(chunk(" a"), t0 + milliseconds(1));
  r.on_event(chunk(""), t0 + milliseconds(2));  // no text: not a token
  r.on_event(chunk(" b"), t0 + milliseconds(3));
  r.finish(t0 + milliseconds(4));
  EXPECT_FALSE(r.done());
  EXPECT_FALSE(rec.has_usage);
  EXPECT_EQ(rec.output_tokens, 2u);
  EXPECT_EQ(r.content_chunks(), 2u);
}

TEST(StreamReader, ErrorEventAndBadChunks) {
  RequestRecord rec;
  const auto t0 = Clock::now();
  StreamReader r(&rec, t0);
  r.on_event("not json", t0);
  r.on_event("[1,2]", t0);
  EXPECT_EQ(r.bad_chunks(), 2u);
  r.on_event(chunk(" a"), t0 + milliseconds(5));
  r.on_event(R"({"error":{"message":"the worker failed mid-stream: eof","type":"upstream_error"}})",
             t0 + milliseconds(6));
  EXPECT_TRUE(r.errored());
  EXPECT_EQ(rec.error_kind, "stream_error");
  EXPECT_EQ(rec.error, "the worker failed mid-stream: eof");
  EXPECT_NEAR(rec.ttft_s, 0.005, 1e-9);
}

TEST(StreamReader, ChatDeltas) {
  RequestRecord rec;
  const auto t0 = Clock::now();
  StreamReader r(&rec, t0);
  r.on_event(
      R"({"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":" hi"}}]})",
      t0 + milliseconds(9));
  EXPECT_EQ(rec.response_id, "chatcmpl-1");
  EXPECT_NEAR(rec.ttft_s, 0.009, 1e-9);
}

TEST(StreamReader, ThroughTheSseParserWhateverTheCuts) {
  const std::string body = "data: " + chunk(" x") + "\n\ndata: " + chunk(" y") +
                           "\n\ndata: " + std::string(kUsage) + "\n\ndata: [DONE]\n\n";
  for (size_t cut = 1; cut < body.size(); cut += 7) {
    RequestRecord rec;
    const auto t0 = Clock::now();
    StreamReader r(&rec, t0);
    http::SseParser sse;
    const http::SseParser::OnData on = [&](std::string_view d) { r.on_event(d, t0); };
    sse.feed(std::string_view(body).substr(0, cut), on);
    sse.feed(std::string_view(body).substr(cut), on);
    r.finish(t0);
    EXPECT_TRUE(r.done()) << cut;
    EXPECT_EQ(r.content_chunks(), 2u) << cut;
    EXPECT_EQ(rec.cached_tokens, 512u) << cut;
  }
}

}  // namespace
}  // namespace kvgate::replay
