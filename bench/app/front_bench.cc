// What each front end adds to the same small generation (a 64-token prompt the engine has
// cached, 4 tokens streamed back), one client thread sending one request at a time:
//   direct   HTTP/1.1 + SSE to the engine (kvgate-mock) itself: the floor;
//   http     the same request through kvgate's HTTP API;
//   grpc     the same generation through kvgate's gRPC API (kvgate.v1.Gateway/Generate);
//   http echo, grpc echo   a server in this process answering the same shape at once (4 SSE
//            events; 4 chunks and the Complete): what each protocol's stack costs by itself, so
//            the gRPC front's own cost is its added p50 less (grpc echo - http echo).
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
#include "kvgate/http/server.h"
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

// Generate answered at once with four one-token chunks and the Complete: gRPC's own cost.
class EchoGateway final : public kvgate::v1::Gateway::CallbackService {
  grpc::ServerWriteReactor<kvgate::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* /*ctx*/, const kvgate::v1::GenerateRequest* /*r*/) override {
    class Writer final : public grpc::ServerWriteReactor<kvgate::v1::GenerateResponse> {
     public:
      Writer() { next(); }
      void OnWriteDone(bool ok) override {
        if (!ok) return Finish(grpc::Status::CANCELLED);
        next();
      }
      void OnDone() override { delete this; }

     private:
      void next() {
        message_.Clear();
        if (sent_ == 4) {
          message_.mutable_complete()->set_finish_reason("length");
          return StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
        }
        message_.mutable_chunk()->add_token_ids(static_cast<uint32_t>(100 + sent_++));
        StartWrite(&message_);
      }
      kvgate::v1::GenerateResponse message_;
      int sent_ = 0;
    };
    return new Writer();
  }
};

// The HTTP counterpart: four SSE events and [DONE], answered at once.
boost::asio::awaitable<void> echo_sse(const kvgate::http::Request& /*req*/,
                                      kvgate::http::Responder& res) {
  if (!(co_await res.start_sse()).ok()) co_return;
  for (int i = 0; i < 4; ++i) {
    const std::string event =
        R"({"choices":[{"index":0,"text":"x","token_ids":[)" + std::to_string(100 + i) + "]}]}";
    if (!(co_await res.write_sse(event)).ok()) co_return;
  }
  (void)co_await res.finish("data: [DONE]\n\n");
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

  kvgate::http::IoPool echo_pool(1);
  echo_pool.start();
  kvgate::http::Server echo_http(echo_pool, kvgate::http::ServerOptions{});
  echo_http.route(kvgate::http::Verb::post, "/v1/completions", echo_sse);
  if (!echo_http.start().ok()) return 1;
  kvgate::http::SyncClient via_http_echo("127.0.0.1", echo_http.port());
  EchoGateway echo_service;
  grpc::ServerBuilder echo_builder;
  int echo_port = 0;
  echo_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &echo_port);
  echo_builder.RegisterService(&echo_service);
  const std::unique_ptr<grpc::Server> echo_grpc = echo_builder.BuildAndStart();
  auto echo_stub = kvgate::v1::Gateway::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(echo_port), grpc::InsecureChannelCredentials()));

  size_t failures = 0;
  const auto over_http = [&](kvgate::http::SyncClient& c) {
    auto r = c.stream(hreq, [](std::string_view) { return kvgate::Status(); });
    failures += !r.ok() || r->status != 200;
  };
  const auto over_grpc = [&](kvgate::v1::Gateway::Stub& s) {
    grpc::ClientContext ctx;
    auto reader = s.Generate(&ctx, greq);
    kvgate::v1::GenerateResponse m;
    while (reader->Read(&m)) {
    }
    failures += !reader->Finish().ok();
  };
  std::vector<Leg> legs = {
      {"direct (engine)"}, {"http via kvgate"}, {"grpc via kvgate"}, {"http echo"}, {"grpc echo"}};
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
  run_leg(warm, 200, [&] { over_grpc(*stub); });
  run_leg(warm, 200, [&] { over_http(via_http_echo); });
  run_leg(warm, 200, [&] { over_grpc(*echo_stub); });
  failures = 0;
  for (int r = 0; r < rounds; ++r) {
    run_leg(legs[0], requests, [&] { over_http(direct); });
    run_leg(legs[1], requests, [&] { over_http(via_http); });
    run_leg(legs[2], requests, [&] { over_grpc(*stub); });
    run_leg(legs[3], requests, [&] { over_http(via_http_echo); });
    run_leg(legs[4], requests, [&] { over_grpc(*echo_stub); });
  }
  const double floor = percentile(legs[0].us, 0.5);
  std::printf("| path | p50 us | p99 us | req/s | added p50 us |\n|---|---|---|---|---|\n");
  for (const Leg& leg : legs) {
    const double p50 = percentile(leg.us, 0.5);
    const bool added = &leg == &legs[1] || &leg == &legs[2];
    std::printf("| %s | %.0f | %.0f | %.0f | %s |\n", leg.name, p50, percentile(leg.us, 0.99),
                static_cast<double>(leg.us.size()) / leg.seconds,
                added ? std::to_string(static_cast<int>(p50 - floor)).c_str() : "-");
  }
  const double http_added = percentile(legs[1].us, 0.5) - floor;
  const double grpc_added = percentile(legs[2].us, 0.5) - floor;
  const double stack = percentile(legs[4].us, 0.5) - percentile(legs[3].us, 0.5);
  std::printf("gRPC's stack over HTTP's (grpc echo - http echo): %.0f us\n", stack);
  std::printf("gRPC front / HTTP front, added p50: %.2fx; less gRPC's stack: %.2fx\n",
              grpc_added / http_added, (grpc_added - stack) / http_added);
  std::printf("%zu failed requests\n", failures);
  return failures == 0 ? 0 : 1;
}
