#include "app/request_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/external.h"
#include "support/sanitizer.h"

namespace kvgate::app {
namespace {

const PromptTokenizers kTok;  // the test tokenizer for every model
const TestTokenizer kTest;    // what it encodes with

TEST(RequestModel, CompletionsTextIdsAndBatches) {
  ParsedRequest p;
  ASSERT_TRUE(parse_request(ApiRoute::kCompletions,
                            R"({"model":"m","prompt":"hello world","stream":true})", kTok,
                            kNoTokenLimit, &p)
                  .ok());
  EXPECT_EQ(p.model, "m");
  EXPECT_TRUE(p.stream);
  EXPECT_EQ(p.tokens, kTest.encode("hello world"));
  EXPECT_FALSE(p.tokens_given);
  ASSERT_TRUE(parse_request(ApiRoute::kCompletions, R"({"prompt":[1,2,3],"extra":{"x":[1]}})", kTok,
                            kNoTokenLimit, &p)
                  .ok());
  EXPECT_EQ(p.tokens, (std::vector<TokenId>{1, 2, 3}));
  EXPECT_TRUE(p.tokens_given);
  EXPECT_EQ(p.batch, 1u) << "a list of ids is one prompt";
  ASSERT_TRUE(
      parse_request(ApiRoute::kCompletions, R"({"prompt":[[7,8],[9]]})", kTok, kNoTokenLimit, &p)
          .ok());
  EXPECT_EQ(p.tokens, (std::vector<TokenId>{7, 8}));
  EXPECT_EQ(p.batch, 2u);
  ASSERT_TRUE(parse_request(ApiRoute::kCompletions,
                            R"({"prompt":["first","second"],"cache_salt":"s1"})", kTok,
                            kNoTokenLimit, &p)
                  .ok());
  EXPECT_EQ(p.tokens, kTest.encode("first"));
  EXPECT_EQ(p.batch, 2u);
  EXPECT_EQ(p.cache_salt, "s1");
}

TEST(RequestModel, ChatRendersMessagesAndContentParts) {
  ParsedRequest p;
  ASSERT_TRUE(parse_request(ApiRoute::kChatCompletions,
                            R"({"messages":[{"role":"system","content":"be brief"},
                                            {"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}]})",
                            kTok, kNoTokenLimit, &p)
                  .ok());
  const ChatMessage msgs[] = {{"system", "be brief"}, {"user", "hi"}};
  EXPECT_EQ(p.tokens, kTest.encode(render_chat(msgs)));
}

// The gRPC API's typed request reads as the JSON body it stands for: same tokens, same bounds.
TEST(RequestModel, ATypedRequestReadsAsTheBodyItStandsFor) {
  const auto both = [](ApiRoute route, std::string_view body, const TypedRequest& typed,
                       size_t limit) {
    ParsedRequest from_json, from_typed;
    const Status a = parse_request(route, body, kTok, limit, &from_json);
    const Status b = parse_typed_request(typed, kTok, limit, &from_typed);
    EXPECT_EQ(a.code(), b.code()) << body << ": " << a << " / " << b;
    if (!a.ok()) return;
    EXPECT_EQ(from_json.model, from_typed.model) << body;
    EXPECT_EQ(from_json.stream, from_typed.stream) << body;
    EXPECT_EQ(from_json.include_usage, from_typed.include_usage) << body;
    EXPECT_EQ(from_json.tokens, from_typed.tokens) << body;
    EXPECT_EQ(from_json.tokens_given, from_typed.tokens_given) << body;
  };
  const std::vector<TokenId> ids = {5, 6, 7, 8};
  const ChatMessage chat[] = {{"system", "be brief"}, {"user", "hi there"}};
  constexpr std::string_view kStream = R"("stream":true,"stream_options":{"include_usage":true})";
  for (const size_t limit : {kNoTokenLimit, size_t{3}}) {
    both(ApiRoute::kCompletions, R"({"model":"m","prompt":[5,6,7,8],)" + std::string(kStream) + "}",
         {.model = "m", .stream = true, .include_usage = true, .token_ids = ids}, limit);
    both(ApiRoute::kCompletions,
         R"({"model":"m","prompt":"hello world",)" + std::string(kStream) + "}",
         {.model = "m", .stream = true, .include_usage = true, .text = "hello world"}, limit);
    both(ApiRoute::kChatCompletions,
         R"({"model":"m","messages":[{"role":"system","content":"be brief"},)"
         R"({"role":"user","content":"hi there"}],)" +
             std::string(kStream) + "}",
         {.model = "m", .stream = true, .include_usage = true, .messages = chat}, limit);
  }
  ParsedRequest p;
  EXPECT_TRUE(absl::IsOutOfRange(
      parse_typed_request({.token_ids = ids}, kTok, 3, &p)));  // 4 ids over a limit of 3
  EXPECT_TRUE(absl::IsInvalidArgument(parse_typed_request({.text = ""}, kTok, kNoTokenLimit, &p)));
}

TEST(RequestModel, GenerateTakesInputIdsOrText) {
  ParsedRequest p;
  ASSERT_TRUE(parse_request(ApiRoute::kGenerate,
                            R"({"input_ids":[5,6],"sampling_params":{"max_new_tokens":3}})", kTok,
                            kNoTokenLimit, &p)
                  .ok());
  EXPECT_EQ(p.tokens, (std::vector<TokenId>{5, 6}));
  ASSERT_TRUE(
      parse_request(ApiRoute::kGenerate, R"({"text":"abc"})", kTok, kNoTokenLimit, &p).ok());
  EXPECT_EQ(p.tokens, kTest.encode("abc"));
}

TEST(RequestModel, RejectsWithTheFieldNamed) {
  ParsedRequest p;
  const struct {
    ApiRoute route;
    const char* body;
    const char* mentions;
  } cases[] = {
      {ApiRoute::kCompletions, "{not json", "JSON"},
      {ApiRoute::kCompletions, "[]", "object"},
      {ApiRoute::kCompletions, R"({"prompt":{"a":1}})", "prompt"},
      {ApiRoute::kCompletions, R"({"prompt":[1,"a",2]})", "prompt"},
      {ApiRoute::kCompletions, R"({"prompt":[4294967296]})", "prompt"},
      {ApiRoute::kCompletions, R"({"prompt":"x","stream":1})", "stream"},
      {ApiRoute::kCompletions, R"({"prompt":"x","model":null})", "model"},
      {ApiRoute::kCompletions, R"({"model":"m"})", "prompt"},
      {ApiRoute::kChatCompletions, R"({"messages":[1]})", "messages"},
      {ApiRoute::kChatCompletions, R"({"messages":[{"role":"user","content":5}]})", "content"},
      {ApiRoute::kGenerate, R"({})", "text"},
  };
  for (const auto& c : cases) {
    const Status s = parse_request(c.route, c.body, kTok, kNoTokenLimit, &p);
    EXPECT_FALSE(s.ok()) << c.body;
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.body;
    EXPECT_NE(std::string(message_of(s)).find(c.mentions), std::string::npos)
        << c.body << " -> " << s;
  }
}

// JSON that breaks inside a member the parser looks up rather than walks (a content part's text,
// stream_options' include_usage): simdjson gives up on the document there, and nothing may touch it
// after (found by request_model_fuzz: a part missing its comma reset the abandoned parser).
TEST(RequestModel, JsonBrokenInsideALookedUpMemberIsA400) {
  ParsedRequest p;
  for (
      const auto& [route, body] : std::vector<std::pair<ApiRoute, std::string>>{
          {ApiRoute::kChatCompletions,
           R"({"messages":[{"role":"user","content":[{"type":"text":"Hi"}]}]})"},
          {ApiRoute::kChatCompletions,
           R"({"messages":[{"role":"user","content":[{"type":"text","text" "Hi"}]}],"model":"m"})"},
          {ApiRoute::kResponses,
           R"({"input":[{"role":"user","content":[{"type" "input_text","text":"q"}]}]})"},
          {ApiRoute::kCompletions,
           R"({"stream_options":{"x" 1,"include_usage":true},"prompt":"a"})"},
      }) {
    const Status s = parse_request(route, body, kTok, kNoTokenLimit, &p);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << body << " -> " << s;
    EXPECT_NE(std::string(message_of(s)).find("JSON"), std::string::npos) << body << " -> " << s;
  }
}

TEST(RequestModel, LargePromptParsesFast) {
  std::string text;
  while (text.size() < (100 << 10)) text += "The quick brown fox jumps over the lazy dog. ";
  std::string body = R"({"model":"m","prompt":")" + text + R"("})";
  ParsedRequest p;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(parse_request(ApiRoute::kCompletions, body, kTok, kNoTokenLimit, &p).ok());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20;
  EXPECT_GT(p.tokens.size(), 20000u);
  EXPECT_LT(ms, 20.0 * testing_support::kSlowdown)
      << "parsing and tokenizing a 100 KB prompt took " << ms << " ms";
}

TEST(RequestModel, APromptOverTheLimitIsRefusedWithoutTokenizingItAll) {
  ParsedRequest p;
  // Just over: tokenized until one past the limit.
  const std::string words = std::string(R"({"prompt":")") + "aaaa bbbb cccc dddd" + R"("})";
  Status s = parse_request(ApiRoute::kCompletions, words, kTok, 4, &p);  // 7 tokens
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_NE(std::string(message_of(s)).find("maximum context length is 4 tokens"),
            std::string::npos)
      << s;
  EXPECT_LE(p.tokens.size(), 5u) << "encoding stops one past the limit";
  ASSERT_TRUE(parse_request(ApiRoute::kCompletions, words, kTok, 7, &p).ok());
  // Ids, a chat, and the first of a batch count too.
  EXPECT_TRUE(absl::IsOutOfRange(
      parse_request(ApiRoute::kCompletions, R"({"prompt":[1,2,3,4,5]})", kTok, 4, &p)));
  EXPECT_TRUE(absl::IsOutOfRange(
      parse_request(ApiRoute::kChatCompletions,
                    R"({"messages":[{"role":"user","content":"aaaa bbbb cccc"}]})", kTok, 4, &p)));
  EXPECT_TRUE(
      parse_request(ApiRoute::kCompletions, R"({"prompt":["aaaa","aaaa bbbb cccc"]})", kTok, 4, &p)
          .ok())
      << "only the first prompt of a batch routes; each is its own request at the engine";
}

TEST(RequestModel, AHugeTextPromptIsRefusedFromItsLengthBeforeParsing) {
  std::string body = R"({"model":"m","prompt":")" + std::string(8 << 20, 'a') + R"(","x":1})";
  ParsedRequest p;
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = parse_request(ApiRoute::kCompletions, body, kTok, 131072, &p);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_TRUE(p.tokens.empty()) << "refused from the byte length, nothing tokenized";
  // Reading the 8 MiB for the prompt's length, not parsing it: a sanitizer slows that too (a
  // loaded ThreadSanitizer run took 226 ms).
  EXPECT_LT(ms, 200.0 * testing_support::kSlowdown);
}

// Chat messages and Responses input are measured as they are met, before a text is decoded:
// each body here ends its huge text with an invalid escape, which decoding would report as a bad
// string (InvalidArgument). Refused from the raw length, they are OutOfRange.
TEST(RequestModel, HugeChatTextsAreRefusedBeforeOneIsDecoded) {
  // A text of 1 MiB is at least this many tokens; the limit takes one, not two.
  const size_t mib_tokens = (1 << 20) / 6 / kTok.max_token_bytes();
  const size_t limit = mib_tokens * 3 / 2;
  const std::string mib(1 << 20, 'a');
  const std::string bad = mib + "\\q";  // 1 MiB, then an escape decoding would refuse
  const std::vector<std::pair<ApiRoute, std::string>> bodies = {
      {ApiRoute::kChatCompletions,
       R"({"messages":[{"role":"user","content":")" + mib + bad + R"("}]})"},
      {ApiRoute::kChatCompletions,
       R"({"messages":[{"role":"user","content":[{"type":"text","text":")" + mib + bad +
           R"("}]}]})"},
      // Texts that fit one by one and not together.
      {ApiRoute::kChatCompletions, R"({"messages":[{"role":"system","content":")" + mib +
                                       R"("},{"role":"user","content":")" + bad + R"("}]})"},
      {ApiRoute::kChatCompletions,
       R"({"messages":[{"role":"user","content":[{"type":"text","text":")" + mib +
           R"("},{"type":"text","text":")" + bad + R"("}]}]})"},
      {ApiRoute::kResponses, R"({"input":")" + mib + bad + R"("})"},
      {ApiRoute::kResponses, R"({"instructions":"be brief","input":[{"role":"user","content":")" +
                                 mib + R"("},{"role":"user","content":")" + bad + R"("}]})"},
  };
  for (const auto& [route, body] : bodies) {
    for (const size_t room : {size_t{0}, size_t{64}}) {  // copied, and parsed where it lies
      std::string padded = body;
      padded.reserve(body.size() + room);
      ParsedRequest p;
      const Status s =
          parse_request(route, padded, kTok, limit, &p, padded.capacity() - padded.size());
      EXPECT_TRUE(absl::IsOutOfRange(s)) << api_route_name(route) << ": " << s;
      EXPECT_NE(std::string(message_of(s)).find("--max-model-len"), std::string::npos) << s;
    }
  }
  // Within the limit the same shapes parse, in place or not.
  for (const size_t room : {size_t{0}, size_t{64}}) {
    std::string body = R"({"messages":[{"role":"user","content":")" + mib + R"("}]})";
    body.reserve(body.size() + room);
    ParsedRequest p;
    const Status s = parse_request(ApiRoute::kChatCompletions, body, kTok, kNoTokenLimit, &p,
                                   body.capacity() - body.size());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_FALSE(p.tokens.empty());
  }
}

TEST(RequestModel, TopLevelStringBytesFindsOnlyTopLevelStrings) {
  EXPECT_EQ(top_level_string_bytes(R"({"a":{"prompt":"nested"},"prompt":"abc\"d"})", "prompt"), 6u);
  EXPECT_EQ(top_level_string_bytes(R"({"prompt":[1,2]})", "prompt"), std::nullopt);
  EXPECT_EQ(top_level_string_bytes(R"({"other":"prompt","prompt" : "xy"})", "prompt"), 2u);
  // A run of backslashes before a quote: even, the quote ends the string; odd, it is escaped.
  EXPECT_EQ(top_level_string_bytes(R"({"prompt":"a\\","b":"c"})", "prompt"), 3u);
  EXPECT_EQ(top_level_string_bytes(R"({"prompt":"x\\\"y","b":1})", "prompt"), 6u);
  EXPECT_EQ(top_level_string_bytes(R"({"k\"ey":"v","prompt":"\\\\"})", "prompt"), 4u);
  EXPECT_EQ(top_level_string_bytes(R"({"prompt":"unterminated\"})", "prompt"), std::nullopt);
  EXPECT_EQ(top_level_string_bytes(R"(["prompt","x"])", "prompt"), std::nullopt);
  EXPECT_EQ(top_level_string_bytes(R"({"prompt":"unterminated)", "prompt"), std::nullopt);
}

}  // namespace
}  // namespace kvgate::app

namespace kvgate::app {
namespace {

// A real model's tokenizer (tools/setup.sh fetches it outside the repository).
std::string llama_tokenizer() {
  const std::string path = testing::tokenizer_dir() + "/llama3_1/tokenizer.json";
  EXPECT_TRUE(std::filesystem::exists(path)) << path << " is missing: run tools/setup.sh";
  return path;
}

TEST(PromptTokenizers, TextPromptsUseTheModelsTokenizerWithItsSpecialTokens) {
  const std::string path = llama_tokenizer();
  auto toks = PromptTokenizers::load({path});
  ASSERT_TRUE(toks.ok()) << toks.status();
  auto reference = tokenizer::load_tokenizer(path);
  ASSERT_TRUE(reference.ok());
  std::vector<TokenId> expected;
  ASSERT_TRUE((*reference)->encode("The quick brown fox", true, &expected).ok());
  ASSERT_EQ(expected.front(), 128000u) << "Llama 3.1 begins with <|begin_of_text|>";
  ParsedRequest p;
  ASSERT_TRUE(parse_request(ApiRoute::kCompletions,
                            R"({"model":"m","prompt":"The quick brown fox"})", *toks, kNoTokenLimit,
                            &p)
                  .ok());
  EXPECT_EQ(p.tokens, expected);
  ASSERT_TRUE(parse_request(ApiRoute::kGenerate, R"({"text":"The quick brown fox"})", *toks,
                            kNoTokenLimit, &p)
                  .ok());
  EXPECT_EQ(p.tokens, expected);
}

TEST(PromptTokenizers, TheRequestsModelChoosesEvenWhenItComesAfterThePrompt) {
  const std::string path = llama_tokenizer();
  auto toks = PromptTokenizers::load({"llama=" + path});
  ASSERT_TRUE(toks.ok()) << toks.status();
  EXPECT_TRUE(toks->per_model());
  ParsedRequest p;
  ASSERT_TRUE(parse_request(ApiRoute::kCompletions, R"({"prompt":"hello there","model":"llama"})",
                            *toks, kNoTokenLimit, &p)
                  .ok());
  ASSERT_FALSE(p.tokens.empty());
  EXPECT_EQ(p.tokens.front(), 128000u);
  EXPECT_EQ(p.model, "llama");
  ASSERT_TRUE(parse_request(ApiRoute::kCompletions, R"({"prompt":"hello there","model":"other"})",
                            *toks, kNoTokenLimit, &p)
                  .ok());
  EXPECT_EQ(p.tokens, kTest.encode("hello there")) << "other models keep the default";
}

// With a tokenizer per model the model is looked up before the body is walked; JSON that breaks
// before the model is found must be a 400, not a rewind of the document simdjson gave up on.
TEST(PromptTokenizers, JsonBrokenBeforeTheModelIsA400) {
  auto toks = PromptTokenizers::load({"llama=" + llama_tokenizer()});
  ASSERT_TRUE(toks.ok()) << toks.status();
  ParsedRequest p;
  for (const char* body : {R"({"prompt":"hello" "model":"llama"})",
                           R"({"prompt":["a",,"b"],"model":"llama"})", R"({"prompt":"x",)"}) {
    const Status s = parse_request(ApiRoute::kCompletions, body, *toks, kNoTokenLimit, &p);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << body << " -> " << s;
  }
  ASSERT_TRUE(parse_request(ApiRoute::kCompletions, R"({"prompt":"hello","model":"llama"})", *toks,
                            kNoTokenLimit, &p)
                  .ok())
      << "the parser is whole again for the next request";
  EXPECT_EQ(p.tokens.front(), 128000u);
}

TEST(PromptTokenizers, SpecsThatCannotLoadOrCollideAreStartupErrors) {
  const std::string path = llama_tokenizer();
  auto missing = PromptTokenizers::load({"/nonexistent/tokenizer.json"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("--tokenizer /nonexistent"),
            std::string::npos);
  EXPECT_FALSE(PromptTokenizers::load({path, path}).ok()) << "two defaults";
  EXPECT_FALSE(PromptTokenizers::load({"a=" + path, "a=" + path}).ok()) << "one model twice";
}

// A chat request as vLLM renders it: the model's template with the request's tools and
// chat_template_kwargs, encoded without another BOS.
TEST(PromptTokenizers, ChatIsRenderedWithTheModelsTemplateAndTheRequestsVariables) {
  const std::string folder = testing::tokenizer_dir() + "/qwen3";
  auto toks = PromptTokenizers::load({folder});
  ASSERT_TRUE(toks.ok()) << toks.status();
  EXPECT_TRUE(toks->without_chat_template().empty());
  auto tok = tokenizer::load_tokenizer(folder);
  ASSERT_TRUE(tok.ok());
  const auto ids_of = [&](std::string_view text) {
    std::vector<TokenId> ids;
    EXPECT_TRUE((*tok)->encode(text, false, &ids).ok());
    return ids;
  };
  const std::string messages = R"("messages":[{"role":"user","content":"Hi"}])";
  ParsedRequest p;
  ASSERT_TRUE(
      parse_request(ApiRoute::kChatCompletions, "{" + messages + "}", *toks, kNoTokenLimit, &p)
          .ok());
  EXPECT_EQ(p.tokens, ids_of("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
  ASSERT_TRUE(
      parse_request(ApiRoute::kChatCompletions,
                    "{" + messages + R"(,"chat_template_kwargs":{"enable_thinking":false}})", *toks,
                    kNoTokenLimit, &p)
          .ok());
  EXPECT_EQ(p.tokens, ids_of("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                             "</think>\n\n"));
  ASSERT_TRUE(
      parse_request(ApiRoute::kChatCompletions,
                    R"({"tools":[{"type":"function","function":{"name":"f"}}],)" + messages + "}",
                    *toks, kNoTokenLimit, &p)
          .ok());
  EXPECT_EQ(p.tokens, ids_of("<|im_start|>system\n# Tools\n\nYou may call one or more functions to "
                             "assist with the user query.\n\nYou are provided with function "
                             "signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": "
                             "\"function\", \"function\": {\"name\": \"f\"}}\n</tools>\n\nFor "
                             "each function call, return a json object with function name and "
                             "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                             "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
                             "</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                             "<|im_start|>assistant\n"))
      << "tools come before the messages";
  const Status both = parse_request(ApiRoute::kChatCompletions,
                                    "{" + messages + R"(,"continue_final_message":true})", *toks,
                                    kNoTokenLimit, &p);
  EXPECT_EQ(both.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(both.message()).find("add_generation_prompt"), std::string::npos);
  const Status kwargs =
      parse_request(ApiRoute::kChatCompletions, "{" + messages + R"(,"chat_template_kwargs":[1]})",
                    *toks, kNoTokenLimit, &p);
  EXPECT_NE(std::string(kwargs.message()).find("chat_template_kwargs"), std::string::npos);
}

// A conversation the template refuses is the client's mistake, in the template's words.
TEST(PromptTokenizers, AConversationTheTemplateRefusesIsA400WithItsWords) {
  auto toks = PromptTokenizers::load({testing::tokenizer_dir() + "/gemma3"});
  ASSERT_TRUE(toks.ok()) << toks.status();
  ParsedRequest p;
  const Status s =
      parse_request(ApiRoute::kChatCompletions,
                    R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]})",
                    *toks, kNoTokenLimit, &p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("Conversation roles must alternate"), std::string::npos)
      << s;
}

TEST(PromptTokenizers, AChatTemplateFileReplacesTheModelsAndMustGoWithATokenizer) {
  const std::string folder = testing::tokenizer_dir() + "/qwen3";
  const std::string file = ::testing::TempDir() + "/kvgate-template.jinja";
  {
    std::ofstream f(file);
    f << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
  }
  auto toks = PromptTokenizers::load({folder}, {file});
  ASSERT_TRUE(toks.ok()) << toks.status();
  ParsedRequest p;
  ASSERT_TRUE(parse_request(ApiRoute::kChatCompletions,
                            R"({"messages":[{"role":"user","content":"Hi"}]})", *toks,
                            kNoTokenLimit, &p)
                  .ok());
  auto tok = tokenizer::load_tokenizer(folder);
  std::vector<TokenId> expected;
  ASSERT_TRUE((*tok)->encode("[user] Hi\n", false, &expected).ok());
  EXPECT_EQ(p.tokens, expected);
  EXPECT_FALSE(PromptTokenizers::load({folder}, {"other=" + file}).ok())
      << "a template for a model without a tokenizer";
  {
    std::ofstream f(file);
    f << "line one\n{% if %}";
  }
  auto bad = PromptTokenizers::load({folder}, {file});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find(":2:"), std::string::npos)
      << "names the template line: " << bad.status();
}

}  // namespace
}  // namespace kvgate::app
