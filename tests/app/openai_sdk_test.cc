// The official OpenAI Node SDK (npm `openai`, installed by tools/setup.sh outside the repository)
// runs a client's every call through the gateway: tests/app/clients/openai_sdk.cjs.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "app/gateway_fixture.h"
#include "support/child_process.h"
#include "support/external.h"

namespace kvgate::app {
namespace {

using OpenAiSdkTest = GatewayTest;

TEST_F(OpenAiSdkTest, EveryCallAClientMakesWorksThroughTheGateway) {
  const std::string modules = testing::npm_dir() + "/node_modules";
  ASSERT_TRUE(std::filesystem::exists(modules + "/openai/package.json"))
      << "the OpenAI SDK is not in " << modules << ": run tools/setup.sh (make setup)";
  ASSERT_TRUE(start(1, [](GatewayConfig& c) { c.api_key = "sk-sdk-test"; }));
  const char* source = std::getenv("KVGATE_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  testing::Child node({"/usr/bin/env", "NODE_PATH=" + modules, "node",
                       std::string(source) + "/tests/app/clients/openai_sdk.cjs",
                       "http://127.0.0.1:" + std::to_string(gateway_->port()) + "/v1",
                       "sk-sdk-test", "mock-8b"});
  ASSERT_TRUE(node.started());
  const auto code = node.wait(std::chrono::seconds(60));
  const std::string said = node.output() + node.errors();
  ASSERT_TRUE(code.has_value()) << "node did not finish: " << said;
  EXPECT_EQ(*code, 0) << said;
  for (const char* step : {"ok models.list", "ok models.retrieve", "ok completions.create",
                           "ok chat.completions.create\n", "ok chat.completions.create stream",
                           "ok embeddings.create", "ok responses.create", "ok embeddings base64",
                           "ok responses.stream", "ok errors", "all ok"}) {
    EXPECT_NE(said.find(step), std::string::npos) << step << " missing from:\n" << said;
  }
}

// The mock itself (what every test and the demo see) answers the SDK's calls in vLLM's shapes:
// base64 embeddings decoded to the floats asked for plainly, a Responses stream the SDK's
// helper accumulates.
TEST_F(OpenAiSdkTest, TheMockAnswersTheSdkAsAnEngineDoes) {
  const std::string modules = testing::npm_dir() + "/node_modules";
  ASSERT_TRUE(std::filesystem::exists(modules + "/openai/package.json"))
      << "the OpenAI SDK is not in " << modules << ": run tools/setup.sh (make setup)";
  start_worker();
  const char* source = std::getenv("KVGATE_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  testing::Child node({"/usr/bin/env", "NODE_PATH=" + modules, "node",
                       std::string(source) + "/tests/app/clients/openai_sdk.cjs", url_of(0) + "/v1",
                       "sk-unchecked", "mock-8b", "engine"});
  ASSERT_TRUE(node.started());
  const auto code = node.wait(std::chrono::seconds(60));
  const std::string said = node.output() + node.errors();
  ASSERT_TRUE(code.has_value()) << "node did not finish: " << said;
  EXPECT_EQ(*code, 0) << said;
  for (const char* step : {"ok embeddings base64", "ok responses.stream", "all ok"}) {
    EXPECT_NE(said.find(step), std::string::npos) << step << " missing from:\n" << said;
  }
}

// A key past its requests per minute (--api-keys-file) raises the SDK's RateLimitError, with
// OpenAI's x-ratelimit-* headers.
TEST_F(OpenAiSdkTest, ARateLimitedKeyRaisesTheSdksRateLimitError) {
  const std::string modules = testing::npm_dir() + "/node_modules";
  ASSERT_TRUE(std::filesystem::exists(modules + "/openai/package.json"))
      << "the OpenAI SDK is not in " << modules << ": run tools/setup.sh (make setup)";
  const std::string keys = (std::filesystem::temp_directory_path() /
                            ("kvgate-sdk-keys-" + std::to_string(getpid()) + ".yaml"))
                               .string();
  std::ofstream(keys) << "keys:\n  - {key: sk-limited, tenant: sdk, rpm: 1}\n";
  ASSERT_TRUE(start(1, [&](GatewayConfig& c) { c.api_keys_file = keys; }));
  const char* source = std::getenv("KVGATE_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  testing::Child node({"/usr/bin/env", "NODE_PATH=" + modules, "node",
                       std::string(source) + "/tests/app/clients/openai_ratelimit.cjs",
                       "http://127.0.0.1:" + std::to_string(gateway_->port()) + "/v1", "sk-limited",
                       "mock-8b"});
  ASSERT_TRUE(node.started());
  const auto code = node.wait(std::chrono::seconds(60));
  std::filesystem::remove(keys);
  const std::string said = node.output() + node.errors();
  ASSERT_TRUE(code.has_value()) << "node did not finish: " << said;
  EXPECT_EQ(*code, 0) << said;
  EXPECT_NE(said.find("ok ratelimit"), std::string::npos) << said;
}

}  // namespace
}  // namespace kvgate::app
