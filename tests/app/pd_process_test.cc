// The SGLang model gateway's static prefill/decode launch line, on the kvgate binary, in front of
// a prefill and a decode kvgate-mock process that pair through their bootstrap rooms: the official
// OpenAI Node SDK's completions, chat and streamed chat with usage pass through it.
#include <gtest/gtest.h>

#include <filesystem>

#include "drills/harness.h"
#include "support/external.h"

namespace kvgate::drills {
namespace {

TEST(PdProcess, TheSglangLaunchLineServesTheOpenAiSdk) {
  const std::string modules = testing::npm_dir() + "/node_modules";
  ASSERT_TRUE(std::filesystem::exists(modules + "/openai/package.json"))
      << "the OpenAI SDK is not in " << modules << ": run tools/setup.sh (make setup)";
  MockFleet prefill(2, {"--pd-role", "prefill", "--bootstrap-port", "0"});
  MockFleet decode(2, {"--pd-role", "decode"});
  ASSERT_TRUE(prefill.ready() && decode.ready());
  std::vector<std::string> line = {"--log-level", "warn", "--pd-disaggregation"};
  for (size_t i = 0; i < prefill.size(); ++i) {
    ASSERT_NE(prefill.bootstrap_port(i), 0);
    line.insert(line.end(),
                {"--prefill", prefill.url(i), std::to_string(prefill.bootstrap_port(i))});
  }
  for (size_t i = 0; i < decode.size(); ++i) line.insert(line.end(), {"--decode", decode.url(i)});
  line.insert(line.end(), {"--prefill-policy", "cache_aware", "--decode-policy", "power_of_two"});
  GatewayProcess gw({}, line);
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(4, 20));

  const char* source = std::getenv("KVGATE_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  Child node({"/usr/bin/env", "NODE_PATH=" + modules, "node",
              std::string(source) + "/tests/app/clients/openai_sdk.cjs",
              "http://127.0.0.1:" + std::to_string(gw.port()) + "/v1", "unused", "mock-8b",
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
  EXPECT_GE(gw.metric_sum("kvgate_pd_pairs_total").value_or(0), 3);
  EXPECT_EQ(gw.metric_sum("kvgate_pd_prefill_failures_total").value_or(-1), 0);
}

}  // namespace
}  // namespace kvgate::drills
