// A fleet of in-memory workers for policy tests.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "fakes/fake_indexer.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/registry.h"

namespace kvgate::policy {

class FleetTest : public ::testing::Test {
 protected:
  // n workers; worker i gets holder id i (has KV events) unless `with_events` is false.
  void make_fleet(int n, bool with_events = true) {
    for (int i = 0; i < n; ++i) {
      workers::WorkerInfo info;
      info.models = {"m"};
      if (with_events) info.holders = {HolderId(static_cast<uint32_t>(i))};
      auto w = registry.add("http://127.0.0.1:" + std::to_string(9000 + i), info);
      ASSERT_TRUE(w.ok());
      (*w)->health().record(true);  // probed healthy
      fleet.push_back(*w);
    }
  }
  std::unique_ptr<Policy> make(PolicyKind kind, CacheAwareConfig cfg = {}) {
    auto p = make_policy(kind, cfg, {.index = &index, .clock = &clock});
    EXPECT_TRUE(p.ok());
    return std::move(*p);
  }
  Decision route(Policy& p, const std::vector<SeqHash>& chain, std::string_view key = {}) {
    RouteRequest req{.chain = chain,
                     .prompt_tokens = static_cast<uint32_t>(chain.size() * 16),
                     .block_size = 16,
                     .routing_key = key,
                     .model = "m"};
    return p.select(req, *registry.snapshot(), scratch);
  }
  std::string url_of(const Decision& d) { return registry.snapshot()->workers.at(d.worker)->url(); }

  ManualClock clock;
  workers::WorkerRegistry registry{{}, clock};
  std::vector<std::shared_ptr<workers::Worker>> fleet;
  fakes::FakeIndexer index;
  Scratch scratch;
};

}  // namespace kvgate::policy
