#include "kvgate/relayd/relay_role.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/app/build_info.h"
#include "kvgate/app/config.h"
#include "kvgate/app/discovery.h"
#include "kvgate/core/log.h"
#include "kvgate/core/stop_signals.h"
#include "kvgate/http/client.h"
#include "kvgate/http/io_pool.h"
#include "kvgate/http/server.h"
#include "kvgate/metrics/metrics.h"
#include "kvgate/metrics/process.h"
#include "kvgate/relay/engine_feed.h"
#include "kvgate/relay/server.h"
#include "kvgate/workers/registry.h"
#include "relayd/relay_metrics.h"

namespace kvgate::relayd {
namespace {

using app::ExplicitKvEndpoint;

struct RelayConfig {
  std::vector<std::string> engines;
  std::vector<ExplicitKvEndpoint> kv_endpoints;
  std::string listen = "0.0.0.0:50051";
  std::string metrics_listen = "0.0.0.0:50052";
  size_t history_batches = 10'000;
  uint64_t history_bytes = 256ull << 20;
  double heartbeat_secs = 1;
  double discovery_interval_secs = 2;
  uint64_t hash_seed = kDefaultHashSeed;
  std::string log_level = "info";
  std::string log_format = "text";
  app::KvEventBounds kv_event_bounds = app::default_kv_event_bounds();
};

// "256MiB", "1GiB", "512KiB", "1048576": bytes.
uint64_t parse_bytes(const std::string& s) {
  size_t end = 0;
  uint64_t n = 0;
  try {
    n = std::stoull(s, &end);
  } catch (...) {
    throw CLI::ValidationError("--relay-history-bytes", "expected bytes, e.g. 256MiB: " + s);
  }
  const std::string unit = s.substr(end);
  static const std::map<std::string, uint64_t> kUnits = {
      {"", 1}, {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) {
    throw CLI::ValidationError("--relay-history-bytes", "unit '" + unit + "' (B, KiB, MiB, GiB)");
  }
  return n * it->second;
}

void add_relay_flags(CLI::App& cli, RelayConfig& c) {
  cli.add_option_function<std::vector<std::string>>(
         "--engine",
         [&c](const std::vector<std::string>& urls) {
           for (const auto& u : urls) {
             auto a = workers::parse_worker_url(u);
             if (!a.ok())
               throw CLI::ValidationError("--engine", std::string(message_of(a.status())));
             c.engines.push_back(a->url);
           }
         },
         "An engine to relay (repeat per engine): its HTTP URL, http://HOST:PORT. Its KV event "
         "endpoints, ranks and block size are read from its /server_info (SGLang: "
         "/get_server_info), asked again every --discovery-interval-secs until it answers")
      ->group("Engines");
  cli.add_option_function<std::vector<std::string>>(
         "--kv-events-endpoint",
         [&c](const std::vector<std::string>& specs) {
           for (const auto& s : specs) c.kv_endpoints.push_back(app::parse_kv_endpoint(s));
         },
         "An engine's KV event stream given explicitly instead of discovered: "
         "ENGINE_URL=tcp://HOST:PORT[,replay=tcp://HOST:PORT][,topic=T][,rank=N] (repeat per rank)")
      ->group("Engines");
  cli.add_option("--discovery-interval-secs", c.discovery_interval_secs,
                 "How often an engine that has not answered /server_info is asked again")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0))
      ->group("Engines");
  cli.add_option("--listen", c.listen,
                 "HOST:PORT the gRPC service (kvgate.relay.v1.Relay, health, reflection) listens "
                 "on; port 0 picks a free one")
      ->capture_default_str()
      ->group("Serving");
  cli.add_option("--metrics-listen", c.metrics_listen,
                 "HOST:PORT serving GET /metrics (Prometheus: per engine rank the batches "
                 "relayed, gaps refilled, publisher restarts, history kept; subscribers and "
                 "snapshots) and GET /health; port 0 picks a free one, empty turns it off")
      ->capture_default_str()
      ->check([](const std::string& s) -> std::string {
        if (s.empty()) return "";
        const size_t colon = s.rfind(':');
        const std::string port = colon == std::string::npos ? "" : s.substr(colon + 1);
        if (colon == 0 || port.empty() || port.size() > 5 ||
            port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
          return "expected HOST:PORT (port 0-65535), or empty: " + s;
        }
        return "";
      })
      ->group("Serving");
  cli.add_option("--relay-history-batches", c.history_batches,
                 "Batches kept per engine rank for subscribers that resume; one that asks for an "
                 "older one gets a snapshot")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000'000))
      ->group("Serving");
  cli.add_option_function<std::string>(
         "--relay-history-bytes", [&c](const std::string& s) { c.history_bytes = parse_bytes(s); },
         "Memory the history may hold per engine rank (B, KiB, MiB, GiB; default 256MiB); the "
         "older batches go first, whichever bound is met first")
      ->group("Serving");
  cli.add_option("--heartbeat-secs", c.heartbeat_secs,
                 "A stream with nothing to send gets a heartbeat (newest seq, engine load) this "
                 "often, so a subscriber tells a quiet engine from a dead link")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0))
      ->group("Serving");
  cli.add_option("--hash-seed", c.hash_seed,
                 "Seed of the block hashes (must be the gateways'); the relay hashes the engines' "
                 "tokens as they do")
      ->capture_default_str()
      ->group("Serving");
  // The same bounds on every engine subscription as the gateway's (not the index's: none here).
  app::add_kv_event_bound_flags(cli, c.kv_event_bounds, /*index_bounds=*/false);
  cli.add_option("--log-level", c.log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->group("Logging");
  cli.add_option("--log-format", c.log_format, "text or json")
      ->capture_default_str()
      ->group("Logging");
}

// Reads an engine's /server_info until it answers (or `stop`), then subscribes to its ranks.
void discover(const std::string& url, const RelayConfig& c, relay::EngineFeed& feed,
              std::atomic<bool>& stop, std::mutex& mu, std::condition_variable& cv) {
  auto logger = log::get("relay");
  auto addr = workers::parse_worker_url(url);
  std::vector<relay::RankEndpoint> explicit_eps;
  for (const ExplicitKvEndpoint& e : c.kv_endpoints) {
    if (e.worker_url != url) continue;
    explicit_eps.push_back({.rank = e.endpoint.rank,
                            .publisher = e.endpoint.publisher,
                            .replay = e.endpoint.replay,
                            .topic = e.endpoint.topic});
  }
  bool warned = false;
  while (!stop.load()) {
    app::ServerInfo si;
    bool answered = false;
    if (addr.ok()) {
      http::SyncClient client(
          addr->host, addr->port,
          {.connect_timeout = std::chrono::seconds(2), .request_timeout = std::chrono::seconds(5)});
      for (const char* target : {"/server_info", "/get_server_info"}) {
        auto res = client.get(target);
        if (res.ok() && res->status == 200) {
          si = app::parse_server_info(res->body, addr->host);
          answered = true;
          break;
        }
      }
    }
    std::vector<relay::RankEndpoint> eps = explicit_eps;
    if (eps.empty()) {
      for (const workers::KvEndpoint& e : si.endpoints) {
        eps.push_back(
            {.rank = e.rank, .publisher = e.publisher, .replay = e.replay, .topic = e.topic});
      }
    }
    if (!eps.empty() && (answered || !explicit_eps.empty())) {
      relay::WorkerSpec spec{.name = url,
                             .engine_url = url,
                             .kv_endpoint = eps.front().publisher,
                             .block_size = si.block_size,
                             .ranks = std::max<uint32_t>(si.dp_size, 1)};
      if (Status s = feed.add(spec, eps); !s.ok()) {
        logger->error("engine {}: {}", url, message_of(s));
      } else {
        logger->info("engine {}: relaying {} KV event streams (block size {})", url, eps.size(),
                     si.block_size);
      }
      return;
    }
    if (!warned) {
      warned = true;
      if (answered) {
        logger->warn(
            "engine {} advertises no KV event endpoints; give them with "
            "--kv-events-endpoint (asking again every {} s)",
            url, c.discovery_interval_secs);
      } else {
        logger->warn("engine {} does not answer /server_info yet (asking again every {} s)", url,
                     c.discovery_interval_secs);
      }
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::duration<double>(c.discovery_interval_secs),
                [&] { return stop.load(); });
  }
}

}  // namespace

int run_relay(int argc, char** argv) {
  RelayConfig c;
  CLI::App cli{
      "kvgate relay: subscribes once to each engine's KV event stream (ZMQ, every rank, gaps "
      "refilled from the engine's replay socket) and serves any number of gateways over gRPC "
      "(kvgate.relay.v1.Relay in proto/): a bounded history to resume from, snapshots of what "
      "each rank holds for a subscriber the history cannot continue, heartbeats with the "
      "engine's load. Any gRPC client of that proto may subscribe.",
      "kvgate relay"};
  add_relay_flags(cli, c);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }
  std::vector<std::string> engines = c.engines;
  for (const ExplicitKvEndpoint& e : c.kv_endpoints) {
    if (std::find(engines.begin(), engines.end(), e.worker_url) == engines.end()) {
      engines.push_back(e.worker_url);
    }
  }
  if (engines.empty()) {
    std::fprintf(stderr, "kvgate relay: no engines: give --engine URL (kvgate relay --help)\n");
    return 2;
  }
  auto format = log::parse_format(c.log_format);
  if (!format.ok()) {
    std::fprintf(stderr, "kvgate relay: --log-format: %s\n",
                 std::string(message_of(format.status())).c_str());
    return 2;
  }
  if (Status s = log::init({.level = c.log_level, .format = *format}); !s.ok()) {
    std::fprintf(stderr, "kvgate relay: %s\n", std::string(message_of(s)).c_str());
    return 2;
  }
  auto logger = log::get("relay");

  const sigset_t stop_signals = block_stop_signals();

  relay::StreamTable table({.max_batches = c.history_batches, .max_bytes = c.history_bytes},
                           c.hash_seed);
  relay::FeedOptions feed_options;
  feed_options.subscription.hash_seed = c.hash_seed;
  app::apply_kv_event_bounds(c.kv_event_bounds, feed_options.subscription);
  relay::EngineFeed feed(table, feed_options);
  relay::RelayServer server(
      table, {.listen = c.listen,
              .heartbeat = std::chrono::milliseconds(std::llround(c.heartbeat_secs * 1000))});
  if (Status s = server.start(); !s.ok()) {
    logger->critical("cannot start: {}", message_of(s));
    log::shutdown();
    return 1;
  }
  const std::string host = c.listen.substr(0, c.listen.rfind(':'));
  std::printf("kvgate relay listening on %s:%d\n", host.c_str(), server.port());

  metrics::Registry registry;
  metrics::ProcessMetrics process_metrics(registry, "kvgate", app::build_info());
  RelayMetrics relay_metrics(registry);
  http::IoPool io(1);
  std::unique_ptr<http::Server> metrics_server;
  if (!c.metrics_listen.empty()) {
    const size_t colon = c.metrics_listen.rfind(':');
    metrics_server = std::make_unique<http::Server>(
        io, http::ServerOptions{
                .address = c.metrics_listen.substr(0, colon),
                .port = static_cast<uint16_t>(std::stoi(c.metrics_listen.substr(colon + 1))),
                .server_name = "kvgate relay"});
    metrics_server->route(
        http::Verb::get, "/metrics",
        [&](const http::Request&, http::Responder& res) -> boost::asio::awaitable<void> {
          process_metrics.update();
          relay::v1::ListWorkersResponse kept;
          table.list(&kept);
          relay_metrics.sync(feed.stats(), kept, server.stats());
          http::Response r = http::Response::text(200, metrics::text_exposition(registry),
                                                  "text/plain; version=0.0.4");
          (void)co_await res.send(std::move(r));
        });
    metrics_server->route(
        http::Verb::get, "/health",
        [](const http::Request&, http::Responder& res) -> boost::asio::awaitable<void> {
          (void)co_await res.send(http::Response::text(200, "ok\n", "text/plain"));
        });
    io.start();
    if (Status s = metrics_server->start(); !s.ok()) {
      logger->critical("cannot serve metrics on {}: {}", c.metrics_listen, message_of(s));
      server.stop();
      io.stop();
      log::shutdown();
      return 1;
    }
    std::printf("kvgate relay metrics on %s:%d\n", c.metrics_listen.substr(0, colon).c_str(),
                metrics_server->port());
  }
  std::fflush(stdout);
  logger->info(
      "kvgate relay listening on {}:{} ({} engines, history {} batches / {} bytes per "
      "rank)",
      host, server.port(), engines.size(), c.history_batches, c.history_bytes);

  std::atomic<bool> stop{false};
  // Guards no data (`stop` is atomic): the lock the condition variable needs to wake discovery.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::thread> discovery;
  for (const std::string& url : engines) {
    discovery.emplace_back([&, url] { discover(url, c, feed, stop, mu, cv); });
  }
  const int sig = await_stop_signal(stop_signals, "relay");
  logger->info("signal {}: stopping", sig);
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  for (auto& t : discovery) t.join();
  if (metrics_server) metrics_server->stop(std::chrono::milliseconds(0));
  io.stop();
  server.stop();
  feed.stop();
  log::shutdown();
  return 0;
}

}  // namespace kvgate::relayd
