#include "app/answer_memory.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "app/request_model.h"
#include "kvgate/core/json_writer.h"
#include "support/external.h"
#include "support/sanitizer.h"
#include "support/wait.h"

namespace kvgate::app {
namespace {

using tokenizer::PromptTokenizers;

std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(&out, s);
  return out;
}

std::string whole_answer(std::string_view content) {
  return R"({"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":)"
         R"("assistant","content":)" +
         json_string(content) + R"(},"finish_reason":"stop"}],"usage":{"prompt_tokens":9}})";
}

// The SSE events an engine streams for `content`, about `step` bytes a chunk (never part of a
// character: engines hold an incomplete one back), with a usage event.
std::string streamed_answer(std::string_view content, size_t step) {
  std::string out =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
  for (size_t at = 0; at < content.size();) {
    size_t end = std::min(content.size(), at + step);
    while (end < content.size() && (static_cast<uint8_t>(content[end]) & 0xC0) == 0x80) ++end;
    out += "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":" +
           json_string(content.substr(at, end - at)) + "}}]}\n\n";
    at = end;
  }
  out += "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9}}\r\n\r\n";
  out += "data: [DONE]\n\n";
  return out;
}

TEST(AnswerMemory, TheAnswerTextIsTheOneTheClientKeeps) {
  const std::string text = "Paris is the capital of France. \"Quoted\", and a\nnewline: é 日本";
  EXPECT_EQ(chat_answer_text(whole_answer(text), false), text);
  EXPECT_EQ(chat_answer_text(streamed_answer(text, 7), true), text);
  EXPECT_EQ(chat_answer_text(streamed_answer(text, 1), true), text);
  // No one text to keep.
  EXPECT_FALSE(chat_answer_text(whole_answer(""), false));
  EXPECT_FALSE(chat_answer_text(
      R"({"choices":[{"index":0,"message":{"content":"a"}},{"index":1,"message":{"content":"b"}}]})",
      false))
      << "several choices";
  EXPECT_FALSE(chat_answer_text(
      R"({"choices":[{"index":0,"message":{"content":"a","tool_calls":[{"id":"t"}]}}]})", false))
      << "tool calls";
  EXPECT_FALSE(
      chat_answer_text("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"
                       "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"b\"}}]}\n\n",
                       true))
      << "a second choice streamed";
  EXPECT_FALSE(chat_answer_text("not json", false));
  EXPECT_FALSE(chat_answer_text("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}", true))
      << "a cut event";
  EXPECT_FALSE(chat_answer_text(R"({"error":{"message":"x"}})", false));
}

TEST(AnswerMemory, TheNextTurnAppendsTheAnswerAndAnEmptyQuestion) {
  const std::string body =
      R"({"model":"m", "messages": [ {"role":"user","content":"Hi"} ] ,"stream":true})";
  EXPECT_EQ(with_next_turn(body, "Hello \"you\""),
            R"({"model":"m", "messages": [ {"role":"user","content":"Hi"} ,)"
            R"({"role":"assistant","content":"Hello \"you\""},{"role":"user","content":""}])"
            R"(,"stream":true})")
      << "the list's own spacing may go";
  EXPECT_EQ(with_next_turn(R"({"messages":[ ]})", "A"),
            R"({"messages":[ {"role":"assistant","content":"A"},{"role":"user","content":""}]})");
  EXPECT_FALSE(with_next_turn(R"({"prompt":"x"})", "A"));
  EXPECT_FALSE(with_next_turn(R"({"messages":"x"})", "A"));
  EXPECT_FALSE(with_next_turn("[1]", "A"));
}

TEST(AnswerMemory, AStreamPastTheBoundIsNotKept) {
  AnswerCapture small;
  small.add("data: a\n\n");
  small.add("data: b\n\n");
  EXPECT_EQ(small.take(), "data: a\n\ndata: b\n\n");
  AnswerCapture big;
  const std::string mib(1 << 20, 'x');
  for (size_t i = 0; i <= AnswerCapture::kMaxBytes / mib.size(); ++i) big.add(mib);
  EXPECT_FALSE(big.take());
}

// After the memory encoded turn 1's answer, turn 2 (which resends it) misses the encode cache
// less often than without, and gets the very same ids: Qwen 3 (whose template renders an answer
// by its place), Llama 3.1 and DeepSeek V3 (kvgate-bench-chat measures Gemma 3 too).
TEST(AnswerMemory, TheNextTurnFindsTheAnswerEncodedWithTheSameIds) {
  std::string answer = "Certainly. ";
  for (int i = 0; i < 60; ++i)
    answer += "Point " + std::to_string(i) + " of the answer, in words. ";
  const std::string q1 = "Tell me about the history of maps, in some detail please.";
  const std::string q2 = "And what about sea charts?";
  // A chat request: a system message, then `turns` as user and assistant messages in turn.
  const auto body_of = [](const std::vector<std::string>& turns) {
    std::string out =
        R"({"model":"m","messages":[{"role":"system","content":"You are a helpful assistant."})";
    for (size_t i = 0; i < turns.size(); ++i) {
      out += std::string(R"(,{"role":")") + (i % 2 == 0 ? "user" : "assistant") +
             R"(","content":)" + json_string(turns[i]) + "}";
    }
    return out + "]}";
  };
  // Under a sanitizer Qwen 3 alone: loading each tokenizer twice is most of the time.
  const std::vector<const char*> families =
      testing_support::kUnderSanitizer
          ? std::vector<const char*>{"qwen3"}
          : std::vector<const char*>{"qwen3", "llama3_1", "deepseek_v3"};
  for (const char* family : families) {
    SCOPED_TRACE(family);
    const std::string folder = testing::tokenizer_dir() + "/" + family;
    ASSERT_TRUE(std::filesystem::exists(folder)) << folder << ": run tools/setup.sh";
    auto with = PromptTokenizers::load({folder});
    auto without = PromptTokenizers::load({folder});
    ASSERT_TRUE(with.ok() && without.ok());
    AnswerMemory memory(*with);
    const auto misses = [](const PromptTokenizers& t) {
      return t.for_model("m").model()->encode_cache_stats().misses;
    };
    for (const bool stream : {false, true}) {
      SCOPED_TRACE(stream ? "streamed" : "whole");
      // A conversation of its own each time: the other's entries are in both caches.
      const std::string tag = stream ? "Streamed. " : "Whole. ";
      const std::string first = body_of({tag + q1});
      const std::string second = body_of({tag + q1, tag + answer, q2});
      ParsedRequest p1, p2_with, p2_without;
      ASSERT_TRUE(parse_request(ApiRoute::kChatCompletions, first, *with, kNoTokenLimit, &p1).ok());
      ASSERT_TRUE(
          parse_request(ApiRoute::kChatCompletions, first, *without, kNoTokenLimit, &p1).ok());
      const uint64_t encoded = memory.stats().encoded;
      memory.remember(first, stream ? streamed_answer(tag + answer, 5) : whole_answer(tag + answer),
                      stream);
      EXPECT_EQ(memory.stats().encoded, encoded + 1);
      const uint64_t with_before = misses(*with), without_before = misses(*without);
      ASSERT_TRUE(
          parse_request(ApiRoute::kChatCompletions, second, *with, kNoTokenLimit, &p2_with).ok());
      ASSERT_TRUE(
          parse_request(ApiRoute::kChatCompletions, second, *without, kNoTokenLimit, &p2_without)
              .ok());
      EXPECT_EQ(p2_with.tokens, p2_without.tokens);
      EXPECT_LT(misses(*with) - with_before, misses(*without) - without_before)
          << "the answer was encoded ahead of turn 2";
    }
  }
}

TEST(AnswerMemory, TheThreadCountsEveryOutcome) {
  auto toks = PromptTokenizers::load({testing::tokenizer_dir() + "/qwen3"});
  ASSERT_TRUE(toks.ok());
  AnswerMemory memory(*toks);
  const std::string body = R"({"messages":[{"role":"user","content":"Hi"}]})";
  memory.submit(body, whole_answer("Hello there, how can I help?"), false);
  memory.submit(body, whole_answer(""), false);                  // no text
  memory.submit(R"({"prompt":"x"})", whole_answer("A"), false);  // no messages
  testing::wait_until(
      [&] {
        const AnswerMemoryStats s = memory.stats();
        return s.encoded + s.no_answer + s.failed == 3;
      },
      std::chrono::seconds(5));
  const AnswerMemoryStats s = memory.stats();
  EXPECT_EQ(s.encoded, 1u);
  EXPECT_EQ(s.no_answer, 1u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_GT(s.seconds, 0.0);
}

}  // namespace
}  // namespace kvgate::app
