#include "kvgate/relay/follower.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "harness/corpus_generator.h"
#include "kvgate/relay/server.h"
#include "relay/test_subscriber.h"
#include "support/wait.h"

namespace kvgate::relay {
namespace {

using namespace std::chrono_literals;
using kvgate::testing::wait_until;

constexpr const char* kWorker = "http://127.0.0.1:8000";

std::vector<index::Membership> holder_content(const index::Indexer& idx, HolderId h) {
  std::vector<index::Membership> out;
  EXPECT_TRUE(idx.holder_memberships(h, out).ok());
  return out;
}

// An engine with two ranks (the exactness corpus, holder = rank), a relay in this process that
// can restart (a new table: new epochs, its history rebuilt from the engine's replay of
// everything), and an index fed directly.
class Fleet {
 public:
  explicit Fleet(uint64_t seed, HistoryLimits limits)
      : gen_({.seed = seed, .holders = 2, .holder_capacity = 256}), limits_(limits) {
    start_relay(0);
  }

  void start_relay(int port) {
    server_.reset();
    table_ = std::make_unique<StreamTable>(limits_);
    ranks_ = *table_->add({.name = kWorker, .block_size = 16, .ranks = 2});
    for (const auto& [rank, seq, events] : log_) {
      std::vector<index::Event> views;
      for (const OwnedEvent& e : events) views.push_back(e.view());
      ranks_[rank]->append({.seq = seq, .events = views});
    }
    server_ = std::make_unique<RelayServer>(
        *table_, ServerOptions{.listen = "127.0.0.1:" + std::to_string(port), .heartbeat = 100ms});
    ASSERT_TRUE(server_->start().ok());
    port_ = server_->port();
  }
  void restart_relay() { start_relay(port_); }

  // The engine's next batch: to the direct index and to the relay.
  void step() {
    do {
      gen_.next(step_);
    } while (step_.kind != index::harness::Step::Kind::kBatch);
    const uint32_t rank = static_cast<uint32_t>(step_.holder.value() % 2);
    direct_->apply(HolderId(rank), step_.events);
    std::vector<OwnedEvent> owned;
    for (const index::Event& e : step_.events) {
      owned.push_back({e.kind,
                       e.tier,
                       e.has_parent,
                       e.parent,
                       {e.engine_hashes.begin(), e.engine_hashes.end()},
                       {e.local_hashes.begin(), e.local_hashes.end()}});
    }
    const uint64_t seq = next_seq_[rank]++;
    ranks_[rank]->append({.seq = seq, .events = step_.events});
    log_.push_back({rank, seq, std::move(owned)});
  }

  int port() const { return port_; }
  uint64_t last_seq(uint32_t rank) const { return next_seq_[rank] - 1; }
  const index::Indexer& direct() const { return *direct_; }

 private:
  struct Logged {
    uint32_t rank;
    uint64_t seq;
    std::vector<OwnedEvent> events;
  };
  index::harness::CorpusGenerator gen_;
  index::harness::Step step_;
  HistoryLimits limits_;
  std::unique_ptr<index::Indexer> direct_ = testing::reference();
  std::unique_ptr<StreamTable> table_;
  std::vector<RankStream*> ranks_;
  std::unique_ptr<RelayServer> server_;
  int port_ = 0;
  uint64_t next_seq_[2] = {0, 0};
  std::vector<Logged> log_;  // what the engine's replay holds: everything
};

FollowerOptions options(int port) {
  return {.target = "127.0.0.1:" + std::to_string(port),
          .reconnect_min = 10ms,
          .reconnect_max = 200ms,
          .silence_timeout = 1000ms};
}

// The exactness property through the relay: an index fed through it equals one fed directly,
// whatever happens to the links and the relay meanwhile. Random link cuts (the streams resume
// from (epoch, seq)) and relay restarts (new epochs: OutOfRange, then a snapshot) while the
// engine publishes; the history is short, so a restarted relay's history no longer starts at
// the first batch and snapshots are needed.
TEST(RelayFollower, AnIndexFedThroughTheRelayEqualsOneFedDirectlyThroughCutsAndRestarts) {
  uint64_t resumes = 0, snapshots = 0;
  for (uint64_t seed : {11, 12, 13, 14, 15}) {
    Fleet fleet(seed, {.max_batches = 200, .snapshot_chunk_blocks = 300});
    auto followed = index::make_synchronized(testing::reference());
    RelayFollower follower(*followed, options(fleet.port()));
    ASSERT_TRUE(follower.add(kWorker, 0, HolderId(0)).ok());
    ASSERT_TRUE(follower.add(kWorker, 1, HolderId(1)).ok());
    std::mt19937 rng(static_cast<uint32_t>(seed));
    int cuts = 0, restarts = 0;
    for (int i = 0; i < 2500; ++i) {
      fleet.step();
      if (rng() % 250 == 0) {
        follower.cut_links();
        ++cuts;
      }
      if (rng() % 900 == 0) {
        fleet.restart_relay();
        ++restarts;
      }
      if (i % 10 == 0) std::this_thread::sleep_for(2ms);  // an engine's pace: streams keep up
    }
    for (uint32_t rank : {0u, 1u}) {
      ASSERT_TRUE(wait_until(
          [&] {
            const auto st = follower.stats(kWorker, rank);
            return st && st->last_seq == fleet.last_seq(rank);
          },
          20s))
          << "seed " << seed << " rank " << rank
          << " did not catch up: " << follower.stats(kWorker, rank)->last_error;
      EXPECT_EQ(holder_content(*followed, HolderId(rank)),
                holder_content(fleet.direct(), HolderId(rank)))
          << "seed " << seed << " rank " << rank << " (" << cuts << " cuts, " << restarts
          << " relay restarts)";
    }
    const FollowStats st = *follower.stats(kWorker, 0);
    std::cout << "seed " << seed << ": " << cuts << " cuts, " << restarts
              << " relay restarts; rank 0: " << st.streams << " streams, " << st.resumes
              << " resumed, " << st.snapshots << " snapshots, " << st.restarts << " started over, "
              << st.batches << " batches\n";
    EXPECT_GT(st.streams, 1u);
    EXPECT_EQ(st.restarts, 0u) << "every break was resumed or snapshotted, never started over";
    resumes += st.resumes;
    snapshots += st.snapshots;
  }
  EXPECT_GT(resumes, 0u) << "cut links resume from where they were";
  EXPECT_GT(snapshots, 0u) << "a restarted relay sends snapshots";
}

TEST(RelayFollower, AWorkerTheRelayDoesNotServeIsAskedForAgainUntilItIs) {
  StreamTable table({});
  RelayServer server(table, {.listen = "127.0.0.1:0", .heartbeat = 100ms});
  ASSERT_TRUE(server.start().ok());
  auto followed = index::make_synchronized(testing::reference());
  RelayFollower follower(*followed, options(server.port()));
  ASSERT_TRUE(follower.add("http://10.0.0.9:8000", 0, HolderId(3)).ok());
  EXPECT_EQ(follower.add("http://10.0.0.9:8000", 0, HolderId(4)).code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(wait_until([&] {
    return follower.stats("http://10.0.0.9:8000", 0)->last_error.find("no worker") !=
           std::string::npos;
  }));
  // It appears on the relay: the follower finds it, reads its batches.
  auto ranks = *table.add({.name = "http://10.0.0.9:8000", .ranks = 1});
  testing::append_block(*ranks[0], 5, 77, 770);
  ASSERT_TRUE(
      wait_until([&] { return follower.stats("http://10.0.0.9:8000", 0)->last_seq == 5u; }));
  EXPECT_EQ(holder_content(*followed, HolderId(3)).size(), 1u);
  // Removing it ends the stream and empties the holder.
  EXPECT_TRUE(follower.remove("http://10.0.0.9:8000", 0));
  EXPECT_FALSE(follower.remove("http://10.0.0.9:8000", 0));
  EXPECT_TRUE(holder_content(*followed, HolderId(3)).empty());
  EXPECT_FALSE(follower.stats("http://10.0.0.9:8000", 0).has_value());
}

TEST(RelayFollower, ASilentRelayIsLeftAndTheStreamResumedElsewhere) {
  // A relay whose heartbeats are slower than the follower's patience: every stream is taken for
  // dead after the silence timeout and resumed, without losing or repeating anything.
  StreamTable table({});
  RelayServer server(table, {.listen = "127.0.0.1:0", .heartbeat = 5000ms});
  ASSERT_TRUE(server.start().ok());
  auto ranks = *table.add({.name = kWorker, .ranks = 1});
  auto followed = index::make_synchronized(testing::reference());
  FollowerOptions o = options(server.port());
  o.silence_timeout = 300ms;
  RelayFollower follower(*followed, o);
  ASSERT_TRUE(follower.add(kWorker, 0, HolderId(0)).ok());
  for (uint64_t seq = 0; seq < 3; ++seq) {
    testing::append_block(*ranks[0], seq, 100 + seq, 1000 + seq);
    std::this_thread::sleep_for(400ms);
  }
  ASSERT_TRUE(wait_until([&] { return follower.stats(kWorker, 0)->last_seq == 2u; }));
  const FollowStats st = *follower.stats(kWorker, 0);
  EXPECT_GE(st.streams, 3u) << "left for silence and resumed";
  EXPECT_GE(st.resumes, 2u);
  EXPECT_EQ(st.batches, 3u) << "nothing twice";
  EXPECT_EQ(holder_content(*followed, HolderId(0)).size(), 3u);
}

TEST(RelayFollower, BatchesCarryTheEnginesPublishTimeAndEveryFollowIsListed) {
  StreamTable table({});
  RelayServer server(table, {.listen = "127.0.0.1:0", .heartbeat = 100ms});
  ASSERT_TRUE(server.start().ok());
  auto ranks = *table.add({.name = kWorker, .ranks = 2});
  auto followed = index::make_synchronized(testing::reference());
  RelayFollower follower(*followed, options(server.port()));
  std::mutex mu;
  std::vector<double> published;
  FollowCallbacks callbacks;
  callbacks.on_batch = [&](double ts) {
    std::lock_guard<std::mutex> lock(mu);
    published.push_back(ts);
  };
  ASSERT_TRUE(follower.add(kWorker, 1, HolderId(1), callbacks).ok());
  ASSERT_TRUE(follower.add(kWorker, 0, HolderId(0)).ok());
  const index::EngineHash eng = 5;
  const LocalHash local = 50;
  const index::Event e{.kind = index::EventKind::kStored,
                       .tier = index::Tier::kDevice,
                       .engine_hashes = std::span(&eng, 1),
                       .local_hashes = std::span(&local, 1)};
  ranks[1]->append({.seq = 0, .engine_ts = 1'700'000'000.25, .events = std::span(&e, 1)});
  ASSERT_TRUE(wait_until([&] { return follower.stats(kWorker, 1)->last_seq == 0u; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(published, std::vector<double>{1'700'000'000.25});
  }
  const std::vector<FollowStats> all = follower.stats();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].worker, kWorker);
  EXPECT_EQ(all[0].rank, 0u);
  EXPECT_EQ(all[0].batches, 0u);
  EXPECT_EQ(all[1].rank, 1u);
  EXPECT_EQ(all[1].batches, 1u);
}

}  // namespace
}  // namespace kvgate::relay
