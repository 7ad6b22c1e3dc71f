// The kvgate binary's command line: a mistake is exit code 2 with the flag named first, --help
// teaches, a flag kept for other gateways' launch lines starts with a warning.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "drills/harness.h"
#include "kvgate/http/client.h"
#include "support/wait.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;

TEST(Binary, AnUnknownFlagExitsTwoNamingTheFlagFirst) {
  Child c({testing::binary_dir() + "/kvgate", "--no-such-flag"});
  const auto code = c.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_EQ(c.errors().rfind("kvgate: --no-such-flag", 0), 0u) << c.errors();
}

TEST(Binary, ABadValueExitsTwoNamingTheFlag) {
  Child c({testing::binary_dir() + "/kvgate", "--worker-wedge-secs", "-1"});
  const auto code = c.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_NE(c.errors().find("--worker-wedge-secs"), std::string::npos) << c.errors();
}

TEST(Binary, HelpListsTheDrainAndKeyFlags) {
  Child c({testing::binary_dir() + "/kvgate", "--help"});
  const auto code = c.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  for (const char* flag : {"--shutdown-grace-period-secs", "--api-key", "--admin-api-key"}) {
    EXPECT_NE(c.output().find(flag), std::string::npos) << flag;
  }
}

// --help fits a 100-column terminal, names the relay role, and leaves CLI11's "Excludes:" lists
// out of its left column.
TEST(Binary, HelpFitsAHundredColumnsAndNamesTheRelay) {
  Child c({testing::binary_dir() + "/kvgate", "--help"});
  const auto code = c.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  const std::string& help = c.output();
  size_t lines = 0;
  for (size_t at = 0; at < help.size();) {
    const size_t end = std::min(help.find('\n', at), help.size());
    EXPECT_LE(end - at, 100u) << help.substr(at, end - at);
    ++lines;
    at = end + 1;
  }
  EXPECT_GT(lines, 100u);
  EXPECT_NE(help.find("kvgate relay --help"), std::string::npos);
  EXPECT_EQ(help.find("Excludes:"), std::string::npos);
}

TEST(Binary, ARadixTreeKnobStartsWithAWarningInsteadOfARefusal) {
  MockFleet fleet(1, {});
  ASSERT_TRUE(fleet.ready());
  GatewayProcess gw(fleet.urls(), {"--log-level", "warn", "--max-tree-size", "1000"});
  ASSERT_TRUE(gw.ready());
  const auto warned = [&] {
    return gw.process().errors().find("--max-tree-size has no effect") != std::string::npos;
  };
  // The log is written asynchronously.
  EXPECT_TRUE(testing::wait_until(warned, 2s)) << gw.process().errors();
}

// --log-dir: the log and the access log go to files there, not to stderr and stdout.
TEST(Binary, LogDirHoldsTheLogAndTheAccessLog) {
  MockFleet fleet(1, {});
  ASSERT_TRUE(fleet.ready());
  const std::string dir =
      ::testing::TempDir() + "kvgate-log-dir-" + std::to_string(getpid()) + "/nested";
  GatewayProcess gw(fleet.urls(), {"--log-dir", dir, "--access-log", "text"});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(1, 10));
  http::SyncClient c("127.0.0.1", gw.port());
  auto r = c.post("/v1/completions", R"({"prompt":"hello","max_tokens":2})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u);
  const auto read = [](const std::string& path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  const auto has = [&](const std::string& file, const std::string& text) {
    return testing::wait_until(
        [&] { return read(dir + "/" + file).find(text) != std::string::npos; }, 2s);
  };
  EXPECT_TRUE(has("access.log", "POST /v1/completions 200 model=")) << read(dir + "/access.log");
  EXPECT_TRUE(has("kvgate.log", "added")) << read(dir + "/kvgate.log");
  EXPECT_EQ(gw.process().errors().find("added"), std::string::npos) << "the log went to its file";
  EXPECT_EQ(gw.process().output().find("POST /v1/completions"), std::string::npos);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

}  // namespace
}  // namespace kvgate::drills
