// The kvgate-mock binary: its help names every flag, it reports its ports on stdout and in the
// port file, serves, and exits cleanly on SIGTERM; bad flags fail fast.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "mock/fleet_fixture.h"
#include "mock/process.h"

namespace kvgate::mock {
namespace {

using namespace testing;

TEST(Binary, HelpDocumentsEveryFlag) {
  Child c({mock_binary(), "--help"});
  ASSERT_TRUE(c.started());
  ASSERT_EQ(c.wait(10s), 0);
  const std::string help = c.output();
  for (const char* flag : {"--workers",
                           "--dp-size",
                           "--model",
                           "--host",
                           "--advertise-host",
                           "--http-port",
                           "--http-ports",
                           "--kv-port",
                           "--kv-pub-ports",
                           "--kv-replay-ports",
                           "--no-replay",
                           "--port-file",
                           "--threads",
                           "--kv-events-wire",
                           "--kv-topic",
                           "--replay-shape",
                           "--replay-buffer-steps",
                           "--vllm-hash-seed",
                           "--router-hash-seed",
                           "--block-size",
                           "--num-blocks",
                           "--max-num-seqs",
                           "--max-num-batched-tokens",
                           "--max-model-len",
                           "--no-prefix-caching",
                           "--vocab",
                           "--prefill-tokens-per-s",
                           "--step-overhead-ms",
                           "--decode-per-seq-us",
                           "--decode-per-context-token-ns",
                           "--speedup",
                           "--request-records",
                           "--max-body-bytes",
                           "--seed",
                           "--log-level",
                           "--log-format"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

TEST(Binary, RejectsBadSpeedup) {
  for (const char* bad : {"0", "-1", "inf", "nan"}) {
    Child c({mock_binary(), "--http-port", "0", "--kv-port", "0", "--speedup", bad});
    ASSERT_TRUE(c.started());
    auto code = c.wait(10s);
    ASSERT_TRUE(code.has_value()) << bad;
    EXPECT_NE(*code, 0) << bad;
  }
}

TEST(Binary, ReportsPortsServesAndStopsOnSigterm) {
  const std::string port_file = "/tmp/kvgate-mock-ports-" + std::to_string(getpid()) + ".json";
  std::remove(port_file.c_str());
  Child c({mock_binary(), "--workers", "3", "--dp-size", "2", "--http-port", "0", "--kv-port", "0",
           "--speedup", "50", "--port-file", port_file, "--log-level", "warn"});
  ASSERT_TRUE(c.started());
  ASSERT_TRUE(wait_until([&] { return c.output().find('\n') != std::string::npos; }, 10s));
  const std::string line = c.output();
  ASSERT_EQ(line.rfind("kvgate-mock ready ", 0), 0u) << line;
  const std::string json = line.substr(18, line.find('\n') - 18);
  std::ifstream f(port_file);
  std::stringstream file;
  file << f.rdbuf();
  EXPECT_EQ(file.str(), json + "\n");
  Json info(json);
  auto workers = info["workers"].get_array();
  ASSERT_EQ(workers.size(), 3u);
  for (auto w : workers) {
    EXPECT_EQ(w["ranks"].get_array().size(), 2u);
    Http h(static_cast<uint16_t>(w["http_port"].get_uint64().value()));
    EXPECT_EQ(h.get("/health").status, 200u);
    auto r = h.post("/v1/completions", "{\"prompt\":\"the binary serves\",\"max_tokens\":2}");
    EXPECT_EQ(r.status, 200u);
  }
  kill(c.pid(), SIGTERM);
  EXPECT_EQ(c.wait(10s), 0);
  std::remove(port_file.c_str());
}

}  // namespace
}  // namespace kvgate::mock
