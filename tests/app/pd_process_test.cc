// Prefill/decode launch lines on the kvgate binary, in front of a prefill and a decode kvgate-mock
// process: the SGLang model gateway's static line (pairs joined by bootstrap rooms) and vLLM
// router's (NixlConnector's sequence, kv_transfer_params). The official OpenAI Node SDK's
// completions, chat and streamed chat with usage pass through both; on vLLM's, the decider sends
// a prompt the decode worker already holds to it alone.
#include <gtest/gtest.h>

#include <filesystem>

#include "drills/harness.h"
#include "kvgate/http/client.h"
#include "support/external.h"
#include "support/wait.h"

namespace kvgate::drills {
namespace {

// Runs the OpenAI SDK's generations through the gateway on `port`.
void sdk_generations_pass(uint16_t port) {
  const std::string modules = testing::npm_dir() + "/node_modules";
  ASSERT_TRUE(std::filesystem::exists(modules + "/openai/package.json"))
      << "the OpenAI SDK is not in " << modules << ": run tools/setup.sh (make setup)";
  const char* source = std::getenv("KVGATE_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  Child node({"/usr/bin/env", "NODE_PATH=" + modules, "node",
              std::string(source) + "/tests/app/clients/openai_sdk.cjs",
              "http://127.0.0.1:" + std::to_string(port) + "/v1", "unused", "mock-8b",
              "generations"});
  ASSERT_TRUE(node.started());
  const auto code = node.wait(std::chrono::seconds(60));
  const std::string said = node.output() + node.errors();
  ASSERT_TRUE(code.has_value()) << "node did not finish: " << said;
  EXPECT_EQ(*code, 0) << said;
  for (const char* step : {"ok completions.create", "ok chat.completions.create\n",
                           "ok chat.completions.create stream", "all ok"}) {
    EXPECT_NE(said.find(step), std::string::npos) << step << " missing from:\n" << said;
  }
}

// A prefill and a decode process of two workers each, and the gateway's command line for them.
struct PdFleet {
  MockFleet prefill{2, {"--pd-role", "prefill", "--bootstrap-port", "0"}};
  MockFleet decode{2, {"--pd-role", "decode"}};
  std::vector<std::string> line(std::vector<std::string> head, bool bootstrap_ports) const {
    for (size_t i = 0; i < prefill.size(); ++i) {
      head.insert(head.end(), {"--prefill", prefill.url(i)});
      if (bootstrap_ports) head.push_back(std::to_string(prefill.bootstrap_port(i)));
    }
    for (size_t i = 0; i < decode.size(); ++i) head.insert(head.end(), {"--decode", decode.url(i)});
    return head;
  }
};

TEST(PdProcess, TheSglangLaunchLineServesTheOpenAiSdk) {
  PdFleet f;
  ASSERT_TRUE(f.prefill.ready() && f.decode.ready());
  for (size_t i = 0; i < f.prefill.size(); ++i) ASSERT_NE(f.prefill.bootstrap_port(i), 0);
  GatewayProcess gw({}, f.line({"--log-level", "warn", "--pd-disaggregation", "--prefill-policy",
                                "cache_aware", "--decode-policy", "power_of_two"},
                               /*bootstrap_ports=*/true));
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(4, 20));
  sdk_generations_pass(gw.port());
  EXPECT_GE(gw.metric_sum("kvgate_pd_pairs_total").value_or(0), 3);
  EXPECT_EQ(gw.metric_sum("kvgate_pd_prefill_failures_total").value_or(-1), 0);
}

TEST(PdProcess, TheVllmLaunchLineServesTheOpenAiSdkAndTheDeciderSavesTransfers) {
  PdFleet f;
  ASSERT_TRUE(f.prefill.ready() && f.decode.ready());
  GatewayProcess gw({}, f.line({"--log-level", "warn", "--vllm-pd-disaggregation",
                                "--pd-local-prefill-share", "0.8"},
                               /*bootstrap_ports=*/false));
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(4, 20));
  sdk_generations_pass(gw.port());
  EXPECT_GE(gw.metric_sum("kvgate_pd_pairs_total").value_or(0), 3);
  EXPECT_EQ(gw.metric_sum("kvgate_pd_prefill_failures_total").value_or(-1), 0);

  // One long prompt again and again: once a decode worker holds it (its KV events say so), the
  // decider sends it there alone. Both decode workers may need it first (power_of_two).
  http::SyncClient c("127.0.0.1", gw.port());
  std::string prompt;
  for (int i = 0; i < 120; ++i) prompt += "word" + std::to_string(i) + " ";
  const std::string body = R"({"model":"mock-8b","max_tokens":2,"prompt":")" + prompt + R"("})";
  const bool saved = testing::wait_until(
      [&] {
        auto r = c.post("/v1/completions", body);
        EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : std::string());
        return gw.metric_sum("kvgate_pd_local_prefills_total").value_or(0) >= 1;
      },
      std::chrono::seconds(20));
  EXPECT_TRUE(saved) << "no request was prefilled on its decode worker";
}

}  // namespace
}  // namespace kvgate::drills
