// The kvgate-mock binary: its help names every flag, it reports its ports on stdout and in the
// port file, serves, and exits cleanly on SIGTERM; bad flags fail fast.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

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
                           "--log-format",
                           "--pd-role",
                           "--bootstrap-port",
                           "--pd-room-timeout-ms",
                           "--pd-transfer-timeout-ms",
                           "--pd-transfer-ms-per-block",
                           "--pd-decode-local-prefill"}) {
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

// The ready line's JSON of a child started with `args` (empty when it never came).
std::string ready_json(Child& c) {
  if (!wait_until([&] { return c.output().find('\n') != std::string::npos; }, 10s)) return "";
  const std::string line = c.output();
  if (line.rfind("kvgate-mock ready ", 0) != 0) return "";
  return line.substr(18, line.find('\n') - 18);
}

TEST(Binary, PrefillAndDecodeProcessesPairThroughTheBootstrapServer) {
  Child prefill({mock_binary(), "--pd-role", "prefill", "--bootstrap-port", "0", "--http-port", "0",
                 "--kv-port", "0", "--speedup", "50", "--log-level", "warn"});
  Child decode({mock_binary(), "--pd-role", "decode", "--http-port", "0", "--kv-port", "0",
                "--speedup", "50", "--log-level", "warn"});
  ASSERT_TRUE(prefill.started() && decode.started());
  Json p(ready_json(prefill));
  Json d(ready_json(decode));
  ASSERT_TRUE(p.ok() && d.ok());
  EXPECT_EQ(p["pd_role"].get_string().value(), "prefill");
  auto pw = p["workers"].at(0);
  EXPECT_EQ(pw["pd_role"].get_string().value(), "prefill");
  const auto bootstrap = static_cast<uint16_t>(pw["bootstrap_port"].get_uint64().value());
  EXPECT_GT(bootstrap, 0);
  auto dw = d["workers"].at(0);
  EXPECT_EQ(dw["pd_role"].get_string().value(), "decode");
  EXPECT_TRUE(dw["bootstrap_port"].error() == simdjson::NO_SUCH_FIELD);

  const std::string body =
      "{\"prompt\":\"two processes share one request through a room of the prefill\","
      "\"max_tokens\":6,\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":" +
      std::to_string(bootstrap) + ",\"bootstrap_room\":9223372036854775807}";
  http::ClientResponse prefill_answer;
  std::thread t([&] {
    prefill_answer = Http(static_cast<uint16_t>(pw["http_port"].get_uint64().value()))
                         .post("/v1/completions", body);
  });
  auto decode_answer = Http(static_cast<uint16_t>(dw["http_port"].get_uint64().value()))
                           .post("/v1/completions", body);
  t.join();
  ASSERT_EQ(decode_answer.status, 200u) << decode_answer.body;
  ASSERT_EQ(prefill_answer.status, 200u) << prefill_answer.body;
  EXPECT_EQ(Json(decode_answer.body)["usage"]["completion_tokens"].get_uint64().value(), 6u);
  EXPECT_EQ(Json(prefill_answer.body)["usage"]["completion_tokens"].get_uint64().value(), 1u);
  kill(prefill.pid(), SIGTERM);
  kill(decode.pid(), SIGTERM);
  EXPECT_EQ(prefill.wait(10s), 0);
  EXPECT_EQ(decode.wait(10s), 0);
}

}  // namespace
}  // namespace kvgate::mock
