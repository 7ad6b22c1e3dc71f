// How much CPU kvgate-mock needs for a fleet under load (label `slow`; not a correctness test).
//
// Starts the binary with 8 workers, offers each a Poisson stream of streaming completions with
// prefix-sharing prompts (token ids), consumes every holder's KV events on a SUB socket like a
// gateway would, and reports the mock's CPU use, the client-side TTFT and what completed.
// Knobs (environment): KVGATE_MOCK_LOAD_WORKERS (8), _RPS per worker (20), _SECONDS (10),
// _SPEEDUP (10), _OUTPUT mean output tokens (100), _PROMPT mean prompt tokens (2048).
//
//   KVGATE_BINARY_DIR=build/release build/release/bin/mock_load_test
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "mock/fleet_fixture.h"
#include "mock/process.h"

namespace kvgate::mock {
namespace {

using namespace testing;
namespace net = boost::asio;

double env_or(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atof(v) : fallback;
}

struct Stats {
  std::atomic<uint64_t> started{0}, completed{0}, errors{0}, bytes{0};
  std::mutex mu;
  std::vector<double> ttft;
};

struct WorkerClient {
  uint16_t port = 0;
  std::vector<std::unique_ptr<http::Connection>> idle;
};

net::awaitable<void> one_request(WorkerClient* w, std::string body, Stats* stats) {
  ++stats->started;
  http::ClientRequest req;
  req.method = http::Verb::post;
  req.target = "/v1/completions";
  req.body = std::move(body);
  // The engine closes keep-alive connections idle past its timeout. One it closed between the
  // check and the request fails before any response byte: that request goes again, once, on a
  // fresh connection, as a gateway sends it.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<http::Connection> conn;
    while (!conn && attempt == 0 && !w->idle.empty()) {
      conn = std::move(w->idle.back());
      w->idle.pop_back();
      if (!conn->idle_and_open()) conn.reset();
    }
    const bool reused = conn != nullptr;
    if (!conn) {
      auto c = co_await http::Connection::connect("127.0.0.1", w->port);
      if (!c.ok()) {
        ++stats->errors;
        co_return;
      }
      conn = std::move(*c);
    }
    const auto t0 = std::chrono::steady_clock::now();
    bool first = true;
    auto r = co_await conn->send_streaming(req, [&](std::string_view piece) {
      if (first) {
        first = false;
        std::lock_guard<std::mutex> l(stats->mu);
        stats->ttft.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      stats->bytes += piece.size();
      return Status();
    });
    if (!r.ok() && reused && first) continue;
    if (!r.ok() || r->status != 200) {
      ++stats->errors;
      co_return;
    }
    ++stats->completed;
    if (conn->reusable()) w->idle.push_back(std::move(conn));
    co_return;
  }
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

TEST(MockLoad, EightWorkersUnderLoad) {
  const int workers = static_cast<int>(env_or("KVGATE_MOCK_LOAD_WORKERS", 8));
  const double rps = env_or("KVGATE_MOCK_LOAD_RPS", 20);
  const double seconds = env_or("KVGATE_MOCK_LOAD_SECONDS", 10);
  const double speedup = env_or("KVGATE_MOCK_LOAD_SPEEDUP", 10);
  const double mean_output = env_or("KVGATE_MOCK_LOAD_OUTPUT", 100);
  const double mean_prompt = env_or("KVGATE_MOCK_LOAD_PROMPT", 2048);

  const std::string port_file = "/tmp/kvgate-mock-load-" + std::to_string(getpid()) + ".json";
  std::remove(port_file.c_str());
  Child mock({mock_binary(), "--workers", std::to_string(workers), "--http-port", "0", "--kv-port",
              "0", "--speedup", std::to_string(speedup), "--port-file", port_file, "--log-level",
              "warn"});
  ASSERT_TRUE(mock.started());
  ASSERT_TRUE(wait_until([&] { return std::ifstream(port_file).good(); }, 10s));
  std::stringstream pf;
  pf << std::ifstream(port_file).rdbuf();
  Json info(pf.str());
  // Before the clients: their pooled connections must close while it still exists.
  net::io_context ctx(1);
  std::vector<WorkerClient> clients(workers);
  std::vector<std::string> endpoints;
  for (int i = 0; i < workers; ++i) {
    auto w = info["workers"].at(i);
    clients[i].port = static_cast<uint16_t>(w["http_port"].get_uint64().value());
    for (auto r : w["ranks"].get_array())
      endpoints.emplace_back(r["endpoint"].get_string().value());
  }
  KvCollector kv(endpoints);

  // Prompts: one of 32 shared heads (half the prompt on average) plus a private tail.
  std::mt19937 rng(7);
  std::vector<std::vector<TokenId>> heads;
  for (int i = 0; i < 32; ++i) {
    std::vector<TokenId> h(static_cast<size_t>(mean_prompt / 2));
    for (auto& t : h) t = 256 + rng() % 30000;
    heads.push_back(std::move(h));
  }
  std::exponential_distribution<double> gap(rps * workers);
  std::exponential_distribution<double> out_len(1.0 / mean_output);
  std::uniform_int_distribution<int> tail_len(0, static_cast<int>(mean_prompt));

  Stats stats;
  const double mock_cpu0 = mock.cpu_seconds();
  rusage ru0;
  getrusage(RUSAGE_SELF, &ru0);
  const auto t0 = std::chrono::steady_clock::now();
  net::co_spawn(
      ctx,
      [&]() -> net::awaitable<void> {
        net::steady_timer timer(ctx);
        auto next = std::chrono::steady_clock::now();
        const auto end = next + std::chrono::duration<double>(seconds);
        while (next < end) {
          next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::duration<double>(gap(rng)));
          timer.expires_at(next);
          co_await timer.async_wait(net::use_awaitable);
          std::vector<TokenId> prompt = heads[rng() % heads.size()];
          for (int n = tail_len(rng); n > 0; --n) prompt.push_back(256 + rng() % 30000);
          const uint32_t out = 1 + static_cast<uint32_t>(out_len(rng));
          std::string body = "{\"prompt\":" + ids_json(prompt) +
                             ",\"max_tokens\":" + std::to_string(out) + ",\"stream\":true}";
          net::co_spawn(ctx, one_request(&clients[rng() % workers], std::move(body), &stats),
                        net::detached);
        }
      },
      net::detached);
  ctx.run();  // returns when the arrivals are over and every request has ended
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mock_cpu = mock.cpu_seconds() - mock_cpu0;
  rusage ru1;
  getrusage(RUSAGE_SELF, &ru1);
  auto tv = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  const double client_cpu =
      tv(ru1.ru_utime) - tv(ru0.ru_utime) + tv(ru1.ru_stime) - tv(ru0.ru_stime);
  size_t batches = 0;
  for (size_t i = 0; i < endpoints.size(); ++i) batches += kv.count(i);

  std::printf(
      "mock load: %d workers x %.1f req/s offered for %.0f s (speedup %.0f, prompt ~%.0f, "
      "output ~%.0f tokens)\n"
      "  requests %llu started, %llu completed, %llu errors in %.1f s wall\n"
      "  mock CPU %.2f s = %.2f cores; client CPU %.2f s = %.2f cores\n"
      "  client TTFT p50 %.1f ms, p99 %.1f ms; %zu KV batches received; %.1f MB streamed\n",
      workers, rps, seconds, speedup, mean_prompt, mean_output,
      (unsigned long long)stats.started.load(), (unsigned long long)stats.completed.load(),
      (unsigned long long)stats.errors.load(), wall, mock_cpu, mock_cpu / wall, client_cpu,
      client_cpu / wall, 1e3 * percentile(stats.ttft, 0.5), 1e3 * percentile(stats.ttft, 0.99),
      batches, stats.bytes / 1e6);
  EXPECT_EQ(stats.errors.load(), 0u);
  EXPECT_EQ(stats.completed.load(), stats.started.load());
  EXPECT_GT(batches, 0u);
  kill(mock.pid(), SIGTERM);
  EXPECT_EQ(mock.wait(10s), 0);
  std::remove(port_file.c_str());
}

}  // namespace
}  // namespace kvgate::mock
