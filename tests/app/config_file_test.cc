// The --config file beneath the command line (load_config), and what a reload finds changed
// (changed_flags): every flag has a key, the line wins, a flag given several times is a list of
// lists, bad files are refused naming the file and the key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/config_reload.h"
#include "kvgate/app/config.h"

namespace kvgate::app {
namespace {

class ConfigFileTest : public ::testing::Test {
 protected:
  ConfigFileTest()
      : path_((std::filesystem::temp_directory_path() /
               ("kvgate-config-" + std::to_string(getpid()) + ".yaml"))
                  .string()) {}
  ~ConfigFileTest() override { std::filesystem::remove(path_); }

  // load_config of `args` with `yaml` as the --config file.
  Result<LoadedConfig> load(const std::string& yaml, std::vector<std::string> args = {}) {
    std::ofstream(path_, std::ios::trunc) << yaml;
    args.insert(args.begin(), {"--config", path_});
    return load_config(args);
  }
  std::string error(const std::string& yaml, std::vector<std::string> args = {}) {
    Result<LoadedConfig> c = load(yaml, std::move(args));
    return c.ok() ? "accepted" : std::string(message_of(c.status()));
  }

  std::string path_;
};

TEST_F(ConfigFileTest, EveryKindOfFlagHasAKeyAndTheCommandLineWins) {
  Result<LoadedConfig> c = load(
      "worker-urls: [http://10.0.0.1:8000, http://10.0.0.2:8000]\n"
      "balance_abs_threshold: 16\n"  // '_' for '-'
      "port: 9000\n"
      "log-level: debug\n"
      "worker-overload-shed: true\n"
      "worker-overload-in-flight: 'off'\n",
      {"--port", "9100"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->config.worker_urls.size(), 2u);
  EXPECT_EQ(c->config.cache_aware.balance_abs_threshold, 16);
  EXPECT_EQ(c->config.port, 9100);  // the line's
  EXPECT_EQ(c->config.log_level, "debug");
  EXPECT_TRUE(c->config.cache_aware.shed_when_all_overloaded);
  EXPECT_EQ(c->config.config_file, path_);
  EXPECT_EQ(c->values.at("port"), std::vector<std::string>{"9100"});
  EXPECT_EQ(c->values.at("balance-abs-threshold"), std::vector<std::string>{"16"});
  EXPECT_EQ(c->values.count("config"), 0u);
}

TEST_F(ConfigFileTest, AFlagGivenSeveralTimesIsAListOfLists) {
  Result<LoadedConfig> c = load(
      "pd-disaggregation: true\n"
      "prefill: [[http://p0:8000, 9001], [http://p1:8000]]\n"
      "decode: [http://d0:8000]\n");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->config.prefill_workers.size(), 2u);
  EXPECT_EQ(c->config.prefill_workers[0].url, "http://p0:8000");
  EXPECT_EQ(c->config.prefill_workers[0].bootstrap_port, 9001);
  EXPECT_EQ(c->config.prefill_workers[1].url, "http://p1:8000");
  EXPECT_EQ(c->config.prefill_workers[1].bootstrap_port, 0);
  EXPECT_EQ(c->config.decode_workers, std::vector<std::string>{"http://d0:8000"});
}

TEST_F(ConfigFileTest, ABadFileIsRefusedNamingTheFileAndWhatIsWrong) {
  EXPECT_NE(error("nope: 1\n").find("'nope' is not a kvgate flag"), std::string::npos);
  EXPECT_NE(error("nope: 1\n").find(path_), std::string::npos);
  EXPECT_NE(error("worker-urls: [a\n").find("line 2"), std::string::npos);
  EXPECT_NE(error("- a\n- b\n").find("not a mapping"), std::string::npos);
  EXPECT_NE(error("port: {a: 1}\n").find("'port' is a mapping"), std::string::npos);
  EXPECT_NE(error("config: other.yaml\n").find("cannot name another"), std::string::npos);
  EXPECT_NE(error("help: true\n").find("'help' is not a setting"), std::string::npos);
  EXPECT_NE(error("port: not-a-number\n").find("port"), std::string::npos);
  // The checks of the command line hold for the file's values too.
  EXPECT_NE(error("balance-rel-threshold: 0.5\n").find("--balance-rel-threshold"),
            std::string::npos);
  EXPECT_EQ(error(""), "accepted");  // an empty file is no flags
  std::filesystem::remove(path_);
  EXPECT_NE(load_config({"--config", path_}).status().message().find(path_), std::string::npos);
}

TEST(ChangedFlags, LiveChangesApplyAndTheRestWaitForARestart) {
  const FlagValues before = {{"port", {"9000"}},
                             {"worker-urls", {"http://a:1"}},
                             {"balance-abs-threshold", {"32"}},
                             {"api-key", {"k1"}}};
  FlagValues after = before;
  after["worker-urls"] = {"http://a:1", "http://b:1"};
  after["port"] = {"9001"};
  after["log-level"] = {"debug"};        // newly given
  after.erase("balance-abs-threshold");  // back to its default
  after["api-key"] = {"k2"};
  GatewayConfig running, next;
  running.api_key = "k1";
  next.api_key = "k2";
  FlagChanges c = changed_flags(before, after, running, next);
  EXPECT_EQ(c.live, (std::vector<std::string>{"api-key", "balance-abs-threshold", "log-level",
                                              "worker-urls"}));
  EXPECT_EQ(c.restart, std::vector<std::string>{"port"});
  // Turning the client key off (or on) waits for a restart.
  after.erase("api-key");
  next.api_key.clear();
  c = changed_flags(before, after, running, next);
  EXPECT_NE(std::find(c.restart.begin(), c.restart.end(), "api-key"), c.restart.end());
}

}  // namespace
}  // namespace kvgate::app
