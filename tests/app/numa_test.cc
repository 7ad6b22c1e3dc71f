// The gateway on two NUMA nodes (described: one CPU each): executor threads, index shards and
// event lanes per node, workers placed by id, and routing that finds a prefix whichever shard
// holds it.
#include <dirent.h>

#include <fstream>
#include <functional>

#include "gateway_fixture.h"

namespace kvgate::app {
namespace {

using NumaGateway = GatewayTest;

// How many of this process's threads have a CPU list ("0", "0-1" as the kernel says) that
// `matches`.
int threads_whose_cpus(const std::function<bool(const std::string&)>& matches) {
  int n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) != 0) continue;
      n += matches(line.substr(line.find_first_not_of(" \t", 18))) ? 1 : 0;
    }
  }
  closedir(dir);
  return n;
}

// Threads that may run exactly on `cpus`.
int threads_allowed_exactly(const std::string& cpus) {
  return threads_whose_cpus([&](const std::string& list) { return list == cpus; });
}

// Threads that may run on a single CPU only.
int threads_on_one_cpu() {
  return threads_whose_cpus(
      [](const std::string& list) { return list.find_first_of("-,") == std::string::npos; });
}

TEST_F(NumaGateway, TwoNodesServeAndFindPrefixesInEitherShard) {
  const std::vector<int> cpus = current_thread_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: two nodes cannot be described";
  for (int i = 0; i < 4; ++i) start_worker();
  auto cfg = base_config();
  cfg.threads = 2;
  cfg.event_lanes = 2;
  cfg.numa_topology = two_node_topology();
  for (int i = 0; i < 4; ++i) cfg.worker_urls.push_back(url_of(i));
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(4));

  // Each node's executor and lane threads run on its CPU only.
  EXPECT_GE(threads_allowed_exactly(std::to_string(cpus.front())), 2);
  EXPECT_GE(threads_allowed_exactly(std::to_string(cpus.back())), 2);

  auto c = client();
  auto metrics = c.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metric_value(metrics->body, "kvgate_numa_nodes"), 2);
  EXPECT_EQ(metric_value(metrics->body, "kvgate_executor_threads_pinned"), 2);

  // Workers alternate between the nodes, and their holders sit in their node's shard.
  auto listing = c.get("/workers");
  ASSERT_TRUE(listing.ok());
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(listing->body).get(doc), simdjson::SUCCESS);
  for (auto w : doc["workers"].get_array()) {
    const uint64_t id = w["id"].get_uint64().value();
    EXPECT_EQ(w["numa_node"].get_uint64().value(), id % 2);
    for (auto h : w["holders"].get_array()) EXPECT_EQ(h.get_uint64().value() % 2, id % 2);
  }

  // Prompts spread over the fleet come back to the worker that holds them, on either node's
  // executor (connections alternate) and whichever shard holds the worker.
  std::map<int, std::string> first;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 8; ++i) {
      std::string words;
      for (int k = 0; k < 150; ++k)
        words += "n" + std::to_string(i) + "w" + std::to_string(k) + " ";
      http::SyncClient fresh("127.0.0.1", gateway_->port());  // a new connection each time
      auto r = fresh.post("/v1/completions", completion(words));
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r->status, 200u);
      const std::string worker(r->header("x-kvgate-worker"));
      if (round == 0) {
        first[i] = worker;
      } else {
        EXPECT_EQ(worker, first[i]) << "prompt " << i << " round " << round;
      }
    }
    if (round == 0) {  // the first round's KV events applied on both nodes' lanes
      const auto fleet = gateway_->registry().snapshot();
      ASSERT_TRUE(wait_until(
          [&] {
            size_t holding = 0;
            for (const auto& w : fleet->workers) holding += w->index_blocks() > 0 ? 1 : 0;
            std::set<std::string> used;
            for (const auto& [i, u] : first) used.insert(u);
            return holding >= used.size();
          },
          std::chrono::milliseconds(3000)));
    }
  }
  std::set<std::string> used;
  for (const auto& [i, u] : first) used.insert(u);
  EXPECT_GE(used.size(), 2u) << "fresh prefixes spread over the fleet";
}

// On one node the OS places the executor threads unless --pin-threads on asks for a CPU each.
TEST_F(NumaGateway, OnOneNodeThreadsArePinnedOnlyWhenAsked) {
  const std::vector<int> cpus = current_thread_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: a pinned thread cannot be told from a free one";
  start_worker();
  for (const std::string pin : {"auto", "on"}) {
    SCOPED_TRACE(pin);
    auto cfg = base_config();
    cfg.threads = 1;
    cfg.numa = "off";
    cfg.numa_topology.clear();  // also under KVGATE_TEST_NUMA=two
    cfg.pin_threads = pin;
    cfg.worker_urls = {url_of(0)};
    const int on_one_cpu_before = threads_on_one_cpu();
    start_gateway(cfg);
    ASSERT_TRUE(wait_routable(1));
    auto metrics = client().get("/metrics");
    ASSERT_TRUE(metrics.ok());
    const int on_one_cpu = threads_on_one_cpu() - on_one_cpu_before;
    if (pin == "on") {
      EXPECT_EQ(metric_value(metrics->body, "kvgate_executor_threads_pinned"), 1);
      // The executor thread (and any thread it started since, which inherits its CPU).
      EXPECT_GE(on_one_cpu, 1);
    } else {
      EXPECT_EQ(metric_value(metrics->body, "kvgate_executor_threads_pinned"), 0);
      EXPECT_EQ(on_one_cpu, 0);
    }
    gateway_.reset();
  }
}

TEST_F(NumaGateway, ABadTopologyIsRefusedAtStart) {
  auto cfg = base_config();
  cfg.numa_topology = "0;;1";
  auto g = Gateway::create(cfg);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("--numa-topology"), std::string_view::npos);
  cfg.numa_topology.clear();
  cfg.numa = "sometimes";
  EXPECT_FALSE(Gateway::create(cfg).ok());
  cfg.numa = "auto";
  cfg.pin_threads = "yes";
  auto pinned = Gateway::create(cfg);
  ASSERT_FALSE(pinned.ok());
  EXPECT_NE(pinned.status().message().find("--pin-threads"), std::string_view::npos);
}

}  // namespace
}  // namespace kvgate::app
