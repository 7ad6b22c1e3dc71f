// StateSync against a real redis-server (standalone and a three-node cluster): what one replica
// publishes reaches another, unchanged entries are not rewritten, bad values are skipped, and a
// Redis outage is survived, counted, probed and recovered at Redis's first answer, and a failure
// with Redis answering is backed off from.
#include "kvgate/sync/state_sync.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/redis_server.h"
#include "support/wait.h"

namespace kvgate::sync {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

// A replica's side as the gateway plays it, reduced: it publishes `local` and, when `adopt` is
// on, registers every live worker it pulls (as the gateway's registry does).
class FakeHost : public SyncHost {
 public:
  explicit FakeHost(std::string replica, bool adopt = true)
      : replica_(std::move(replica)), adopt_(adopt) {}

  void local_state(SharedState& out) override {
    MutexLock l(&mu_);
    out = local_;
    out.loads = {ReplicaLoad{.replica = replica_, .at_ms = ++load_at_, .workers = load_}};
  }
  void apply(const SharedState& fleet) override {
    MutexLock l(&mu_);
    last_ = fleet;
    ++applies_;
    if (!adopt_) return;
    for (const WorkerRecord* w : live_workers(fleet)) {
      const bool known = std::any_of(local_.workers.begin(), local_.workers.end(),
                                     [&](const WorkerRecord& r) { return r.url == w->url; });
      if (!known) local_.workers.push_back(*w);
    }
    std::erase_if(local_.workers, [&](const WorkerRecord& r) {
      return std::any_of(fleet.tombstones.begin(), fleet.tombstones.end(),
                         [&](const Tombstone& t) { return removes(t, r); });
    });
  }
  void forget_peers() override {
    MutexLock l(&mu_);
    ++forgets_;
  }
  void take_predictions(std::vector<PredictionJournal>& out) override {
    MutexLock l(&mu_);
    for (auto& j : journals_) out.push_back(std::move(j));
    journals_.clear();
  }
  void predict(const std::string& url, std::vector<SeqHash> blocks) {
    MutexLock l(&mu_);
    journals_.push_back({.replica = replica_,
                         .epoch_ms = 1,
                         .seq = ++journal_seq_,
                         .workers = {{url, std::move(blocks)}}});
  }

  void add_worker(const std::string& url, int64_t at_ms) {
    MutexLock l(&mu_);
    local_.workers.push_back({.url = url, .added_by = replica_, .added_at_ms = at_ms});
  }
  void remove_worker(const std::string& url, int64_t at_ms) {
    MutexLock l(&mu_);
    std::erase_if(local_.workers, [&](const WorkerRecord& r) { return r.url == url; });
    local_.tombstones.push_back({.url = url, .removed_by = replica_, .removed_at_ms = at_ms});
  }
  void set_in_flight(const std::string& url, int32_t n) {
    set_load({{.url = url, .in_flight = n}});
  }
  void set_load(std::vector<WorkerInflight> load) {
    MutexLock l(&mu_);
    load_ = std::move(load);
  }
  std::vector<std::string> worker_urls() {
    MutexLock l(&mu_);
    std::vector<std::string> out;
    for (const auto& w : local_.workers) out.push_back(w.url);
    std::sort(out.begin(), out.end());
    return out;
  }
  SharedState last() {
    MutexLock l(&mu_);
    return last_;
  }
  int forgets() {
    MutexLock l(&mu_);
    return forgets_;
  }

 private:
  const std::string replica_;
  const bool adopt_;
  Mutex mu_;
  SharedState local_ KVGATE_GUARDED_BY(mu_);
  std::vector<WorkerInflight> load_ KVGATE_GUARDED_BY(mu_);
  int64_t load_at_ KVGATE_GUARDED_BY(mu_) = 0;
  SharedState last_ KVGATE_GUARDED_BY(mu_);
  int applies_ KVGATE_GUARDED_BY(mu_) = 0;
  int forgets_ KVGATE_GUARDED_BY(mu_) = 0;
  std::vector<PredictionJournal> journals_ KVGATE_GUARDED_BY(mu_);
  uint64_t journal_seq_ KVGATE_GUARDED_BY(mu_) = 0;
};

SyncConfig config_for(uint16_t port, std::string replica) {
  SyncConfig c;
  c.redis = *parse_redis_url("redis://127.0.0.1:" + std::to_string(port));
  c.ns = "test";
  c.replica_id = std::move(replica);
  c.period = 100ms;
  c.ttl = 300ms;
  c.timeout = 500ms;
  c.max_backoff = 400ms;
  return c;
}

// One replica as these tests run it: its host and its sync engine on the Redis at `port`.
struct Replica {
  Replica(uint16_t port, const std::string& id) : host(id), sync(config_for(port, id), host) {}
  FakeHost host;
  StateSync sync;
};

const ReplicaLoad* load_of(const SharedState& s, std::string_view replica) {
  for (const auto& l : s.loads)
    if (l.replica == replica) return &l;
  return nullptr;
}

TEST(StateSync, WorkersAndLoadsReachTheOtherReplica) {
  RedisServer redis;
  Replica a(redis.port(), "gw-a"), b(redis.port(), "gw-b");
  a.host.add_worker("http://10.0.0.1:8000", 1000);
  a.host.set_in_flight("http://10.0.0.1:8000", 7);
  ASSERT_TRUE(a.sync.run_once().ok());
  ASSERT_TRUE(b.sync.run_once().ok());
  EXPECT_EQ(b.host.worker_urls(), std::vector<std::string>{"http://10.0.0.1:8000"});
  const SharedState seen = b.host.last();
  const ReplicaLoad* from_a = load_of(seen, "gw-a");
  ASSERT_NE(from_a, nullptr);
  ASSERT_EQ(from_a->workers.size(), 1u);
  EXPECT_EQ(from_a->workers[0].in_flight, 7);
  // B saw a worker it did not have: it disagreed at that pull, and agrees once both pushed.
  EXPECT_LT(b.sync.stats().convergence, 1.0);
  ASSERT_TRUE(a.sync.run_once().ok());
  ASSERT_TRUE(b.sync.run_once().ok());
  ASSERT_TRUE(a.sync.run_once().ok());
  EXPECT_DOUBLE_EQ(a.sync.stats().convergence, 1.0);
  EXPECT_DOUBLE_EQ(b.sync.stats().convergence, 1.0);
  EXPECT_EQ(a.sync.stats().peers, 1u);
  EXPECT_EQ(b.sync.stats().peers, 1u);
  EXPECT_TRUE(b.sync.stats().redis_up);
  EXPECT_FALSE(b.sync.stats().cluster);
  // Keys carry their TTL.
  const std::string pttl = redis.cli("PTTL 'kvgate:{test}:worker:http://10.0.0.1:8000'");
  EXPECT_GT(std::stol(pttl), 0) << pttl;
  EXPECT_LE(std::stol(pttl), 300) << pttl;
}

TEST(StateSync, APredictionJournalIsWrittenOnceAndLivesForItsTtl) {
  RedisServer redis;
  Replica a(redis.port(), "gw-a"), b(redis.port(), "gw-b");
  a.host.predict("http://w:1", {1, 2, 18'446'744'073'709'551'615ull});
  ASSERT_TRUE(a.sync.run_once().ok());
  ASSERT_TRUE(a.sync.run_once().ok());  // nothing new to journal
  EXPECT_EQ(a.sync.stats().journals_pushed, 1u);
  ASSERT_TRUE(b.sync.run_once().ok());
  const SharedState seen = b.host.last();
  ASSERT_EQ(seen.predictions.size(), 1u);
  EXPECT_EQ(seen.predictions[0].id(), "gw-a/1/1");
  ASSERT_EQ(seen.predictions[0].workers.size(), 1u);
  EXPECT_EQ(seen.predictions[0].workers[0].second,
            (std::vector<SeqHash>{1, 2, 18'446'744'073'709'551'615ull}));
  ASSERT_TRUE(testing::wait_until(  // past the TTL
      [&] { return redis.cli("EXISTS 'kvgate:{test}:pred:gw-a/1/1'") == "0\n"; }, 5s, 20ms));
  ASSERT_TRUE(b.sync.run_once().ok());
  EXPECT_TRUE(b.host.last().predictions.empty());
}

TEST(StateSync, ADeletedWorkerStaysDeletedWhileAPeerStillPublishesIt) {
  RedisServer redis;
  Replica a(redis.port(), "gw-a"), b(redis.port(), "gw-b");
  a.host.add_worker("http://w:1", 1000);
  ASSERT_TRUE(a.sync.run_once().ok());
  ASSERT_TRUE(b.sync.run_once().ok());
  ASSERT_EQ(b.host.worker_urls().size(), 1u);
  a.host.remove_worker("http://w:1", 2000);
  // B refreshes the worker's key before it hears of the removal: the tombstone still wins.
  ASSERT_TRUE(b.sync.run_once().ok());
  ASSERT_TRUE(a.sync.run_once().ok());
  ASSERT_TRUE(b.sync.run_once().ok());
  EXPECT_TRUE(b.host.worker_urls().empty());
  // Past the worker key's TTL nothing brings it back, and the tombstone is still there.
  ASSERT_TRUE(testing::wait_until(
      [&] { return redis.cli("EXISTS 'kvgate:{test}:worker:http://w:1'") == "0\n"; }, 5s, 20ms));
  ASSERT_TRUE(a.sync.run_once().ok());
  ASSERT_TRUE(b.sync.run_once().ok());
  EXPECT_TRUE(b.host.worker_urls().empty());
  EXPECT_TRUE(a.host.worker_urls().empty());
  EXPECT_EQ(redis.cli("EXISTS 'kvgate:{test}:tomb:http://w:1'"), "1\n");
  // Added again later: newer than its tombstone, it is back everywhere.
  a.host.add_worker("http://w:1", 3000);
  ASSERT_TRUE(a.sync.run_once().ok());
  ASSERT_TRUE(b.sync.run_once().ok());
  EXPECT_EQ(b.host.worker_urls(), std::vector<std::string>{"http://w:1"});
}

TEST(StateSync, UnchangedEntriesAreRefreshedNotRewrittenEveryPeriod) {
  RedisServer redis;
  FakeHost host("gw-a", /*adopt=*/false);
  StateSync s(config_for(redis.port(), "gw-a"), host);
  for (int i = 0; i < 20; ++i) host.add_worker("http://w:" + std::to_string(i + 1), 1);
  ASSERT_TRUE(s.run_once().ok());
  const uint64_t first = s.stats().keys_pushed;
  EXPECT_EQ(first, 21u);  // 20 workers and the load record
  ASSERT_TRUE(s.run_once().ok());
  // Only the load record (its time moves) is written again; the workers wait for their refresh.
  EXPECT_EQ(s.stats().keys_pushed - first, 1u);
  EXPECT_EQ(s.stats().keys_unchanged, 20u);
  std::this_thread::sleep_for(120ms);  // past a third of the TTL: due for refresh
  ASSERT_TRUE(s.run_once().ok());
  EXPECT_EQ(s.stats().keys_pushed - first, 22u);
}

TEST(StateSync, GarbageUnderTheNamespaceIsCountedAndSkipped) {
  RedisServer redis;
  FakeHost host("gw-a", /*adopt=*/false);
  SyncConfig c = config_for(redis.port(), "gw-a");
  c.max_value_bytes = 4096;
  StateSync s(c, host);
  redis.cli("SET 'kvgate:{test}:worker:http://x:1' 'not json at all'");
  redis.cli("SET 'kvgate:{test}:worker:http://y:1' '{\"v\":1,\"url\":\"http://y:1\"}'");
  redis.cli("SET 'kvgate:{test}:sessions:1' '{}'");
  redis.cli("SET 'kvgate:{test}:load:big' " + std::string(5000, 'x'));
  redis.cli(
      "SET 'kvgate:{test}:worker:http://ok:1' "
      "'{\"v\":1,\"url\":\"http://ok:1\",\"added_by\":\"gw-z\",\"added_at_ms\":5,"
      "\"kv_endpoints\":[]}'");
  ASSERT_TRUE(s.run_once().ok());
  const SyncStats st = s.stats();
  EXPECT_EQ(st.bad_values[static_cast<size_t>(BadValue::kNotJson)], 1u);
  EXPECT_EQ(st.bad_values[static_cast<size_t>(BadValue::kWrongShape)], 1u);
  EXPECT_EQ(st.bad_values[static_cast<size_t>(BadValue::kUnknownKey)], 1u);
  EXPECT_EQ(st.bad_values[static_cast<size_t>(BadValue::kTooLarge)], 1u);
  const SharedState last = host.last();
  ASSERT_EQ(last.workers.size(), 1u);
  EXPECT_EQ(last.workers[0].url, "http://ok:1");
  // A value of this replica's own over the limit is not written either.
  std::vector<WorkerInflight> load;
  for (int i = 0; i < 200; ++i) load.push_back({.url = "http://10.0.0.1:" + std::to_string(i)});
  host.set_load(std::move(load));
  ASSERT_TRUE(s.run_once().ok());
  // The pulled one again, and this replica's own.
  EXPECT_EQ(s.stats().bad_values[static_cast<size_t>(BadValue::kTooLarge)], 3u);
  EXPECT_LT(std::stol(redis.cli("STRLEN 'kvgate:{test}:load:gw-a'")), 4096);
}

TEST(StateSync, ARedisOutageIsProbedCountedAndRecoveredAtTheFirstAnswer) {
  auto redis = std::make_unique<RedisServer>();
  const uint16_t port = redis->port();
  Replica a(port, "gw-a"), b(port, "gw-b");
  a.host.add_worker("http://w:1", 1000);
  a.sync.start();
  b.sync.start();
  ASSERT_TRUE(testing::wait_until([&] { return b.host.worker_urls().size() == 1; }, 5s));
  ASSERT_TRUE(testing::wait_until([&] { return b.sync.stats().peers == 1; }, 5s));
  redis->kill();
  const auto probes = [](const SyncStats& s) {
    return s.errors[static_cast<size_t>(SyncOp::kProbe)];
  };
  // Both keep their state, count the failure, probe each period and forget their peers.
  ASSERT_TRUE(testing::wait_until([&] { return probes(b.sync.stats()) >= 5; }, 5s));
  ASSERT_TRUE(testing::wait_until([&] { return b.host.forgets() == 1; }, 5s));
  const SyncStats down = b.sync.stats();
  EXPECT_FALSE(down.redis_up);
  EXPECT_EQ(down.outages, 1u);
  EXPECT_DOUBLE_EQ(down.convergence, 0.0);
  // One whole cycle failed (at its connect, pull or push: Redis may die under any of them); the
  // rest were PINGs, one a period.
  EXPECT_EQ(down.errors[static_cast<size_t>(SyncOp::kConnect)] +
                down.errors[static_cast<size_t>(SyncOp::kPull)] +
                down.errors[static_cast<size_t>(SyncOp::kPush)],
            1u);
  EXPECT_EQ(b.host.worker_urls().size(), 1u);
  // Back, empty: the first probe that finds it runs a whole cycle at once, so each replica is
  // whole again after at most one more failed probe (one that was under way as Redis returned).
  const uint64_t a_probes = probes(a.sync.stats()), b_probes = probes(b.sync.stats());
  redis = std::make_unique<RedisServer>(false, port);
  ASSERT_TRUE(testing::wait_until(
      [&] {
        return a.sync.stats().redis_up && b.sync.stats().redis_up &&
               a.sync.stats().convergence == 1.0 && b.sync.stats().convergence == 1.0 &&
               b.sync.stats().peers == 1;
      },
      3s));
  EXPECT_LE(probes(a.sync.stats()) - a_probes, 1u);
  EXPECT_LE(probes(b.sync.stats()) - b_probes, 1u);
  EXPECT_EQ(redis->cli("EXISTS 'kvgate:{test}:worker:http://w:1'"), "1\n");
  a.sync.stop();
  b.sync.stop();
}

TEST(StateSync, AFailureWithRedisAnsweringIsBackedOff) {
  RedisServer redis;
  Replica a(redis.port(), "gw-a");
  a.sync.start();
  ASSERT_TRUE(testing::wait_until([&] { return a.sync.stats().redis_up; }, 5s));
  // Redis answers PING but refuses every write: the cycles back off to the cap.
  redis.cli("CONFIG SET maxmemory 1");
  redis.cli("CONFIG SET maxmemory-policy noeviction");
  a.host.add_worker("http://w:2", 1000);
  a.sync.sync_soon();
  ASSERT_TRUE(testing::wait_until([&] { return a.sync.stats().backoff == 400ms; }, 10s));
  const SyncStats failing = a.sync.stats();
  EXPECT_FALSE(failing.redis_up);
  EXPECT_EQ(failing.errors[static_cast<size_t>(SyncOp::kProbe)], 0u) << "PING answered";
  redis.cli("CONFIG SET maxmemory 0");
  ASSERT_TRUE(testing::wait_until([&] { return a.sync.stats().redis_up; }, 5s));
  a.sync.stop();
}

TEST(StateSync, AThreeNodeClusterServesTheNamespaceFromOneSlot) {
  std::vector<std::unique_ptr<RedisServer>> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(std::make_unique<RedisServer>(/*cluster=*/true));
  ASSERT_TRUE(testing::make_redis_cluster(nodes));
  // Each replica is given a different seed node; both end up at the slot's owner.
  Replica a(nodes[0]->port(), "gw-a"), b(nodes[2]->port(), "gw-b");
  a.host.add_worker("http://10.0.0.9:8000", 1000);
  ASSERT_TRUE(a.sync.run_once().ok()) << a.sync.stats().node;
  ASSERT_TRUE(b.sync.run_once().ok());
  EXPECT_EQ(b.host.worker_urls(), std::vector<std::string>{"http://10.0.0.9:8000"});
  EXPECT_TRUE(a.sync.stats().cluster);
  EXPECT_EQ(a.sync.stats().node, b.sync.stats().node);
  ASSERT_TRUE(a.sync.run_once().ok());
  ASSERT_TRUE(b.sync.run_once().ok());
  EXPECT_DOUBLE_EQ(b.sync.stats().convergence, 1.0);
  EXPECT_EQ(b.sync.stats().peers, 1u);
}

}  // namespace
}  // namespace kvgate::sync
