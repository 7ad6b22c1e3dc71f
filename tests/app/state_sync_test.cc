// Gateway replicas sharing their fleet through a real redis-server (and a three-node Redis
// Cluster): a worker added on one replica serves on the other, a removal sticks past the TTL, two
// replicas splitting a burst hold the in-flight overload rule fleet-wide, and an outage of Redis
// costs nothing but the sharing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/gateway_fixture.h"
#include "support/redis_server.h"
#include "support/sanitizer.h"
#include "support/wait.h"

namespace kvgate::app {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

class StateSyncTest : public GatewayTest {
 protected:
  void TearDown() override {
    for (auto& g : replicas_) g->stop(std::chrono::milliseconds(1000));
    replicas_.clear();
    GatewayTest::TearDown();
  }

  GatewayConfig replica_config(const std::string& redis_url, const std::string& id) {
    GatewayConfig c = base_config();
    c.state_sync_url = redis_url;
    c.state_sync_namespace = "it";
    c.state_sync_period = 200ms;
    c.state_sync_ttl = 600ms;
    c.state_sync_replica_id = id;
    return c;
  }
  Gateway& start_replica(GatewayConfig c) {
    EXPECT_TRUE(finish_config(c).ok());
    auto g = Gateway::create(std::move(c));
    EXPECT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE((*g)->start().ok());
    replicas_.push_back(std::move(*g));
    return *replicas_.back();
  }
  static bool routable(const Gateway& g, const std::string& url) {
    const auto fleet = g.registry().snapshot();
    const workers::Worker* w = fleet->find(url);
    return w != nullptr && w->routable() && w->info()->discovered;
  }
  static bool registered(const Gateway& g, const std::string& url) {
    return g.registry().snapshot()->find(url) != nullptr;
  }
  static http::SyncClient client_of(const Gateway& g) {
    return http::SyncClient("127.0.0.1", g.port());
  }
  static std::string post_worker(const Gateway& g, const std::string& url) {
    auto r = client_of(g).post("/workers", R"({"url":")" + url + R"("})");
    return r.ok() ? std::to_string(r->status) : std::string(message_of(r.status()));
  }
  static double metric(Gateway& g, const std::string& prefix) {
    return metric_value(g.metrics_text(), prefix);
  }
  // Waits for `n` more sync cycles of `g` to end.
  static bool sync_cycles(Gateway& g, int n) {
    const double from = metric(g, "kvgate_sync_cycles_total");
    return testing::wait_until([&] { return metric(g, "kvgate_sync_cycles_total") - from >= n; },
                               10s);
  }

  // The registry test, on a standalone server or a cluster (its seed `url`).
  void added_on_one_serves_on_the_other(const std::string& redis_url) {
    const std::string w = start_worker();
    Gateway& a = start_replica(replica_config(redis_url, "gw-a"));
    Gateway& b = start_replica(replica_config(redis_url, "gw-b"));
    ASSERT_EQ(post_worker(a, w), "201");
    const auto added = std::chrono::steady_clock::now();
    // Registered on B within a period and its jitter (A shares an operator's add at once; B
    // pulls within its period), with room for a pull on a busy machine ...
    ASSERT_TRUE(testing::wait_until([&] { return registered(b, w); }, 5s));
    EXPECT_LT(std::chrono::steady_clock::now() - added,
              200ms * 1.1 + 250ms * testing_support::kSlowdown);
    // ... and serving there once B discovered and probed it.
    ASSERT_TRUE(testing::wait_until([&] { return routable(b, w); }, 5s));
    auto r = client_of(b).post("/v1/completions", completion("hello from B"));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200u) << r->body;
    EXPECT_EQ(r->header("x-kvgate-worker"), w);
    EXPECT_EQ(metric(b, "kvgate_sync_fleet_changes_total{change=\"added\"}"), 1);
    ASSERT_TRUE(testing::wait_until(
        [&] {
          return metric(a, "kvgate_sync_convergence_ratio") == 1 &&
                 metric(b, "kvgate_sync_convergence_ratio") == 1 &&
                 metric(a, "kvgate_sync_peers") == 1;
        },
        5s));
  }

  // Two replicas split a steady stream of requests that all want the same worker (it holds their
  // prefix). Each sends there until the worker has the limit in flight, then steers to the other
  // worker: with sync counting the peer's requests too, without only its own. The holder's peak
  // of both replicas' requests in flight.
  int peak_in_flight(Gateway& a, Gateway& b, const std::string& holder) {
    const auto in_flight = [](Gateway& g, const std::string& url) {
      const auto fleet = g.registry().snapshot();
      const workers::Worker* w = fleet->find(url);
      return w ? w->in_flight() : 0;
    };
    std::atomic<bool> done{false};
    std::atomic<int> peak{0};
    std::thread watch([&] {
      while (!done) {
        peak = std::max(peak.load(), in_flight(a, holder) + in_flight(b, holder));
        std::this_thread::sleep_for(2ms);
      }
    });
    std::vector<std::thread> senders;
    for (int i = 0; i < 24; ++i) {
      senders.emplace_back([&, i] {
        Gateway& g = i % 2 == 0 ? a : b;
        http::SyncClient c("127.0.0.1", g.port());
        auto r = c.post("/v1/completions", completion(kSharedPrompt, 100));
        EXPECT_TRUE(r.ok() && r->status == 200);
      });
      std::this_thread::sleep_for(100ms);
    }
    for (auto& s : senders) s.join();
    done = true;
    watch.join();
    return peak.load();
  }
  static constexpr const char* kSharedPrompt =
      "A shared system prompt that every request of the burst begins with, long enough to fill "
      "several blocks of the index so that its holder is the one every replica wants to use.";

  std::vector<std::unique_ptr<Gateway>> replicas_;
};

TEST_F(StateSyncTest, AWorkerAddedOnOneReplicaServesOnTheOther) {
  RedisServer redis;
  added_on_one_serves_on_the_other(redis.url());
}

// In a disaggregated fleet a worker keeps its role and bootstrap port on the peer, which names
// where it came from.
TEST_F(StateSyncTest, APrefillWorkerAddedOnOneReplicaIsAPrefillWorkerOnTheOther) {
  RedisServer redis;
  const std::string decode = start_worker();
  const std::string prefill = start_worker();
  const auto pd = [&](const std::string& id) {
    GatewayConfig c = replica_config(redis.url(), id);
    c.pd_disaggregation = true;
    c.decode_workers = {decode};
    return c;
  };
  Gateway& a = start_replica(pd("gw-a"));
  Gateway& b = start_replica(pd("gw-b"));
  auto added = client_of(a).post(
      "/workers", R"({"url":")" + prefill + R"(","role":"prefill","bootstrap_port":9100})");
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_EQ(added->status, 201u) << added->body;
  ASSERT_TRUE(testing::wait_until([&] { return registered(b, prefill); }, 5s));
  const auto info = b.registry().snapshot()->find(prefill)->info();
  EXPECT_EQ(info->role, workers::WorkerRole::kPrefill);
  EXPECT_EQ(info->bootstrap_port, 9100u);
  EXPECT_EQ(info->source, workers::WorkerSource::kPeer);
  const auto mine = a.registry().snapshot()->find(prefill)->info();
  EXPECT_EQ(mine->source, workers::WorkerSource::kApi);
  EXPECT_EQ(a.registry().snapshot()->find(decode)->info()->source, workers::WorkerSource::kFlags);
}

TEST_F(StateSyncTest, AThreeNodeRedisClusterCarriesTheSameFleet) {
  std::vector<std::unique_ptr<RedisServer>> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(std::make_unique<RedisServer>(/*cluster=*/true));
  ASSERT_TRUE(testing::make_redis_cluster(nodes));
  added_on_one_serves_on_the_other(nodes[1]->url());
}

TEST_F(StateSyncTest, AWorkerDeletedOnOneReplicaStopsOnTheOtherAndStaysGone) {
  RedisServer redis;
  const std::string w = start_worker();
  GatewayConfig ac = replica_config(redis.url(), "gw-a");
  ac.worker_urls = {w};
  Gateway& a = start_replica(ac);
  Gateway& b = start_replica(replica_config(redis.url(), "gw-b"));
  ASSERT_TRUE(testing::wait_until([&] { return routable(b, w); }, 5s));
  auto del = client_of(a).request({.method = http::Verb::delete_, .target = "/workers?url=" + w});
  ASSERT_TRUE(del.ok());
  ASSERT_EQ(del->status, 200u);
  ASSERT_TRUE(testing::wait_until([&] { return !registered(b, w); }, 2s));
  // Past the TTL of every worker key, and two cycles of each replica after: nobody brings it back.
  ASSERT_TRUE(testing::wait_until(
      [&] { return redis.cli("EXISTS 'kvgate:{it}:worker:" + w + "'") == "0\n"; }, 5s, 20ms));
  ASSERT_TRUE(sync_cycles(a, 2));
  ASSERT_TRUE(sync_cycles(b, 2));
  EXPECT_FALSE(registered(a, w));
  EXPECT_FALSE(registered(b, w));
  auto r = client_of(b).post("/v1/completions", completion("anyone?"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503u);
  EXPECT_EQ(metric(b, "kvgate_sync_fleet_changes_total{change=\"removed\"}"), 1);
  EXPECT_EQ(redis.cli("EXISTS 'kvgate:{it}:tomb:" + w + "'"), "1\n");
}

TEST_F(StateSyncTest, TwoReplicasSplittingABurstHoldTheInFlightRuleFleetWide) {
  RedisServer redis;
  // Slow workers: a 100-token answer takes over a second, so the burst piles up to about a dozen
  // requests in flight, more than the holder's limit from each replica alone; the three others
  // have room for what the holder cannot take.
  std::vector<std::string> fleet;
  for (int i = 0; i < 4; ++i) fleet.push_back(start_worker(/*speedup=*/0.5));
  constexpr uint32_t kLimit = 4;
  const auto config = [&](bool synced, const std::string& id) {
    GatewayConfig c = synced ? replica_config(redis.url(), id) : base_config();
    c.worker_urls = fleet;
    c.cache_aware.overload.in_flight_requests = kLimit;
    c.cache_aware.overload.waiting_requests.reset();
    c.cache_aware.overload.token_usage.reset();
    // The in-flight rule alone steers: the wait rule would send the burst's short prompts off the
    // busy holder before the limit is reached.
    c.cache_aware.wait_spill_ratio = 0;
    return c;
  };
  const auto all_routable = [&](const Gateway& g) {
    return std::all_of(fleet.begin(), fleet.end(), [&](const auto& w) { return routable(g, w); });
  };
  int peaks[2] = {0, 0};
  for (const bool synced : {false, true}) {
    Gateway& a = start_replica(config(synced, "gw-a"));
    Gateway& b = start_replica(config(synced, "gw-b"));
    ASSERT_TRUE(testing::wait_until([&] { return all_routable(a) && all_routable(b); }, 5s));
    // Both learn from the events that w1 holds the prefix.
    for (Gateway* g : {&a, &b}) {
      http::SyncClient c("127.0.0.1", g->port());
      auto r = c.post("/v1/completions", completion(kSharedPrompt, 1));
      ASSERT_TRUE(r.ok());
    }
    std::string holder;
    {
      http::SyncClient c("127.0.0.1", a.port());
      auto r = c.post("/v1/completions", completion(kSharedPrompt, 1));
      ASSERT_TRUE(r.ok());
      holder = std::string(r->header("x-kvgate-worker"));
    }
    peaks[synced] = peak_in_flight(a, b, holder);
    for (auto& g : replicas_) g->stop(std::chrono::milliseconds(1000));
    replicas_.clear();
  }
  // Without sync each replica fills the holder to the limit by itself.
  EXPECT_GE(peaks[0], static_cast<int>(2 * kLimit) - 1) << "without sync";
  // With sync a peer's requests count within a period: at most a period's arrivals over.
  EXPECT_LE(peaks[1], static_cast<int>(kLimit) + 2) << "with sync";
  RecordProperty("peak_without_sync", peaks[0]);
  RecordProperty("peak_with_sync", peaks[1]);
  std::printf("holder's peak in flight: %d without sync, %d with (limit %u)\n", peaks[0], peaks[1],
              kLimit);
}

TEST_F(StateSyncTest, WithoutKvEventsAPrefixRoutedByOneReplicaIsFoundByTheOther) {
  RedisServer redis;
  const std::vector<std::string> fleet = {start_worker(), start_worker()};
  const auto config = [&](const std::string& id) {
    GatewayConfig c = replica_config(redis.url(), id);
    c.worker_urls = fleet;
    c.kv_events = false;  // the approximate mode: each replica predicts from its decisions
    return c;
  };
  Gateway& a = start_replica(config("gw-a"));
  Gateway& b = start_replica(config("gw-b"));
  ASSERT_TRUE(testing::wait_until(
      [&] {
        return routable(a, fleet[0]) && routable(a, fleet[1]) && routable(b, fleet[0]) &&
               routable(b, fleet[1]);
      },
      5s));
  constexpr int kPrompts = 8;
  const auto prompt = [](int i) {
    return "Conversation " + std::to_string(i) +
           ": a long enough opening that fills a few blocks of sixteen tokens each, so that the "
           "prediction has something to hold for the next turn of this very conversation.";
  };
  std::vector<std::string> placed;
  for (int i = 0; i < kPrompts; ++i) {
    auto r = client_of(a).post("/v1/completions", completion(prompt(i)));
    ASSERT_TRUE(r.ok() && r->status == 200);
    placed.emplace_back(r->header("x-kvgate-worker"));
  }
  // A's next push carries every prediction; a whole cycle of B's after it applies them.
  ASSERT_TRUE(sync_cycles(a, 1));
  ASSERT_TRUE(sync_cycles(b, 2));
  EXPECT_GT(metric(b, "kvgate_sync_predicted_blocks_applied_total"), 0);
  const auto affinity = [&] {
    return metric(b, "kvgate_router_decisions_total{branch=\"affinity\"");
  };
  const double before = std::max(0.0, affinity());
  int same = 0;
  for (int i = 0; i < kPrompts; ++i) {
    auto r = client_of(b).post("/v1/completions", completion(prompt(i) + " And a follow-up."));
    ASSERT_TRUE(r.ok() && r->status == 200);
    same += r->header("x-kvgate-worker") == placed[i] ? 1 : 0;
  }
  EXPECT_EQ(same, kPrompts);
  EXPECT_EQ(affinity() - before, kPrompts);
}

TEST_F(StateSyncTest, ARedisOutageCostsOnlyTheSharing) {
  auto redis = std::make_unique<RedisServer>();
  const uint16_t port = redis->port();
  const std::string w = start_worker();
  GatewayConfig ac = replica_config(redis->url(), "gw-a");
  ac.worker_urls = {w};
  Gateway& a = start_replica(ac);
  Gateway& b = start_replica(replica_config(redis->url(), "gw-b"));
  ASSERT_TRUE(testing::wait_until([&] { return routable(b, w); }, 5s));
  redis->kill();
  ASSERT_TRUE(testing::wait_until(
      [&] { return metric(a, "kvgate_sync_up") == 0 && metric(b, "kvgate_sync_up") == 0; }, 3s));
  // Both keep serving on their own state.
  for (Gateway* g : {&a, &b}) {
    auto r = client_of(*g).post("/v1/completions", completion("while redis is away"));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200u);
  }
  const std::string text = b.metrics_text();
  EXPECT_GT(metric_value(text, "kvgate_sync_errors_total{op=\"connect\"}") +
                metric_value(text, "kvgate_sync_errors_total{op=\"pull\"}"),
            0);
  EXPECT_EQ(metric_value(text, "kvgate_sync_outages_total"), 1);
  EXPECT_GT(metric_value(text, "kvgate_sync_backoff_seconds"), 0);
  // A long outage: a backoff alone would now wait seconds before the next try. The probes (a
  // PING a period) find Redis at its return instead.
  const auto probes = [&](Gateway& g) {
    return metric_value(g.metrics_text(), "kvgate_sync_errors_total{op=\"probe\"}");
  };
  ASSERT_TRUE(testing::wait_until([&] { return probes(a) >= 10 && probes(b) >= 10; }, 10s));
  const double a_probes = probes(a), b_probes = probes(b);
  // Back, empty: both push everything again and agree.
  redis = std::make_unique<RedisServer>(false, port);
  const auto back = std::chrono::steady_clock::now();
  ASSERT_TRUE(testing::wait_until(
      [&] { return metric(a, "kvgate_sync_up") == 1 && metric(b, "kvgate_sync_up") == 1; }, 10s));
  const double up_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - back).count();
  RecordProperty("sync_up_seconds_after_redis_returned", std::to_string(up_after));
  std::printf("kvgate_sync_up 1 on both replicas %.2f s after Redis returned (period 0.2 s)\n",
              up_after);
  // At most one probe failed after the return (one under way as Redis came back): whole again
  // within two periods, counted in probes rather than in time.
  EXPECT_LE(probes(a) - a_probes, 1);
  EXPECT_LE(probes(b) - b_probes, 1);
  ASSERT_TRUE(testing::wait_until(
      [&] {
        return metric(a, "kvgate_sync_convergence_ratio") == 1 &&
               metric(b, "kvgate_sync_convergence_ratio") == 1 &&
               metric(b, "kvgate_sync_peers") == 1;
      },
      10s));
  EXPECT_EQ(redis->cli("EXISTS 'kvgate:{it}:worker:" + w + "'"), "1\n");
}

TEST_F(StateSyncTest, ThePasswordComesFromAFileAndIsNeverLogged) {
  RedisServer redis(false, 0, {"--requirepass", "s3cret-pass"});
  const std::string file = "/tmp/kvgate-sync-pass-" + std::to_string(getpid());
  std::ofstream(file) << "s3cret-pass\n";
  std::string log;
  GatewayConfig good = replica_config(redis.url(), "gw-a");
  good.state_sync_password_file = file;
  Gateway& a = start_replica(good);
  ASSERT_TRUE(testing::wait_until([&] { return metric(a, "kvgate_sync_up") == 1; }, 3s));
  // A wrong one: refused, counted, and the refusal's log line names no password.
  GatewayConfig bad =
      replica_config("redis://wrong-pass@127.0.0.1:" + std::to_string(redis.port()), "gw-b");
  ::testing::internal::CaptureStderr();
  Gateway& b = start_replica(bad);
  ASSERT_TRUE(testing::wait_until(
      [&] { return metric(b, "kvgate_sync_errors_total{op=\"connect\"}") >= 1; }, 3s));
  b.stop(std::chrono::milliseconds(500));
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(metric(b, "kvgate_sync_up"), 0);
  EXPECT_NE(log.find("refused AUTH"), std::string::npos) << log;
  EXPECT_EQ(log.find("wrong-pass"), std::string::npos) << log;
  EXPECT_EQ(log.find("s3cret"), std::string::npos) << log;
  std::remove(file.c_str());
}

TEST_F(StateSyncTest, ForeignValuesUnderTheNamespaceAreCountedAndSkipped) {
  RedisServer redis;
  redis.cli("SET 'kvgate:{it}:worker:http://127.0.0.1:1' 'garbage'");
  redis.cli("SET 'kvgate:{it}:load:x' '{\"v\":1}'");
  Gateway& a = start_replica(replica_config(redis.url(), "gw-a"));
  ASSERT_TRUE(testing::wait_until([&] { return metric(a, "kvgate_sync_up") == 1; }, 3s));
  const std::string text = a.metrics_text();
  EXPECT_GE(metric_value(text, "kvgate_sync_bad_values_total{reason=\"not_json\"}"), 1);
  EXPECT_GE(metric_value(text, "kvgate_sync_bad_values_total{reason=\"wrong_shape\"}"), 1);
  EXPECT_TRUE(a.registry().snapshot()->workers.empty());
}

// A key's request limit held by two replicas together: each enforces its share (half, with both
// asking alike), so a burst split between them admits about one limit, not one per replica.
TEST_F(StateSyncTest, TwoReplicasShareAKeysRateLimit) {
  RedisServer redis;
  const std::string keys = (std::filesystem::temp_directory_path() /
                            ("kvgate-shared-keys-" + std::to_string(getpid()) + ".yaml"))
                               .string();
  std::ofstream(keys) << "keys:\n  - key: sk-shared\n    tenant: team-a\n    rpm: 60\n";
  const std::string w = start_worker();
  const auto config = [&](const std::string& id) {
    GatewayConfig c = replica_config(redis.url(), id);
    c.worker_urls = {w};
    c.api_keys_file = keys;
    return c;
  };
  Gateway& a = start_replica(config("gw-a"));
  Gateway& b = start_replica(config("gw-b"));
  ASSERT_TRUE(testing::wait_until(
      [&] {
        return metric(a, "kvgate_sync_rate_limit_replicas") == 2 &&
               metric(b, "kvgate_sync_rate_limit_replicas") == 2 && routable(a, w) &&
               routable(b, w);
      },
      10s));
  ASSERT_TRUE(sync_cycles(a, 1) && sync_cycles(b, 1));  // both have set their shares
  const auto started = std::chrono::steady_clock::now();
  int admitted = 0, refused = 0;
  for (int i = 0; i < 90; ++i) {
    http::ClientRequest r{.method = http::Verb::post,
                          .target = "/v1/completions",
                          .body = completion("burst " + std::to_string(i))};
    r.headers.emplace_back("authorization", "Bearer sk-shared");
    auto res = client_of(i % 2 == 0 ? a : b).request(r);
    ASSERT_TRUE(res.ok()) << res.status();
    admitted += res->status == 200 ? 1 : 0;
    refused += res->status == 429 ? 1 : 0;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::filesystem::remove(keys);
  // One limit (60) and what it refilled meanwhile (one a second); alone, each replica would have
  // admitted its 45.
  EXPECT_LE(admitted, 60 + static_cast<int>(seconds) + 1) << "in " << seconds << " s";
  EXPECT_GE(admitted, 40) << "in " << seconds << " s";
  EXPECT_EQ(admitted + refused, 90);
}

}  // namespace
}  // namespace kvgate::app
