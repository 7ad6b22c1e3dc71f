// The routes beyond generation that clients of vLLM and SGLang call (embeddings, Responses,
// rerank, score, SGLang's info routes), proxied to a worker; and CORS for pages on other origins.
#include <filesystem>

#include "app/gateway_fixture.h"
#include "kvgate/tokenizer/tokenizer.h"
#include "support/external.h"

namespace kvgate::app {
namespace {

using ApiRoutesTest = GatewayTest;

http::ClientRequest post_json(std::string target, std::string body) {
  return {.method = http::Verb::post, .target = std::move(target), .body = std::move(body)};
}

TEST_F(ApiRoutesTest, PoolingRoutesReachAWorkerAndAnswerInTheirShape) {
  ASSERT_TRUE(start());
  auto c = client();
  auto e = c.request(
      post_json("/v1/embeddings", R"({"model":"mock-8b","input":["first text","second"]})"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->status, 200u) << e->body;
  EXPECT_EQ(e->header("x-kvgate-worker"), url_of(0));
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(e->body).get(doc), simdjson::SUCCESS) << e->body;
  EXPECT_EQ(doc["data"].get_array().size(), 2u);
  EXPECT_EQ(doc["data"].at(0)["embedding"].get_array().size(), 8u);
  EXPECT_GT(doc["usage"]["prompt_tokens"].get_uint64().value(), 0u);

  auto r = c.request(post_json(
      "/v1/rerank",
      R"({"model":"mock-8b","query":"kv cache routing","documents":["a story about cats","kv cache routing explained"]})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u) << r->body;
  ASSERT_EQ(p.parse(r->body).get(doc), simdjson::SUCCESS) << r->body;
  EXPECT_EQ(doc["results"].at(0)["index"].get_uint64().value(), 1u) << "the relevant one first";

  auto s = c.request(
      post_json("/v1/score",
                R"({"model":"mock-8b","text_1":"kv cache","text_2":["kv cache","other words"]})"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->status, 200u) << s->body;
  ASSERT_EQ(p.parse(s->body).get(doc), simdjson::SUCCESS) << s->body;
  EXPECT_EQ(doc["data"].get_array().size(), 2u);
  EXPECT_DOUBLE_EQ(doc["data"].at(0)["score"].get_double().value(), 1.0);

  // The gateway reads what it routes on and names the missing field.
  auto bad = c.request(post_json("/v1/embeddings", R"({"model":"mock-8b"})"));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400u);
  EXPECT_NE(bad->body.find("'input'"), std::string::npos) << bad->body;
  auto no_docs = c.request(post_json("/v1/rerank", R"({"query":"q"})"));
  ASSERT_TRUE(no_docs.ok());
  EXPECT_EQ(no_docs->status, 400u);
  EXPECT_NE(no_docs->body.find("'documents'"), std::string::npos) << no_docs->body;
}

// The Responses API, whole and streamed; a conversation continued through it reuses the blocks of
// its earlier turns because the gateway renders it as the engine does and routes on that.
TEST_F(ApiRoutesTest, ResponsesAnswerWholeAndStreamedAndHitTheCache) {
  ASSERT_TRUE(start(/*workers=*/2, [&](GatewayConfig& c) {
    c.worker_urls = {url_of(0), url_of(1)};
  }));
  ASSERT_TRUE(wait_routable(2));
  auto c = client();
  std::string instructions;
  for (int i = 0; i < 60; ++i) instructions += "rule" + std::to_string(i) + " ";
  const std::string first = R"({"model":"mock-8b","instructions":")" + instructions +
                            R"(","input":"hello there","max_output_tokens":4})";
  auto a = c.request(post_json("/v1/responses", first));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->status, 200u) << a->body;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(a->body).get(doc), simdjson::SUCCESS) << a->body;
  EXPECT_EQ(doc["object"].get_string().value(), "response");
  EXPECT_EQ(doc["output"].at(0)["content"].at(0)["type"].get_string().value(), "output_text");
  const std::string worker(a->header("x-kvgate-worker"));
  // The first turn's blocks reach the index through the worker's KV events.
  ASSERT_TRUE(wait_until([&] { return gateway_->index().stats().memberships >= 4; },
                         std::chrono::milliseconds(5000)));

  // The next turn, as items: same instructions, the first turn, then more.
  const std::string second =
      R"({"model":"mock-8b","instructions":")" + instructions +
      R"(","input":[{"role":"user","content":"hello there"},{"role":"assistant","content":[{"type":"output_text","text":"hi"}]},{"role":"user","content":"and more"}],"max_output_tokens":4})";
  auto b = c.request(post_json("/v1/responses", second));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->status, 200u) << b->body;
  EXPECT_EQ(b->header("x-kvgate-worker"), worker) << "routed to the worker holding the prefix";
  ASSERT_EQ(p.parse(b->body).get(doc), simdjson::SUCCESS) << b->body;
  EXPECT_GE(doc["usage"]["input_tokens_details"]["cached_tokens"].get_uint64().value(), 48u)
      << b->body;

  std::string streamed;
  auto s = c.stream(
      post_json("/v1/responses",
                R"({"model":"mock-8b","input":"stream me","stream":true,"max_output_tokens":3})"),
      [&](std::string_view piece) {
        streamed.append(piece);
        return Status();
      });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->status, 200u);
  EXPECT_EQ(s->header("cache-control"), "no-cache");
  EXPECT_NE(streamed.find(R"("type":"response.created")"), std::string::npos) << streamed;
  EXPECT_NE(streamed.find(R"("type":"response.output_text.delta")"), std::string::npos);
  EXPECT_NE(streamed.find(R"("type":"response.completed")"), std::string::npos) << streamed;
}

TEST_F(ApiRoutesTest, SglangInfoRoutesAreAnsweredByAWorker) {
  ASSERT_TRUE(start());
  auto c = client();
  for (const char* path : {"/get_model_info", "/get_server_info", "/health_generate"}) {
    auto r = c.get(path);
    ASSERT_TRUE(r.ok()) << path;
    EXPECT_EQ(r->status, 200u) << path << ": " << r->body;
    EXPECT_EQ(r->header("x-kvgate-worker"), url_of(0)) << path;
  }
  auto info = c.get("/get_model_info");
  ASSERT_TRUE(info.ok());
  EXPECT_NE(info->body.find(R"("model_path":"mock-8b")"), std::string::npos) << info->body;
}

TEST_F(ApiRoutesTest, WithNoRoutableWorkerTheInfoRoutesSayItAsAServerError) {
  start_worker();
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0)};
  fleets_[0]->stop();
  start_gateway(cfg);
  auto r = client().get("/get_model_info");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503u);
  EXPECT_EQ(r->body.find("invalid_request_error"), std::string::npos) << r->body;
}

TEST_F(ApiRoutesTest, CorsAnswersPreflightsAndMarksAnswersForAllowedOrigins) {
  ASSERT_TRUE(start(1, [](GatewayConfig& c) {
    c.cors_allowed_origins = {"https://app.example"};
    c.api_key = "sk-cors";
  }));
  auto c = client();
  http::ClientRequest pre{.method = http::Verb::options, .target = "/v1/chat/completions"};
  pre.headers = {{"origin", "https://app.example"},
                 {"access-control-request-method", "POST"},
                 {"access-control-request-headers", "authorization, content-type"}};
  auto p = c.request(pre);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->status, 204u) << "no key needed for a preflight";
  EXPECT_EQ(p->header("access-control-allow-origin"), "https://app.example");
  EXPECT_NE(p->header("access-control-allow-methods").find("POST"), std::string_view::npos);
  EXPECT_EQ(p->header("access-control-allow-headers"), "authorization, content-type");

  // A refusal carries the headers too, or the page could not read why.
  http::ClientRequest get{.method = http::Verb::get, .target = "/v1/models"};
  get.headers = {{"origin", "https://app.example"}};
  auto refused = c.request(get);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 401u);
  EXPECT_EQ(refused->header("access-control-allow-origin"), "https://app.example");
  get.headers.emplace_back("authorization", "Bearer sk-cors");
  auto ok = c.request(get);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200u);
  EXPECT_EQ(ok->header("access-control-allow-origin"), "https://app.example");
  EXPECT_NE(ok->header("access-control-expose-headers").find("x-request-id"),
            std::string_view::npos);

  // Another origin: no CORS headers, and its preflight is refused by name.
  get.headers[0].second = "https://evil.example";
  auto other = c.request(get);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->header("access-control-allow-origin"), "");
  pre.headers[0].second = "https://evil.example";
  auto denied = c.request(pre);
  ASSERT_TRUE(denied.ok());
  EXPECT_EQ(denied->status, 403u);
  EXPECT_NE(denied->body.find("evil.example"), std::string::npos) << denied->body;
}

TEST_F(ApiRoutesTest, WithoutCorsConfiguredNoCorsHeadersAreSent) {
  ASSERT_TRUE(start());
  http::ClientRequest get{.method = http::Verb::get, .target = "/v1/models"};
  get.headers = {{"origin", "https://app.example"}};
  auto r = client().request(get);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->header("access-control-allow-origin"), "");
}

// With the model's tokenizer loaded, /tokenize and /detokenize are answered here, in vLLM's
// shapes, with the ids routing hashes; a model without one is answered by a worker.
TEST_F(ApiRoutesTest, TokenizeAndDetokenizeAnswerWithTheModelsTokenizer) {
  const std::string path = testing::tokenizer_dir() + "/qwen3/tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(path)) << path << ": run tools/setup.sh";
  ASSERT_TRUE(start(1, [&](GatewayConfig& c) { c.tokenizers = {"qwen=" + path}; }));
  auto reference = tokenizer::load_tokenizer(path);
  ASSERT_TRUE(reference.ok());
  std::vector<TokenId> expected;
  ASSERT_TRUE((*reference)->encode("Hello, world! \xE4\xBD\xA0\xE5\xA5\xBD", true, &expected).ok());
  auto c = client();
  auto r = c.post("/tokenize", R"({"model":"qwen","prompt":"Hello, world! \u4f60\u597d"})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200u) << r->body;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(r->body);
  EXPECT_EQ(doc["count"].get_uint64().value(), expected.size());
  std::vector<TokenId> got;
  for (simdjson::dom::element e : doc["tokens"].get_array()) {
    got.push_back(static_cast<TokenId>(e.get_uint64().value()));
  }
  EXPECT_EQ(got, expected);
  std::string ids;
  for (size_t i = 0; i < got.size(); ++i) ids += (i ? "," : "") + std::to_string(got[i]);
  auto back = c.post("/detokenize", R"({"model":"qwen","tokens":[)" + ids + "]}");
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->status, 200u) << back->body;
  EXPECT_EQ(std::string(parser.parse(back->body)["prompt"].get_string().value()),
            "Hello, world! \xE4\xBD\xA0\xE5\xA5\xBD");
  auto bad = c.post("/detokenize", R"({"model":"qwen","tokens":[999999999]})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400u);
  // A model with no tokenizer here: the worker answers, in the same shape.
  auto other = c.post("/tokenize", R"({"model":"mock-8b","prompt":"hi"})");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 200u) << other->body;
  EXPECT_NE(other->body.find(R"("count":)"), std::string::npos) << other->body;
}

// OpenAI's n: several choices of one prompt, numbered as vLLM numbers them, the prompt counted
// once in the usage; streamed, each chunk names its choice.
TEST_F(ApiRoutesTest, SeveralChoicesOfOnePromptAreAnsweredWholeAndStreamed) {
  ASSERT_TRUE(start(1));
  auto c = client();
  simdjson::dom::parser parser;
  auto one = c.post("/v1/completions", R"({"model":"mock-8b","prompt":"pick one","max_tokens":3})");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->status, 200u) << one->body;
  const uint64_t prompt_tokens =
      parser.parse(one->body)["usage"]["prompt_tokens"].get_uint64().value();
  auto three =
      c.post("/v1/completions", R"({"model":"mock-8b","prompt":"pick one","max_tokens":3,"n":3})");
  ASSERT_TRUE(three.ok());
  ASSERT_EQ(three->status, 200u) << three->body;
  simdjson::dom::element doc = parser.parse(three->body);
  simdjson::dom::array choices = doc["choices"].get_array();
  ASSERT_EQ(choices.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(choices.at(i)["index"].get_uint64().value(), i);
  EXPECT_EQ(doc["usage"]["prompt_tokens"].get_uint64().value(), prompt_tokens);
  EXPECT_EQ(doc["usage"]["completion_tokens"].get_uint64().value(), 9u);

  auto streamed =
      c.post("/v1/chat/completions", R"({"model":"mock-8b","max_tokens":2,"n":2,"stream":true,)"
                                     R"("messages":[{"role":"user","content":"two ways"}]})");
  ASSERT_TRUE(streamed.ok());
  ASSERT_EQ(streamed->status, 200u) << streamed->body;
  EXPECT_NE(streamed->body.find(R"("index":0)"), std::string::npos) << streamed->body;
  EXPECT_NE(streamed->body.find(R"("index":1)"), std::string::npos) << streamed->body;
  EXPECT_NE(streamed->body.find("data: [DONE]"), std::string::npos);
  auto refused = c.post("/v1/completions", R"({"model":"mock-8b","prompt":"x","n":0})");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 400u) << refused->body;
}

// Chat messages are the engine's to render: the worker's /tokenize counts what the chat route
// would compute (the mock answers as vLLM does), and /detokenize gives the text back.
TEST_F(ApiRoutesTest, TokenizeOfChatMessagesIsTheWorkersAndCountsWhatChatComputes) {
  ASSERT_TRUE(start(1));
  auto c = client();
  const std::string messages = R"([{"role":"system","content":"be brief"},)"
                               R"({"role":"user","content":"how many tokens is this"}])";
  auto counted = c.post("/tokenize", R"({"model":"mock-8b","messages":)" + messages + "}");
  ASSERT_TRUE(counted.ok());
  ASSERT_EQ(counted->status, 200u) << counted->body;
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(counted->body);
  const uint64_t count = doc["count"].get_uint64().value();
  EXPECT_EQ(doc["tokens"].get_array().size(), count);
  EXPECT_GT(doc["max_model_len"].get_uint64().value(), 0u);
  auto chat = c.post("/v1/chat/completions",
                     R"({"model":"mock-8b","max_tokens":1,"messages":)" + messages + "}");
  ASSERT_TRUE(chat.ok());
  ASSERT_EQ(chat->status, 200u) << chat->body;
  EXPECT_EQ(parser.parse(chat->body)["usage"]["prompt_tokens"].get_uint64().value(), count);

  auto text = c.post("/tokenize", R"({"model":"mock-8b","prompt":"abcdefgh"})");
  ASSERT_TRUE(text.ok());
  ASSERT_EQ(text->status, 200u) << text->body;
  std::string ids;
  for (simdjson::dom::element e : parser.parse(text->body)["tokens"].get_array()) {
    ids += (ids.empty() ? "" : ",") + std::to_string(e.get_uint64().value());
  }
  auto back = c.post("/detokenize", R"({"model":"mock-8b","tokens":[)" + ids + "]}");
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->status, 200u) << back->body;
  EXPECT_FALSE(std::string(parser.parse(back->body)["prompt"].get_string().value()).empty());
  auto bad = c.post("/tokenize", R"({"model":"mock-8b"})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400u) << bad->body;
}

// The tokenizer matters: engines that tokenize with a real model's tokenizer publish blocks of
// that model's ids. A gateway with the same tokenizer finds them and routes each continued prompt
// to the worker holding it; with the test tokenizer it finds nothing and routes by load.
TEST_F(ApiRoutesTest, WithTheEnginesTokenizerContinuedPromptsFindTheirCache) {
  const std::string path = testing::tokenizer_dir() + "/qwen3/tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(path)) << path << ": run tools/setup.sh";
  constexpr size_t kWorkers = 4, kPrompts = 12;
  for (size_t i = 0; i < kWorkers; ++i) {
    start_worker_with([&](mock::FleetOptions& o) { o.tokenizer = path; });
  }
  std::vector<std::string> prompts;
  for (size_t i = 0; i < kPrompts; ++i) {
    std::string p = "Conversation " + std::to_string(i) + ":";
    for (size_t k = 0; k < 200; ++k) p += " w" + std::to_string(i * 1000 + k);
    prompts.push_back(std::move(p));
  }
  // Each prompt cached on one worker, placed there directly.
  for (size_t i = 0; i < kPrompts; ++i) {
    http::SyncClient direct("127.0.0.1", worker_port(i % kWorkers));
    auto r = direct.post("/v1/completions", completion(prompts[i], 1));
    ASSERT_TRUE(r.ok() && r->status == 200u);
  }
  // Continued prompts through a gateway: how many the gateway routed by a cached prefix it saw
  // in its index, and how many found their cache on the worker. Without the engines' tokenizer
  // the second can still be non-zero by chance (a load-balanced pick that lands on the holder),
  // so the gateway's own branch count is what tells the two tokenizers apart.
  struct Seen {
    size_t affinity = 0, hits = 0;
  };
  const auto hits_through = [&](std::vector<std::string> tokenizers, const std::string& more) {
    if (gateway_) gateway_->stop(std::chrono::milliseconds(2000));
    auto cfg = base_config();
    for (size_t i = 0; i < kWorkers; ++i) cfg.worker_urls.push_back(url_of(i));
    cfg.tokenizers = std::move(tokenizers);
    // No warm-up diversions: a worker that drew few of the prompts is thin, and the rule would
    // send it a share of the hits (kWarmup, not kAffinity) by chance.
    cfg.cache_aware.warmup_thin_ratio = 0;
    start_gateway(cfg);
    EXPECT_TRUE(wait_routable(kWorkers));
    // Until the index holds what the workers published (each prompt is dozens of blocks) and
    // stops growing: a fresh gateway rebuilds it from the workers' replay.
    double last = -1;
    EXPECT_TRUE(wait_until(
        [&] {
          auto m = client().get("/metrics");
          const double now = m.ok() ? metric_value(m->body, "kvgate_index_memberships ") : -1;
          const bool settled = now >= kPrompts * 30 && now == last;
          last = now;
          return settled;
        },
        std::chrono::seconds(10), std::chrono::milliseconds(100)));
    Seen seen;
    auto c = client();
    for (size_t i = 0; i < kPrompts; ++i) {
      auto r = c.post("/v1/completions", completion(prompts[i] + more, 1));
      EXPECT_TRUE(r.ok() && r->status == 200u);
      if (r.ok()) seen.hits += cached_tokens(r->body) > 0 ? 1 : 0;
    }
    auto m = client().get("/metrics");
    EXPECT_TRUE(m.ok());
    if (m.ok()) {
      const double affinity =
          metric_value(m->body, "kvgate_router_decisions_total{branch=\"affinity\"");
      seen.affinity = affinity > 0 ? static_cast<size_t>(affinity) : 0;
    }
    return seen;
  };
  const Seen blind = hits_through({}, " and then some");
  const Seen seeing = hits_through({path}, " and more");
  std::printf(
      "continued prompts routed to a cached prefix / that found their cache: %zu/%zu with the "
      "engines' tokenizer, %zu/%zu with the test tokenizer (of %zu)\n",
      seeing.affinity, seeing.hits, blind.affinity, blind.hits, kPrompts);
  EXPECT_EQ(seeing.affinity, kPrompts);
  EXPECT_EQ(seeing.hits, kPrompts);
  EXPECT_EQ(blind.affinity, 0u) << "the test tokenizer's ids match no published block";
}

// A chat answer is encoded after it went to the client, ready for the next turn that resends it:
// whole and streamed answers alike, none with --no-answer-prewarm.
TEST_F(ApiRoutesTest, ChatAnswersAreEncodedAheadOfTheNextTurn) {
  const std::string folder = testing::tokenizer_dir() + "/qwen3";
  ASSERT_TRUE(std::filesystem::exists(folder)) << folder << ": run tools/setup.sh";
  start_worker_with([&](mock::FleetOptions& o) { o.tokenizer = folder + "/tokenizer.json"; });
  const auto encoded_after_two_chats = [&](bool prewarm) {
    if (gateway_) gateway_->stop(std::chrono::milliseconds(2000));
    auto cfg = base_config();
    cfg.worker_urls.push_back(url_of(0));
    cfg.tokenizers = {folder};
    cfg.answer_prewarm = prewarm;
    start_gateway(cfg);
    EXPECT_TRUE(wait_routable(1));
    auto c = client();
    const std::string messages =
        R"("messages":[{"role":"user","content":"Name three rivers of Europe."}],"max_tokens":8)";
    auto whole = c.post("/v1/chat/completions", R"({"model":"mock-8b",)" + messages + "}");
    EXPECT_TRUE(whole.ok() && whole->status == 200u);
    auto streamed =
        c.post("/v1/chat/completions", R"({"model":"mock-8b","stream":true,)" + messages + "}");
    EXPECT_TRUE(streamed.ok() && streamed->status == 200u);
    double encoded = -1;
    wait_until(
        [&] {
          auto m = client().get("/metrics");
          encoded =
              m.ok() ? metric_value(m->body, "kvgate_tokenizer_answers_total{outcome=\"encoded\"")
                     : -1;
          return encoded >= 2;
        },
        std::chrono::seconds(prewarm ? 10 : 1));
    return encoded;
  };
  EXPECT_EQ(encoded_after_two_chats(true), 2);
  EXPECT_EQ(encoded_after_two_chats(false), 0);
}

}  // namespace
}  // namespace kvgate::app
