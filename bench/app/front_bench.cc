// What each front end adds to the same small generation (a 64-token prompt the engine has
// cached, 4 tokens streamed back), one client thread sending one request at a time:
//   direct   HTTP/1.1 + SSE to the engine (kvgate-mock) itself: the floor;
//   http     the same request through kvgate's HTTP API;
//   grpc     the same generation through kvgate's gRPC API (kvgate.v1.Gateway/Generate).
// kvgate runs with one executor thread (--threads 1). The legs alternate for --rounds rounds of
// --requests each; the table gives per leg p50 / p99 latency, requests per second, and what the
// gateway adds at p50 over direct.
//
// Run: build/release/bin/kvgate-bench-front --requests 2000 --rounds 3
#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/http/client.h"
#include "kvgate/v1/gateway.grpc.pb.h"
#include "support/child_process.h"

namespace {

using Steady = std::chrono::steady_clock;
using kvgate::testing::Child;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

uint16_t port_of(const std::string& host_port) {
  return static_cast<uint16_t>(std::stoi(host_port.substr(host_port.rfind(':') + 1)));
}

struct Leg {
  const char* name;
  std::vector<double> us;
  double seconds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What the gateway's HTTP and gRPC front ends add to one small generation"};
  int requests = 2000, rounds = 3;
  app.add_option("--requests", requests, "Requests per leg and round")->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds of the three legs, alternated")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::string bin = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  Child mock({bin + "/kvgate-mock", "--http-port", "0", "--kv-port", "0", "--speedup", "1000",
              "--log-level", "warn"});
  if (!mock.wait_for_output("kvgate-mock ready", std::chrono::seconds(20))) {
    std::fprintf(stderr, "kvgate-mock did not start: %s\n", mock.errors().c_str());
    return 1;
  }
  const std::string engine = mock.output_after("\"url\":\"", '"');
  Child gateway({bin + "/kvgate", "--host", "127.0.0.1", "--port", "0", "--grpc-port", "0",
                 "--threads", "1", "--log-level", "warn", "--worker-urls", engine});
  if (!gateway.wait_for_output("kvgate gRPC listening on", std::chrono::seconds(20))) {
    std::fprintf(stderr, "kvgate did not start: %s\n", gateway.errors().c_str());
    return 1;
  }
  const uint16_t http_port = port_of(gateway.output_after("kvgate listening on "));
  const std::string grpc_target = gateway.output_after("kvgate gRPC listening on ");
  const uint16_t engine_port = port_of(engine);

  kvgate::http::SyncClient direct("127.0.0.1", engine_port);
  kvgate::http::SyncClient via_http("127.0.0.1", http_port);
  for (int i = 0; i < 100; ++i) {
    auto r = via_http.get("/readiness");
    if (r.ok() && r->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto stub = kvgate::v1::Gateway::NewStub(
      grpc::CreateChannel(grpc_target, grpc::InsecureChannelCredentials()));

  std::string ids;
  kvgate::v1::GenerateRequest greq;
  for (int t = 0; t < 64; ++t) {
    ids += (t ? "," : "") + std::to_string(1000 + t * 13);
    greq.mutable_token_ids()->add_ids(static_cast<uint32_t>(1000 + t * 13));
  }
  greq.set_max_tokens(4);
  greq.set_stream(true);
  kvgate::http::ClientRequest hreq{
      .method = kvgate::http::Verb::post,
      .target = "/v1/completions",
      .body = R"({"model":"mock-8b","max_tokens":4,"stream":true,"prompt":[)" + ids + "]}"};

  size_t failures = 0;
  const auto over_http = [&](kvgate::http::SyncClient& c) {
    auto r = c.stream(hreq, [](std::string_view) { return kvgate::Status(); });
    failures += !r.ok() || r->status != 200;
  };
  const auto over_grpc = [&] {
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, greq);
    kvgate::v1::GenerateResponse m;
    while (reader->Read(&m)) {
    }
    failures += !reader->Finish().ok();
  };
  std::vector<Leg> legs = {{"direct (engine)"}, {"http via kvgate"}, {"grpc via kvgate"}};
  const auto run_leg = [&](Leg& leg, int n, const auto& one) {
    const auto start = Steady::now();
    for (int i = 0; i < n; ++i) {
      const auto t0 = Steady::now();
      one();
      leg.us.push_back(std::chrono::duration<double, std::micro>(Steady::now() - t0).count());
    }
    leg.seconds += std::chrono::duration<double>(Steady::now() - start).count();
  };
  // Warm-up: connections, the engine's cache, the gateway's index.
  Leg warm{"warm-up"};
  run_leg(warm, 200, [&] { over_http(direct); });
  run_leg(warm, 200, [&] { over_http(via_http); });
  run_leg(warm, 200, over_grpc);
  failures = 0;
  for (int r = 0; r < rounds; ++r) {
    run_leg(legs[0], requests, [&] { over_http(direct); });
    run_leg(legs[1], requests, [&] { over_http(via_http); });
    run_leg(legs[2], requests, over_grpc);
  }
  const double floor = percentile(legs[0].us, 0.5);
  std::printf("| path | p50 us | p99 us | req/s | added p50 us |\n|---|---|---|---|---|\n");
  for (const Leg& leg : legs) {
    const double p50 = percentile(leg.us, 0.5);
    std::printf("| %s | %.0f | %.0f | %.0f | %s |\n", leg.name, p50, percentile(leg.us, 0.99),
                static_cast<double>(leg.us.size()) / leg.seconds,
                &leg == &legs[0] ? "-" : std::to_string(static_cast<int>(p50 - floor)).c_str());
  }
  std::printf("%zu failed requests\n", failures);
  return failures == 0 ? 0 : 1;
}
