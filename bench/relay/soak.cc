#include "soak.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "kvgate/http/client.h"
#include "kvgate/relay/v1/relay.grpc.pb.h"
#include "support/child_process.h"

namespace kvgate::relay {
namespace {

using testing::Child;

std::string bin_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

// A gauge or counter of a Prometheus text page, summed over its series (0 when absent).
double metric(const std::string& page, const std::string& name) {
  double sum = 0;
  size_t at = 0;
  while ((at = page.find(name, at)) != std::string::npos) {
    const bool line_start = at == 0 || page[at - 1] == '\n';
    const size_t end = page.find('\n', at);
    const std::string line = page.substr(at, end - at);
    at = end == std::string::npos ? page.size() : end;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (!line_start || (next != ' ' && next != '{')) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

std::pair<std::string, uint16_t> host_port(const std::string& hp) {
  const size_t colon = hp.rfind(':');
  return {hp.substr(0, colon), static_cast<uint16_t>(std::stoi(hp.substr(colon + 1)))};
}

}  // namespace

void bench_soak(const SoakOptions& o) {
  const std::string bin = bin_dir();
  Child engine({bin + "/kvgate-mock", "--http-port", "0", "--kv-port", "0", "--num-blocks", "4096",
                "--speedup", "20", "--push-loads", "--log-level", "warn"});
  if (!engine.wait_for_output("kvgate-mock ready", std::chrono::seconds(20))) {
    std::fprintf(stderr, "soak: kvgate-mock did not start: %s\n", engine.errors().c_str());
    return;
  }
  const std::string engine_url = engine.output_after("\"url\":\"", '"');
  Child relay({bin + "/kvgate", "relay", "--engine", engine_url, "--listen", "127.0.0.1:0",
               "--metrics-listen", "127.0.0.1:0", "--relay-history-bytes", o.history_bytes,
               "--relay-history-batches", "100000000", "--log-level", "warn"});
  if (!relay.wait_for_output("kvgate relay metrics on", std::chrono::seconds(20))) {
    std::fprintf(stderr, "soak: the relay did not start: %s\n", relay.errors().c_str());
    return;
  }
  const std::string target = relay.output_after("kvgate relay listening on ");
  const auto [metrics_host, metrics_port] =
      host_port(relay.output_after("kvgate relay metrics on "));
  const auto relay_metrics = [&, host = metrics_host, port = metrics_port] {
    http::SyncClient c(host, port);
    auto r = c.get("/metrics");
    return r.ok() ? r->body : std::string();
  };
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the relay finds the engine's streams
  const double rss_alone = static_cast<double>(relay.rss_bytes()) / (1 << 20);

  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> messages{0};
  for (int i = 0; i < o.subscribers; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    grpc::ChannelArguments args;
    args.SetInt("kvgate.bench.subscriber", i);  // a channel of its own, as a gateway replica has
    auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    const bool slow = i < o.slow;
    threads.emplace_back([&, i, channel, slow] {
      auto stub = v1::Relay::NewStub(channel);
      v1::SubscribeRequest req;
      req.set_worker(engine_url);
      auto reader = stub->Subscribe(contexts[static_cast<size_t>(i)].get(), req);
      v1::SubscribeResponse m;
      while (!stop && reader->Read(&m)) {
        messages.fetch_add(1, std::memory_order_relaxed);
        if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  const auto [engine_host, engine_port] = host_port(engine_url.substr(engine_url.find("//") + 2));
  std::atomic<uint64_t> requests{0};
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c, host = engine_host, port = engine_port] {
      http::SyncClient client(host, port);
      std::mt19937 rng(static_cast<uint32_t>(c + 1));
      std::string body;
      while (!stop) {
        // A fresh 1,024-token prompt: 64 blocks stored, older ones evicted from the 4,096.
        body = R"({"model":"mock-8b","max_tokens":1,"prompt":[)";
        for (int t = 0; t < 1024; ++t) {
          body += std::to_string(rng() % 32000);
          body += t + 1 < 1024 ? "," : "]}";
        }
        if (client.post("/v1/completions", body).ok()) requests.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double rss_joined = static_cast<double>(relay.rss_bytes()) / (1 << 20);
  std::vector<double> samples;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::duration<double>(o.seconds)) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    samples.push_back(static_cast<double>(relay.rss_bytes()) / (1 << 20));
  }
  const std::string page = relay_metrics();
  stop = true;
  for (auto& c : contexts) c->TryCancel();
  for (auto& t : threads) t.join();
  if (samples.empty()) return;
  const size_t half = samples.size() / 2;
  const double first_half_max = *std::max_element(samples.begin(), samples.begin() + half + 1);
  const double second_half_max = *std::max_element(samples.begin() + half, samples.end());
  std::printf(
      "soak: relay process RSS %.0f MiB alone, %.0f MiB with %d subscribers (%d slow), peak "
      "%.0f MiB in the first half of %.0f s, %.0f MiB in the second, %.0f MiB at the end; history "
      "%.1f MiB (bound %s), %.0f batches relayed, %.0f snapshots, %llu engine requests, %llu "
      "messages read\n",
      rss_alone, rss_joined, o.subscribers, o.slow, first_half_max, o.seconds, second_half_max,
      samples.back(), metric(page, "kvgate_relay_history_bytes") / (1 << 20),
      o.history_bytes.c_str(), metric(page, "kvgate_relay_engine_batches_total"),
      metric(page, "kvgate_relay_snapshots_total"),
      static_cast<unsigned long long>(requests.load()),
      static_cast<unsigned long long>(messages.load()));
}

}  // namespace kvgate::relay
