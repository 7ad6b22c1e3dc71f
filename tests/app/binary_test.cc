// The kvgate binary's command line: a mistake is exit code 2 with the flag named first, --help
// teaches, a flag kept for other gateways' launch lines starts with a warning.
#include <gtest/gtest.h>

#include <chrono>

#include "drills/harness.h"

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

TEST(Binary, ARadixTreeKnobStartsWithAWarningInsteadOfARefusal) {
  MockFleet fleet(1, {});
  ASSERT_TRUE(fleet.ready());
  GatewayProcess gw(fleet.urls(), {"--log-level", "warn", "--max-tree-size", "1000"});
  ASSERT_TRUE(gw.ready());
  const auto warned = [&] {
    return gw.process().errors().find("--max-tree-size has no effect") != std::string::npos;
  };
  for (int i = 0; i < 100 && !warned(); ++i) sleep_s(0.02);  // the log is written asynchronously
  EXPECT_TRUE(warned()) << gw.process().errors();
}

}  // namespace
}  // namespace kvgate::drills
