// The bad-input table: every client mistake gets an OpenAI-shaped error, and a worker dying
// mid-stream ends that client's stream with an error event while everyone else is served.
#include <simdjson.h>

#include "app/gateway_fixture.h"
#include "kvgate/http/sse.h"

namespace kvgate::app {
namespace {

// {"error": {"message": ..., "type": ..., "code": status}}
void expect_openai_error(const http::ClientResponse& r, unsigned status) {
  EXPECT_EQ(r.status, status) << r.body;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(r.body).get(doc), simdjson::SUCCESS) << r.body;
  std::string_view message, type;
  EXPECT_EQ(doc["error"]["message"].get_string().get(message), simdjson::SUCCESS) << r.body;
  EXPECT_EQ(doc["error"]["type"].get_string().get(type), simdjson::SUCCESS) << r.body;
  EXPECT_FALSE(message.empty());
  // A server-side failure says so; only a client's mistake is an invalid_request_error.
  if (status >= 500) {
    EXPECT_TRUE(type == "server_error" || type == "upstream_error") << r.body;
  } else if (status == 400 || status == 413) {
    EXPECT_EQ(type, "invalid_request_error") << r.body;
  }
}

TEST_F(GatewayTest, ClientMistakesGetOpenAIErrors) {
  start_worker();
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0)};
  cfg.max_payload_bytes = 64 << 10;
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1));
  auto c = client();
  for (const char* body :
       {"{bad json", "[1,2,3]", R"({"model":"mock-8b","prompt":5})",
        R"({"model":"mock-8b","prompt":"x","stream":"yes"})", R"({"model":7,"prompt":"x"})",
        R"({"model":"mock-8b"})", R"({"prompt":[1,-2,3]})"}) {
    auto r = c.post("/v1/completions", body);
    ASSERT_TRUE(r.ok());
    expect_openai_error(*r, 400);
  }
  // (The last: JSON that breaks inside a content part once took the whole gateway down.)
  for (const char* body :
       {R"({"model":"mock-8b","messages":"hi"})",
        R"({"model":"mock-8b","messages":[{"content":"x"}]})",
        R"({"model":"mock-8b","messages":[{"role":"user","content":[{"type":"text":"Hi"}]}]})"}) {
    auto r = c.post("/v1/chat/completions", body);
    ASSERT_TRUE(r.ok());
    expect_openai_error(*r, 400);
  }
  auto unknown = c.post("/v1/completions", R"({"model":"no-such-model","prompt":"hello"})");
  ASSERT_TRUE(unknown.ok());
  expect_openai_error(*unknown, 404);
  auto big = c.post("/v1/completions", completion(std::string(100 << 10, 'a')));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->status, 413u);
  // After every mistake the gateway still serves.
  auto fine = client().post("/v1/completions", completion("still fine"));
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(fine->status, 200u);
}

TEST_F(GatewayTest, NoRoutableWorkerIs503WithRetryAfter) {
  auto cfg = base_config();
  start_gateway(cfg);
  auto r = client().post("/v1/completions", completion("anyone there"));
  ASSERT_TRUE(r.ok());
  expect_openai_error(*r, 503);
  EXPECT_EQ(r->header("retry-after"), "1");
  auto ready = client().get("/readiness");
  EXPECT_EQ(ready->status, 503u);
  EXPECT_EQ(client().get("/liveness")->status, 200u);
}

TEST_F(GatewayTest, WorkerDyingMidStreamEndsThatStreamWithAnErrorEvent) {
  start_worker(/*speedup=*/1);
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1));
  http::SyncClient c("127.0.0.1", gateway_->port());
  http::SseParser sse;
  std::vector<std::string> events;
  bool cut = false;
  auto r = c.stream({.method = http::Verb::post,
                     .target = "/v1/completions",
                     .body = completion("a long story please", 400, /*stream=*/true)},
                    [&](std::string_view piece) {
                      sse.feed(piece, [&](std::string_view data) { events.emplace_back(data); });
                      if (!cut && events.size() >= 3) {
                        cut =
                            true;  // the worker drops every connection, streams in flight included
                        http::SyncClient admin("127.0.0.1", worker_port(0));
                        (void)admin.post("/admin/fault/close_listener", R"({"duration_ms": 300})");
                      }
                      return Status();
                    });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  ASSERT_TRUE(cut);
  ASSERT_FALSE(events.empty());
  EXPECT_NE(events.back().find("\"error\""), std::string::npos) << events.back();
  EXPECT_NE(events.back().find("upstream_error"), std::string::npos);
  EXPECT_FALSE(sse.done()) << "a cut stream must not look complete";
  // The gateway keeps serving once the worker is back.
  ASSERT_TRUE(wait_until(
      [&] {
        auto ok = client().post("/v1/completions", completion("after the cut"));
        return ok.ok() && ok->status == 200;
      },
      std::chrono::milliseconds(10000)));
}

}  // namespace
}  // namespace kvgate::app
