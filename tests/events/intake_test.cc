// The intake bounds on loopback: a real ZMQ publisher (test_publisher.h) misbehaving in each way
// a bound answers (stores without removals, hashes that stop agreeing, sequence chaos, a flood,
// an oversized message, a lane that falls behind, bogus timestamps), EventIngest feeding a
// reference index. Every wait polls with a deadline; nothing sleeps a guessed time.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "gated_indexer.h"
#include "kvgate/events/decode.h"
#include "kvgate/events/engine_hash.h"
#include "kvgate/events/ingest.h"
#include "kvgate/events/normalize.h"
#include "support/wait.h"
#include "test_publisher.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
// Debian's libzmq is not built with TSan: its I/O threads hand sockets and messages over through
// synchronization TSan cannot see.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libzmq.so.5\nrace:libzmq.so.5\n";
}
#endif
#endif

namespace kvgate::events {
namespace {

using testing::GatedIndexer;
using testing::TestPublisher;
using namespace std::chrono_literals;

using kvgate::testing::wait_until;

double wall_now() { return to_unix_seconds(Clock::real().wall()); }

// Batch k: a fresh two-block sequence with made-up hashes, nothing removed.
WireBatch stores(uint64_t k, double ts = wall_now()) {
  WireBatch b;
  b.ts = ts;
  BlockStored s;
  s.block_hashes = {5000 + 2 * k, 5001 + 2 * k};
  s.token_ids = {static_cast<TokenId>(4 * k), static_cast<TokenId>(4 * k + 1),
                 static_cast<TokenId>(4 * k + 2), static_cast<TokenId>(4 * k + 3)};
  s.block_size = 2;
  b.events.push_back(s);
  return b;
}

// Batch k of an engine hashing as vLLM does (sha256_cbor, the default seed): a fresh two-block
// sequence whose hashes the check reproduces.
WireBatch vllm_stores(uint64_t k) {
  static const VllmSha256Cbor vllm;
  WireBatch b = stores(k);
  BlockStored& s = std::get<BlockStored>(b.events[0]);
  Digest parent = vllm.none_hash();
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<TokenId> tokens(s.token_ids.begin() + 2 * i, s.token_ids.begin() + 2 * i + 2);
    parent = vllm.block(parent, tokens);
    s.block_hashes[i] = VllmSha256Cbor::wire_value(parent);
  }
  return b;
}

// What a holder holds after these batches apply in order, each once.
std::vector<index::Membership> truth(const std::vector<WireBatch>& batches, HolderId holder) {
  auto idx = index::make_indexer(index::IndexKind::kReference);
  Normalizer n;
  BatchDecoder d;
  DecodedBatch decoded;
  for (const WireBatch& b : batches) {
    std::string bytes;
    encode_batch(b, WireFormat::kVllmArray, &bytes);
    EXPECT_TRUE(d.decode(bytes, &decoded));
    NormalizedBatch nb;
    n.normalize(decoded, &nb);
    (*idx)->apply(holder, nb.events);
  }
  std::vector<index::Membership> out;
  EXPECT_TRUE((*idx)->holder_memberships(holder, out).ok());
  return out;
}

IngestOptions test_options() {
  IngestOptions o;
  o.lanes = 2;
  o.subscription.replay_timeout = 500ms;
  o.subscription.heartbeat = 200ms;
  return o;
}

class IntakeTest : public ::testing::Test {
 protected:
  void start(IngestOptions o = test_options(), index::Indexer* index = nullptr) {
    index_ = index::make_synchronized(*index::make_indexer(index::IndexKind::kReference));
    ingest_ = std::make_unique<EventIngest>(index ? *index : *index_, registry_, Clock::real(), o);
  }

  SubscriptionSpec spec(const TestPublisher& pub, HolderKey key = {WorkerId(1), 0},
                        HolderId holder = HolderId(7), std::string worker = "w1") {
    SubscriptionSpec s;
    s.key = key;
    s.holder = holder;
    s.worker_name = std::move(worker);
    s.endpoint = pub.endpoint();
    s.replay_endpoint = pub.replay_endpoint();
    s.topic = "kv-events";
    return s;
  }

  HolderState state(HolderKey key = {WorkerId(1), 0}) { return ingest_->state(key).value(); }

  // The publisher's subscriber is there and the replay every subscription asks for at its start
  // is over, so a test's batches meet a settled cursor.
  bool subscribed(TestPublisher& pub, HolderKey key = {WorkerId(1), 0}) {
    return pub.wait_subscriber() && wait_until([&] {
             const HolderState st = state(key);
             return st.cursor.replays >= 1 && !st.awaiting_replay;
           });
  }

  // The holder admitted `seq` and the lane applied everything admitted.
  bool settle(uint64_t seq, HolderKey key = {WorkerId(1), 0}) {
    return wait_until([&] {
      const HolderState st = state(key);
      return st.last_seq == seq && !st.awaiting_replay &&
             st.applied_batches >= st.cursor.applied + st.cursor.replayed;
    });
  }

  std::vector<index::Membership> content(HolderId holder = HolderId(7)) {
    std::vector<index::Membership> out;
    EXPECT_TRUE(index_->holder_memberships(holder, out).ok());
    return out;
  }

  bool metric(const std::string& line) {
    return metrics::text_exposition(registry_).find(line) != std::string::npos;
  }

  metrics::Registry registry_;
  std::unique_ptr<index::Indexer> index_;
  std::unique_ptr<EventIngest> ingest_;
};

// A publisher that stores and never removes: the holder keeps the newest blocks its engine's
// pool (times the margin) can hold, and no more, at any time.
TEST_F(IntakeTest, AHolderNeverHoldsMoreThanItsEnginesPoolTimesTheMargin) {
  IngestOptions o = test_options();
  o.capacity_margin = 1.5;
  start(o);
  TestPublisher pub({});
  SubscriptionSpec s = spec(pub);
  s.kv_capacity_blocks = 40;  // limit 60 blocks: 30 batches of two
  ASSERT_TRUE(ingest_->add(s).ok());
  ASSERT_TRUE(subscribed(pub));
  std::vector<WireBatch> all;
  for (uint64_t k = 0; k < 100; ++k) {
    all.push_back(stores(k));
    pub.publish(all.back());
  }
  ASSERT_TRUE(settle(99));
  const HolderState st = state();
  EXPECT_EQ(st.block_limit, 60u);
  EXPECT_EQ(st.blocks, 60u);
  EXPECT_EQ(st.evicted_blocks, 140u);
  EXPECT_EQ(st.limit_clears, 0u);
  EXPECT_EQ(content(), truth(std::vector<WireBatch>(all.end() - 30, all.end()), HolderId(7)));
  EXPECT_TRUE(metric(R"(kvgate_events_holder_block_limit{rank="0",worker="w1"} 60)"));
  EXPECT_TRUE(metric(R"(kvgate_events_holder_blocks{rank="0",worker="w1"} 60)"));
  EXPECT_TRUE(metric(R"(kvgate_events_limit_evicted_blocks_total{rank="0",worker="w1"} 140)"));
  EXPECT_TRUE(metric(R"(kvgate_events_limit_episodes_total{rank="0",worker="w1"} 1)"));
}

// An engine with an offload tier holds more than its device pool, and does not say how much
// more: once it stores a block off the device, its limit is the one for an unknown pool.
TEST_F(IntakeTest, AHolderThatStoresOffTheDeviceGetsTheLimitOfAnUnknownPool) {
  IngestOptions o = test_options();
  o.capacity_margin = 1.5;
  o.default_holder_blocks = 1000;
  start(o);
  TestPublisher pub({});
  SubscriptionSpec s = spec(pub);
  s.kv_capacity_blocks = 40;  // limit 60 blocks on the device alone
  ASSERT_TRUE(ingest_->add(s).ok());
  ASSERT_TRUE(subscribed(pub));
  for (uint64_t k = 0; k < 100; ++k) {
    WireBatch b = stores(k);
    if (k % 2 == 1) std::get<BlockStored>(b.events[0]).medium = "CPU";
    pub.publish(b);
  }
  ASSERT_TRUE(settle(99));
  const HolderState st = state();
  EXPECT_EQ(st.block_limit, 1000u);
  EXPECT_EQ(st.blocks, 200u);
  EXPECT_EQ(st.evicted_blocks, 0u);
  EXPECT_EQ(st.tiers, index::tier_bit(index::Tier::kDevice) | index::tier_bit(index::Tier::kHost));
  EXPECT_TRUE(metric(R"(kvgate_events_holder_block_limit{rank="0",worker="w1"} 1000)"));
}

TEST_F(IntakeTest, AnEngineThatDoesNotSayItsPoolGetsTheDefaultLimit) {
  IngestOptions o = test_options();
  o.default_holder_blocks = 20;
  start(o);
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(subscribed(pub));
  for (uint64_t k = 0; k < 30; ++k) pub.publish(stores(k));
  ASSERT_TRUE(settle(29));
  EXPECT_EQ(state().block_limit, 20u);
  EXPECT_EQ(state().blocks, 20u);
  EXPECT_EQ(content().size(), 20u);
}

// The engine's hashes agreed with the configured scheme, then stop (someone else on its port):
// the holder is emptied and nothing it sends is indexed until its hashes agree again.
TEST_F(IntakeTest, AHolderWhoseHashesStopAgreeingIsNotIndexedUntilTheyAgreeAgain) {
  IngestOptions o = test_options();
  o.subscription.bounds.quarantine = {.max_mismatch_ratio = 0.5, .window_blocks = 8};
  start(o);
  TestPublisher pub({});
  SubscriptionSpec s = spec(pub);
  s.hash_check.scheme = HashScheme::kVllmSha256Cbor;
  ASSERT_TRUE(ingest_->add(s).ok());
  ASSERT_TRUE(subscribed(pub));
  uint64_t k = 0;
  for (; k < 4; ++k) pub.publish(vllm_stores(k));  // 8 checked blocks that match
  ASSERT_TRUE(settle(k - 1));
  ASSERT_EQ(content().size(), 8u);
  // Made-up hashes: one mismatch per batch (the rest of its chain cannot be judged).
  for (; !state().quarantined && k < 40; ++k) {
    pub.publish(stores(k));
    ASSERT_TRUE(settle(k));
  }
  ASSERT_TRUE(state().quarantined);
  EXPECT_TRUE(state().degraded);
  EXPECT_TRUE(content().empty());
  for (int i = 0; i < 3; ++i, ++k) pub.publish(stores(k));
  ASSERT_TRUE(settle(k - 1));
  EXPECT_TRUE(content().empty()) << "nothing is indexed while quarantined";
  EXPECT_GE(state().quarantined_batches, 3u);
  EXPECT_TRUE(metric(R"(kvgate_events_hash_quarantined{rank="0",worker="w1"} 1)"));
  // Hashes that agree again.
  for (; state().quarantined && k < 80; ++k) {
    pub.publish(vllm_stores(k));
    ASSERT_TRUE(settle(k));
  }
  ASSERT_FALSE(state().quarantined);
  EXPECT_TRUE(state().degraded) << "what was skipped is missing: a subset of the engine's cache";
  std::vector<WireBatch> after;
  for (int i = 0; i < 3; ++i, ++k) {
    after.push_back(vllm_stores(k));
    pub.publish(after.back());
  }
  ASSERT_TRUE(settle(k - 1));
  const std::vector<index::Membership> now = content();
  for (const index::Membership& m : truth(after, HolderId(7)))
    EXPECT_NE(std::find(now.begin(), now.end(), m), now.end());
  EXPECT_FALSE(metric(R"(kvgate_events_hash_quarantined{)"))
      << "the series exists only while the holder is quarantined";
  EXPECT_TRUE(metric(R"(kvgate_events_hash_quarantines_total{rank="0",worker="w1"} 1)"));
}

// Sequence numbers that jump and go back without end: the engine is asked for a replay at most
// ten times a second, and less as it goes on.
TEST_F(IntakeTest, SequenceChaosAsksForNoMoreThanTenReplaysASecond) {
  start();
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(subscribed(pub));
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (uint64_t k = 0; pub.replay_requests() < 6 && std::chrono::steady_clock::now() < deadline;
       ++k) {
    const uint64_t next = pub.next_seq();
    pub.set_next_seq(k % 2 == 0 ? next + 50 : next - std::min<uint64_t>(next, 30));
    pub.publish(stores(k));
    std::this_thread::sleep_for(1ms);  // a steady stream, not a burst
  }
  const auto times = pub.replay_request_times();
  ASSERT_GE(times.size(), 6u);
  for (const auto& from : times) {
    const auto in_a_second = std::count_if(
        times.begin(), times.end(), [&](const auto& t) { return t >= from && t < from + 1s; });
    EXPECT_LE(in_a_second, 10);
  }
  // Backing off: the last spacing is wider than the first.
  EXPECT_GT(times.back() - times[times.size() - 2], times[2] - times[1]);
  EXPECT_GT(state().replays_deferred, 0u);
}

// One publisher floods; the other's batch is applied while the flood is still being read.
TEST_F(IntakeTest, OneFloodingPublisherDoesNotHoldTheOthersBack) {
  IngestOptions o = test_options();
  o.event_threads = 1;
  start(o);
  TestPublisher::Options flood_options;
  flood_options.sndhwm = 0;  // the whole flood queued, none dropped at the publisher
  TestPublisher flood(flood_options);
  TestPublisher calm({});
  const HolderKey flood_key{WorkerId(1), 0}, calm_key{WorkerId(2), 0};
  ASSERT_TRUE(ingest_->add(spec(flood, flood_key, HolderId(7), "w1")).ok());
  ASSERT_TRUE(ingest_->add(spec(calm, calm_key, HolderId(8), "w2")).ok());
  ASSERT_TRUE(subscribed(flood, flood_key));
  ASSERT_TRUE(subscribed(calm, calm_key));
  std::string payload;
  encode_batch(stores(1), WireFormat::kVllmArray, &payload);
  constexpr uint64_t kFlood = 20'000;
  for (uint64_t k = 0; k < kFlood; ++k) flood.publish_raw(payload);  // valid, repeated content
  calm.publish(stores(2));
  ASSERT_TRUE(wait_until([&] { return state(calm_key).applied_batches == 1; }, 30s));
  EXPECT_LT(state(flood_key).last_seq.value_or(0), kFlood - 1)
      << "the calm publisher's batch waited for the whole flood";
  ASSERT_TRUE(wait_until([&] { return state(flood_key).last_seq == kFlood - 1; }, 60s));
  EXPECT_GT(state(flood_key).turns_capped, 0u);
  EXPECT_EQ(state(calm_key).turns_capped, 0u);
}

// A message over the size limit drops the connection before it is read: the decoder never sees
// it, ZMQ reconnects, and the stream goes on (the gap it leaves resyncs: its replay holds the
// same message).
TEST_F(IntakeTest, AMessageOverTheSizeLimitIsNeverRead) {
  IngestOptions o = test_options();
  o.subscription.bounds.max_message_bytes = 64 << 10;
  start(o);
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(subscribed(pub));
  pub.publish(stores(0));
  ASSERT_TRUE(settle(0));
  pub.publish_raw(std::string(1 << 20, '\x90'));  // 1 MiB
  ASSERT_TRUE(pub.wait_subscriber()) << "the connection was dropped and made again";
  std::vector<WireBatch> after;
  for (uint64_t k = 2; k < 6; ++k) {
    after.push_back(stores(k));
    pub.publish(after.back());
  }
  ASSERT_TRUE(settle(5));
  const HolderState st = state();
  for (uint64_t n : st.dropped_events) EXPECT_EQ(n, 0u) << "nothing reached the decoder";
  EXPECT_GE(st.cursor.gaps, 1u);
  EXPECT_GE(st.disconnects, 1u);
  EXPECT_TRUE(metric(R"(kvgate_events_disconnects_total{rank="0",worker="w1"} )"));
  EXPECT_EQ(content(), truth(after, HolderId(7)));
}

// While the lane is behind, live messages wait in ZMQ instead of in the subscription's backlog;
// none is lost.
TEST_F(IntakeTest, LiveReadsPauseWhileTheLaneIsBehind) {
  auto truth_index = index::make_synchronized(*index::make_indexer(index::IndexKind::kReference));
  GatedIndexer gated(*truth_index);
  IngestOptions o = test_options();
  o.lanes = 1;
  o.lane_queue_batches = 1;
  o.subscription.bounds.pause_backlog = 4;
  start(o, &gated);
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(subscribed(pub));
  gated.hold(true);
  std::vector<WireBatch> all = {stores(0)};
  pub.publish(all.back());
  ASSERT_TRUE(wait_until([&] { return gated.waiting(); }));
  for (uint64_t k = 1; k < 50; ++k) {
    all.push_back(stores(k));
    pub.publish(all.back());
  }
  ASSERT_TRUE(wait_until([&] { return state().backlog >= 4; }));
  EXPECT_EQ(state().backlog, 4u);
  EXPECT_LE(state().last_seq.value_or(0), 6u) << "read past the pause";
  gated.hold(false);
  ASSERT_TRUE(settle(49));
  const HolderState st = state();
  EXPECT_EQ(st.cursor.gaps, 0u);
  EXPECT_FALSE(st.degraded);
  std::vector<index::Membership> now;
  ASSERT_TRUE(truth_index->holder_memberships(HolderId(7), now).ok());
  EXPECT_EQ(now, truth(all, HolderId(7)));
}

// Each subscription holds three or four ZMQ sockets (with its SUB socket's monitor): a fleet of
// hundreds of holders must not meet libzmq's default limit of 1,023 sockets a context.
TEST_F(IntakeTest, HundredsOfHoldersShareOneContext) {
  start();
  constexpr uint32_t kHolders = 400;
  for (uint32_t i = 0; i < kHolders; ++i) {
    SubscriptionSpec s;
    s.key = HolderKey{WorkerId(100 + i), 0};
    s.holder = HolderId(100 + i);
    s.worker_name = "w" + std::to_string(100 + i);
    s.endpoint = "tcp://127.0.0.1:1";  // refused: ZMQ keeps trying in the background
    ASSERT_TRUE(ingest_->add(s).ok()) << "holder " << i;
  }
  for (uint32_t i = 0; i < kHolders; ++i)
    EXPECT_TRUE(ingest_->remove(HolderKey{WorkerId(100 + i), 0}));
}

TEST(ApplyLag, TimestampsOutsideTheWindowSayNothing) {
  EXPECT_EQ(apply_lag_seconds(100.0, 101.5, 60s), 1.5);
  EXPECT_EQ(apply_lag_seconds(100.0, 99.0, 60s), 0.0) << "a clock a little ahead: no lag";
  EXPECT_FALSE(apply_lag_seconds(100.0, 161.0, 60s).has_value());
  EXPECT_FALSE(apply_lag_seconds(200.0, 100.0, 60s).has_value());
  EXPECT_FALSE(apply_lag_seconds(1e300, 100.0, 60s).has_value());
}

// One publisher's bogus timestamps are left out of the fleet's lag histogram and of the worker's
// recent lag.
TEST_F(IntakeTest, BogusTimestampsAreLeftOutOfTheLagPerWorker) {
  IngestOptions o = test_options();
  o.lag_window = 60s;
  start(o);
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(subscribed(pub));
  pub.publish(stores(0, wall_now() + 3600));  // an hour ahead
  pub.publish(stores(1, 1.0));                // 1970
  pub.publish(stores(2));
  ASSERT_TRUE(settle(2));
  EXPECT_TRUE(metric(R"(kvgate_events_lag_ignored_total{worker="w1"} 2)"));
  EXPECT_TRUE(metric("\nkvgate_events_apply_lag_seconds_count 1\n"));
  const std::string text = metrics::text_exposition(registry_);
  const std::string recent = R"(kvgate_events_apply_lag_recent_seconds{worker="w1"} )";
  const size_t at = text.find(recent);
  ASSERT_NE(at, std::string::npos) << text;
  const double lag = std::stod(text.substr(at + recent.size()));
  EXPECT_GE(lag, 0.0);
  EXPECT_LT(lag, 60.0) << "neither the hour ahead nor 1970 moved it";
}

}  // namespace
}  // namespace kvgate::events
