// An in-process fleet of mock workers (one Fleet per worker, so a test can kill one) behind an
// in-process gateway, both on loopback ports picked by the OS.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/app/gateway.h"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/numa.h"
#include "kvgate/http/client.h"
#include "kvgate/mock/fleet.h"
#include "support/wait.h"

namespace kvgate::app {

using kvgate::testing::wait_until;

class GatewayTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (gateway_) gateway_->stop(std::chrono::milliseconds(2000));
    gateway_.reset();
    for (auto& f : fleets_) {
      if (f) f->stop();
    }
  }

  // Starts a one-worker mock fleet; returns its URL.
  std::string start_worker(double speedup = 20, uint32_t num_blocks = 26'000) {
    return start_worker_with([&](mock::FleetOptions& o) {
      o.engine.timing.speedup = speedup;
      o.engine.num_blocks = num_blocks;
    });
  }
  // The same, with `tweak` applied to the fleet's options (ports and size stay the fixture's).
  std::string start_worker_with(const std::function<void(mock::FleetOptions&)>& tweak) {
    mock::FleetOptions o;
    o.engine.timing.speedup = 20;
    o.engine.num_blocks = 26'000;
    tweak(o);
    o.workers = 1;
    o.http_port = 0;
    o.kv_port = 0;
    o.threads = 1;
    auto f = mock::Fleet::start(o);
    EXPECT_TRUE(f.ok()) << f.status();
    fleets_.push_back(std::move(*f));
    return url_of(fleets_.size() - 1);
  }
  std::string url_of(size_t i) {
    return "http://127.0.0.1:" + std::to_string(fleets_[i]->ports(0).http);
  }
  uint16_t worker_port(size_t i) { return fleets_[i]->ports(0).http; }

  GatewayConfig base_config() {
    GatewayConfig c;
    c.host = "127.0.0.1";
    c.port = 0;
    c.threads = 2;
    c.expose_worker_header = true;  // tests check where requests went
    c.health_check_interval = std::chrono::milliseconds(100);
    c.health_check_timeout = std::chrono::milliseconds(500);
    c.health.failure_threshold = 2;
    c.health.success_threshold = 1;
    c.load_poll_interval = std::chrono::milliseconds(100);
    c.discovery_retry = std::chrono::milliseconds(100);
    c.retry_initial_backoff = std::chrono::milliseconds(5);
    c.retry_max_backoff = std::chrono::milliseconds(50);
    // KVGATE_TEST_NUMA=two runs every gateway on two described NUMA nodes (the first and the
    // last CPU this process may use): the per-node pools, shards and lanes under the same tests.
    if (const char* numa = std::getenv("KVGATE_TEST_NUMA"); numa && std::string(numa) == "two") {
      c.numa_topology = two_node_topology();
    }
    return c;
  }

  // "FIRST;LAST": two described nodes of one CPU each (one node on a one-CPU machine).
  static std::string two_node_topology() {
    const std::vector<int> cpus = current_thread_cpus();
    if (cpus.size() < 2) return std::to_string(cpus.front());
    return std::to_string(cpus.front()) + ";" + std::to_string(cpus.back());
  }

  void start_gateway(GatewayConfig c) {
    auto g = Gateway::create(std::move(c));
    ASSERT_TRUE(g.ok()) << g.status();
    gateway_ = std::move(*g);
    ASSERT_TRUE(gateway_->start().ok());
  }

  // Waits until `n` workers are routable (discovered, healthy).
  bool wait_routable(size_t n, std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
    return kvgate::testing::wait_until(
        [&] {
          size_t ready = 0;
          // Hold the snapshot: a range-for over `snapshot()->workers` would iterate a vector whose
          // snapshot (the temporary shared_ptr) is already released, freed by the next publish.
          const auto fleet = gateway_->registry().snapshot();
          for (const auto& w : fleet->workers) {
            ready += (w->routable() && w->info()->discovered) ? 1 : 0;
          }
          return ready >= n;
        },
        limit);
  }

  // `workers` mock workers, the first behind a gateway configured by `tweak`; true when routable.
  bool start(size_t workers = 1, const std::function<void(GatewayConfig&)>& tweak = {}) {
    for (size_t i = 0; i < workers; ++i) start_worker();
    auto cfg = base_config();
    cfg.worker_urls = {url_of(0)};
    if (tweak) tweak(cfg);
    start_gateway(cfg);
    return wait_routable(1);
  }

  http::SyncClient client() { return http::SyncClient("127.0.0.1", gateway_->port()); }

  // The value of the first series in Prometheus `text` whose line starts with `prefix` (-1: none).
  static double metric_value(const std::string& text, const std::string& prefix) {
    const size_t at = text.find("\n" + prefix);
    if (at == std::string::npos) return -1;
    const size_t eol = text.find('\n', at + 1);
    const std::string line = text.substr(at + 1, eol - at - 1);
    return std::stod(line.substr(line.rfind(' ') + 1));
  }

  // The engine's usage.prompt_tokens_details.cached_tokens of an answer (0 when absent).
  static uint64_t cached_tokens(const std::string& body) {
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    uint64_t v = 0;
    if (p.parse(body).get(doc) != simdjson::SUCCESS) return 0;
    if (doc["usage"]["prompt_tokens_details"]["cached_tokens"].get_uint64().get(v) !=
        simdjson::SUCCESS)
      return 0;
    return v;
  }

  static std::string completion(const std::string& prompt, int max_tokens = 4,
                                bool stream = false) {
    std::string body;
    JsonWriter w(&body);
    w.begin_object()
        .member("model", "mock-8b")
        .member("prompt", prompt)
        .member("max_tokens", max_tokens);
    w.member("stream", stream).end_object();
    return body;
  }

  std::vector<std::unique_ptr<mock::Fleet>> fleets_;
  std::unique_ptr<Gateway> gateway_;
};

}  // namespace kvgate::app
