// Loopback integration: a real ZMQ publisher (test_publisher.h) and EventIngest feeding a
// reference index. Every wait polls with a deadline; nothing sleeps a guessed time.
#include "kvgate/events/ingest.h"

#include <gtest/gtest.h>

#include <thread>

#include "gated_indexer.h"
#include "kvgate/events/decode.h"
#include "kvgate/events/normalize.h"
#include "support/sanitizer.h"
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

// Batch k of an engine's life: a fresh 2-block sequence, and every third batch removes a block
// stored two batches earlier.
WireBatch content(uint64_t k, uint64_t salt = 0) {
  WireBatch b;
  b.ts = to_unix_seconds(Clock::real().wall());
  BlockStored s;
  s.block_hashes = {1000 + salt * 100000 + 2 * k, 1001 + salt * 100000 + 2 * k};
  s.token_ids = {static_cast<TokenId>(4 * k + salt * 7), static_cast<TokenId>(4 * k + 1),
                 static_cast<TokenId>(4 * k + 2), static_cast<TokenId>(4 * k + 3)};
  s.block_size = 2;
  b.events.push_back(s);
  if (k >= 2 && k % 3 == 0) {
    BlockRemoved r;
    r.block_hashes = {1000 + salt * 100000 + 2 * (k - 2)};
    b.events.push_back(r);
  }
  b.dp_rank = 0;
  return b;
}

// What the holder holds after these batches apply in order, each exactly once.
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

class IngestTest : public ::testing::Test {
 protected:
  explicit IngestTest(index::IndexKind kind = index::IndexKind::kReference)
      : index_(index::make_synchronized(*index::make_indexer(kind))),
        ingest_(std::make_unique<EventIngest>(*index_, registry_, Clock::real(), options())) {}

  static IngestOptions options() {
    IngestOptions o;
    o.lanes = 2;
    o.subscription.replay_timeout = 500ms;
    o.subscription.heartbeat = 200ms;
    return o;
  }

  SubscriptionSpec spec(const TestPublisher& pub, bool replay = true) {
    SubscriptionSpec s;
    s.key = key_;
    s.holder = holder_;
    s.worker_name = "w1";
    s.endpoint = pub.endpoint();
    if (replay) s.replay_endpoint = pub.replay_endpoint();
    s.topic = "kv-events";
    return s;
  }

  HolderState state() { return ingest_->state(key_).value(); }

  // Waits for the publisher's subscriber and for the replay every subscription asks for when it
  // starts (of everything the engine retains), so a test's batches meet a settled cursor.
  bool subscribed(TestPublisher& pub) {
    return pub.wait_subscriber() && wait_until([&] {
             const HolderState st = state();
             return st.cursor.replays >= 1 && !st.awaiting_replay;
           });
  }

  // Waits until the holder admitted `seq` and the lane applied everything admitted.
  bool settle(uint64_t seq) {
    return wait_until([&] {
      const HolderState st = state();
      return st.last_seq == seq && !st.awaiting_replay &&
             st.applied_batches >= st.cursor.applied + st.cursor.replayed;
    });
  }

  std::vector<index::Membership> content_now() {
    std::vector<index::Membership> out;
    EXPECT_TRUE(index_->holder_memberships(holder_, out).ok());
    return out;
  }

  std::string metrics_text() { return metrics::text_exposition(registry_); }

  metrics::Registry registry_;
  std::unique_ptr<index::Indexer> index_;
  std::unique_ptr<EventIngest> ingest_;
  const HolderKey key_{WorkerId(1), 0};
  const HolderId holder_{7};
};

TEST_F(IngestTest, DroppedBatchesAreRecoveredThroughReplay) {
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(subscribed(pub));
  std::vector<WireBatch> all;
  for (uint64_t k = 0; k < 30; ++k) {
    all.push_back(content(k));
    const bool lost = k >= 10 && k < 15;  // five batches lost on the wire
    pub.publish(all.back(), !lost);
  }
  ASSERT_TRUE(settle(29));
  const HolderState st = state();
  EXPECT_EQ(st.cursor.gaps, 1u);
  EXPECT_EQ(st.cursor.replays, 2u);  // the start's, and the gap's
  EXPECT_GE(st.cursor.replayed, 5u);
  EXPECT_FALSE(st.degraded);
  for (uint64_t n : st.cursor.resyncs) EXPECT_EQ(n, 0u);
  EXPECT_EQ(content_now(), truth(all, holder_));
  EXPECT_FALSE(content_now().empty());
  const std::string text = metrics_text();
  EXPECT_NE(text.find("kvgate_events_gaps_total{rank=\"0\",worker=\"w1\"} 1"), std::string::npos);
}

class IngestChainTest : public IngestTest {
 protected:
  IngestChainTest() : IngestTest(index::IndexKind::kChain) {}
};

// The engine's KV pool given with the subscription reaches the index on the holder's lane, in
// order with its batches: the chain index holds the holder's record map sized for the pool
// (16-byte records at 4/5 load), and the batches still apply exactly.
TEST_F(IngestChainTest, AnnouncedKvPoolSizesTheHolderOnItsLane) {
  const uint64_t before = index_->stats().bytes;
  TestPublisher pub({});
  SubscriptionSpec s = spec(pub);
  s.kv_capacity_blocks = 50'000;
  ASSERT_TRUE(ingest_->add(s).ok());
  ASSERT_TRUE(wait_until([&] { return index_->stats().bytes >= before + 50'000 * 20; }))
      << index_->stats().bytes - before;
  ASSERT_TRUE(pub.wait_subscriber());
  std::vector<WireBatch> all;
  for (uint64_t k = 0; k < 12; ++k) {
    all.push_back(content(k));
    pub.publish(all.back());
  }
  ASSERT_TRUE(settle(11));
  EXPECT_EQ(content_now(), truth(all, holder_));
}

TEST_F(IngestTest, PublisherRestartIsDetectedAndStaleStateDropped) {
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  for (uint64_t k = 0; k < 12; ++k) pub.publish(content(k));
  ASSERT_TRUE(settle(11));
  pub.restart();
  std::vector<WireBatch> after;
  for (uint64_t k = 0; k < 8; ++k) {
    after.push_back(content(k, /*salt=*/1));
    pub.publish(after.back());
  }
  ASSERT_TRUE(wait_until([&] { return state().cursor.restarts == 1; }));
  ASSERT_TRUE(settle(7));
  EXPECT_FALSE(state().degraded);
  EXPECT_EQ(content_now(), truth(after, holder_));  // nothing of the old process is left
}

TEST_F(IngestTest, GapBeyondTheReplayWindowResyncs) {
  TestPublisher::Options o;
  o.window = 5;
  o.topic_in_replay = false;  // the older reply shape
  TestPublisher pub(o);
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  // The replay a subscription asks for at its start is over before replays are held: held, it
  // would time out under a loaded machine and the gap below would meet a different cursor.
  ASSERT_TRUE(subscribed(pub));
  std::vector<WireBatch> all;
  pub.hold_replays(true);  // served once everything is published: the window is then 35..39
  for (uint64_t k = 0; k < 40; ++k) {
    all.push_back(content(k));
    pub.publish(all.back(), !(k >= 10 && k < 30));  // 20 lost, the engine keeps only 5
  }
  ASSERT_TRUE(wait_until([&] { return state().awaiting_replay; }))
      << "last seq " << state().last_seq.value_or(999) << " gaps " << state().cursor.gaps
      << " resyncs " << state().cursor.resyncs[1] << " window " << state().cursor.resyncs[2]
      << " replays " << state().cursor.replays << " replayed " << state().cursor.replayed << " dup "
      << state().cursor.duplicates << " reqs " << pub.replay_requests();
  pub.hold_replays(false);
  ASSERT_TRUE(settle(39));
  const HolderState st = state();
  EXPECT_EQ(st.cursor.resyncs[static_cast<size_t>(ResyncReason::kReplayWindow)], 1u);
  EXPECT_TRUE(st.degraded);
  // Rebuilt from what followed: the replay's first batch (35) onwards; the index holds exactly
  // what those batches stored.
  const uint64_t first = 40 - 5;
  std::vector<WireBatch> kept(all.begin() + first, all.end());
  EXPECT_EQ(content_now(), truth(kept, holder_));
  const std::string text = metrics_text();
  EXPECT_NE(text.find("kvgate_events_degraded_ranks 1"), std::string::npos);
  EXPECT_NE(text.find("kvgate_events_resyncs_total{rank=\"0\",reason=\"replay_window\",worker="
                      "\"w1\"} 1"),
            std::string::npos);
  // A reason that never happened has no series (made at its first count).
  EXPECT_EQ(text.find("reason=\"buffer_overflow\""), std::string::npos) << text;
  EXPECT_EQ(text.find("kvgate_events_dropped_events_total{"), std::string::npos) << text;
}

TEST_F(IngestTest, GapWithoutReplaySocketResyncs) {
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub, /*replay=*/false)).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  std::vector<WireBatch> all;
  for (uint64_t k = 0; k < 20; ++k) {
    all.push_back(content(k));
    pub.publish(all.back(), k != 9);
  }
  ASSERT_TRUE(settle(19));
  EXPECT_EQ(state().cursor.resyncs[static_cast<size_t>(ResyncReason::kNoReplayEndpoint)], 1u);
  std::vector<WireBatch> kept(all.begin() + 10, all.end());
  EXPECT_EQ(content_now(), truth(kept, holder_));
  EXPECT_EQ(pub.replay_requests(), 0);
}

// A degraded holder is exact again once the engine empties its cache: the AllBlocksCleared event,
// applied in order through the lane, ends the degraded state (and its gauge).
TEST_F(IngestTest, AnEngineClearEndsTheDegradedState) {
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub, /*replay=*/false)).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  pub.publish(content(0));
  pub.publish(content(1), false);  // lost on the wire, and no replay socket: degraded
  pub.publish(content(2));
  ASSERT_TRUE(settle(2));
  ASSERT_TRUE(state().degraded);
  EXPECT_NE(metrics_text().find("kvgate_events_degraded_ranks 1"), std::string::npos);
  WireBatch cleared;
  cleared.ts = to_unix_seconds(Clock::real().wall());
  cleared.events.push_back(AllBlocksCleared{});
  pub.publish(cleared);
  WireBatch after = content(4);
  pub.publish(after);
  ASSERT_TRUE(settle(4));
  EXPECT_FALSE(state().degraded);
  EXPECT_EQ(content_now(), truth({after}, holder_));
  EXPECT_NE(metrics_text().find("kvgate_events_degraded_ranks 0"), std::string::npos);
}

TEST_F(IngestTest, BadInputCostsOnlyItself) {
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  std::vector<WireBatch> good;
  good.push_back(content(0));
  pub.publish(good.back());
  pub.publish_raw("\xc1 not msgpack");  // a whole payload lost: still a seq
  // A batch with an unreadable event between two good ones.
  WireBatch mixed = content(2);
  BlockStored bad;
  bad.block_hashes = {1, 2};
  bad.token_ids = {1, 2, 3};  // not 2 blocks of 2
  bad.block_size = 2;
  mixed.events.insert(mixed.events.begin(), bad);
  pub.publish(mixed);
  good.push_back(content(2));
  good.push_back(content(3));
  pub.publish(good.back());
  ASSERT_TRUE(settle(3));
  const HolderState st = state();
  EXPECT_EQ(st.dropped_events[static_cast<size_t>(DropReason::kMalformed)] +
                st.dropped_events[static_cast<size_t>(DropReason::kNotABatch)],
            1u);
  EXPECT_EQ(st.dropped_events[static_cast<size_t>(DropReason::kTokenCountMismatch)], 1u);
  EXPECT_EQ(st.cursor.gaps, 0u);
  EXPECT_EQ(content_now(), truth(good, holder_));
}

// The engine process goes away and a new one binds the same ports: ZMQ reconnects (with
// backoff), the seq going back reads as a restart, and the old process's blocks are dropped.
TEST_F(IngestTest, EngineGoneAndBackOnTheSamePortsReconnects) {
  std::string endpoint, replay_endpoint;
  {
    TestPublisher first({});
    endpoint = first.endpoint();
    replay_endpoint = first.replay_endpoint();
    ASSERT_TRUE(ingest_->add(spec(first)).ok());
    ASSERT_TRUE(first.wait_subscriber());
    for (uint64_t k = 0; k < 6; ++k) first.publish(content(k));
    ASSERT_TRUE(settle(5));
  }
  TestPublisher::Options o;
  o.endpoint = endpoint;
  o.replay_endpoint = replay_endpoint;
  TestPublisher second(o);
  ASSERT_TRUE(second.wait_subscriber());
  std::vector<WireBatch> after;
  for (uint64_t k = 0; k < 4; ++k) {
    after.push_back(content(k, /*salt=*/2));
    second.publish(after.back());
  }
  ASSERT_TRUE(wait_until([&] { return state().cursor.restarts == 1; }));
  ASSERT_TRUE(settle(3));
  EXPECT_EQ(content_now(), truth(after, holder_));
}

TEST_F(IngestTest, RemovalLeavesNothingBehind) {
  TestPublisher pub({});
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  EXPECT_FALSE(ingest_->add(spec(pub)).ok());  // already subscribed
  ASSERT_TRUE(pub.wait_subscriber());
  for (uint64_t k = 0; k < 10; ++k) pub.publish(content(k));
  ASSERT_TRUE(settle(9));
  ASSERT_FALSE(content_now().empty());
  EXPECT_NE(metrics_text().find("worker=\"w1\""), std::string::npos);
  EXPECT_TRUE(ingest_->remove(key_));
  EXPECT_TRUE(content_now().empty());
  EXPECT_FALSE(ingest_->state(key_).has_value());
  EXPECT_EQ(metrics_text().find("worker=\"w1\""), std::string::npos);
  EXPECT_FALSE(ingest_->remove(key_));
  // Re-added under the same key, it starts afresh (the old subscription is gone).
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  pub.publish(content(10));
  ASSERT_TRUE(wait_until([&] { return state().last_seq == 10u && !state().awaiting_replay; }));
}

TEST_F(IngestTest, RemoveAndStopArePromptWhileConnectingOrWaitingOnReplay) {
  // Nothing listens on the live endpoint; the replay ROUTER never answers.
  TestPublisher::Options o;
  o.serve_replay = false;
  TestPublisher silent(o);
  SubscriptionSpec nowhere = spec(silent);
  nowhere.endpoint = "tcp://127.0.0.1:1";  // refused: ZMQ keeps reconnecting with backoff
  ASSERT_TRUE(ingest_->add(nowhere).ok());
  SubscriptionSpec waiting = spec(silent);
  waiting.key = HolderKey{WorkerId(2), 0};
  waiting.holder = HolderId(8);
  waiting.worker_name = "w2";
  ASSERT_TRUE(ingest_->add(waiting).ok());
  ASSERT_TRUE(silent.wait_subscriber());
  silent.publish(content(0), false);
  silent.publish(content(1));  // a gap from 0: asks the replay, which never answers
  ASSERT_TRUE(wait_until([&] { return ingest_->state(waiting.key)->awaiting_replay; }));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(ingest_->remove(key_));
  EXPECT_TRUE(ingest_->remove(waiting.key));
  ingest_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s * testing_support::kSlowdown);
}

TEST_F(IngestTest, ReplayTimeoutResyncs) {
  TestPublisher::Options o;
  o.serve_replay = false;
  TestPublisher pub(o);
  ASSERT_TRUE(ingest_->add(spec(pub)).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  pub.publish(content(0));
  pub.publish(content(1), false);
  pub.publish(content(2));
  ASSERT_TRUE(wait_until([&] {
    return state().cursor.resyncs[static_cast<size_t>(ResyncReason::kReplayTimeout)] == 1;
  }));
  ASSERT_TRUE(settle(2));
  EXPECT_TRUE(state().degraded);
  EXPECT_EQ(content_now(), truth({content(2)}, holder_));
}

// A full lane queue holds batches back, in order: a slow lane delays a holder, it never costs a
// batch (a replay of thousands of batches arrives far faster than it applies).
TEST(IngestLane, FullQueueHoldsBatchesBackAndLosesNone) {
  auto truth_index = index::make_synchronized(*index::make_indexer(index::IndexKind::kReference));
  GatedIndexer gated(*truth_index);
  metrics::Registry registry;
  IngestOptions o;
  o.lanes = 1;
  o.lane_queue_batches = 1;
  EventIngest ingest(gated, registry, Clock::real(), o);
  TestPublisher pub({});
  SubscriptionSpec s;
  s.key = HolderKey{WorkerId(3), 0};
  s.holder = HolderId(1);
  s.worker_name = "w3";
  s.endpoint = pub.endpoint();
  s.replay_endpoint = pub.replay_endpoint();
  s.topic = "kv-events";
  ASSERT_TRUE(ingest.add(s).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  gated.hold(true);
  pub.publish(content(0));
  ASSERT_TRUE(wait_until([&] { return gated.waiting(); }));  // the lane is stuck in batch 0
  for (uint64_t k = 1; k < 5; ++k) pub.publish(content(k));  // 1 queues, the rest wait
  ASSERT_TRUE(wait_until([&] { return ingest.state(s.key)->last_seq == 4u; }));
  EXPECT_EQ(ingest.state(s.key)->backlog, 3u);
  gated.hold(false);
  ASSERT_TRUE(wait_until([&] { return ingest.state(s.key)->applied_batches == 5u; }));
  const HolderState st = *ingest.state(s.key);
  EXPECT_FALSE(st.degraded);
  EXPECT_EQ(st.backlog, 0u);
  EXPECT_GE(st.backlogged, 3u);
  EXPECT_EQ(st.cursor.resyncs[static_cast<size_t>(ResyncReason::kLostDownstream)], 0u);
  std::vector<index::Membership> now;
  ASSERT_TRUE(truth_index->holder_memberships(s.holder, now).ok());
  EXPECT_EQ(now, truth({content(0), content(1), content(2), content(3), content(4)}, s.holder));
}

// Past the backlog's bound the lanes are hopelessly behind: a real loss, and the holder resyncs
// (its next batch starts with a clear).
TEST(IngestLane, BacklogOverflowResyncsTheHolder) {
  auto truth_index = index::make_synchronized(*index::make_indexer(index::IndexKind::kReference));
  GatedIndexer gated(*truth_index);
  metrics::Registry registry;
  IngestOptions o;
  o.lanes = 1;
  o.lane_queue_batches = 1;
  o.subscription.max_backlog = 2;
  EventIngest ingest(gated, registry, Clock::real(), o);
  TestPublisher pub({});
  SubscriptionSpec s;
  s.key = HolderKey{WorkerId(3), 0};
  s.holder = HolderId(1);
  s.worker_name = "w3";
  s.endpoint = pub.endpoint();
  s.replay_endpoint = pub.replay_endpoint();
  s.topic = "kv-events";
  ASSERT_TRUE(ingest.add(s).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  gated.hold(true);
  pub.publish(content(0));
  ASSERT_TRUE(wait_until([&] { return gated.waiting(); }));
  for (uint64_t k = 1; k < 5; ++k) pub.publish(content(k));  // 1 queues, 2 wait, 4 overflows
  ASSERT_TRUE(wait_until([&] { return ingest.state(s.key)->last_seq == 4u; }));
  gated.hold(false);
  pub.publish(content(5));
  ASSERT_TRUE(wait_until([&] {
    const HolderState st = *ingest.state(s.key);
    return st.last_seq == 5u && st.backlog == 0 && st.degraded;
  }));
  const HolderState st = *ingest.state(s.key);
  EXPECT_GE(st.cursor.resyncs[static_cast<size_t>(ResyncReason::kLostDownstream)], 1u);
  ASSERT_TRUE(wait_until([&] {
    std::vector<index::Membership> now;
    return truth_index->holder_memberships(s.holder, now).ok() &&
           now == truth({content(5)}, s.holder);  // cleared, then rebuilt from batch 5
  }));
}

TEST_F(IngestTest, MisconfiguredWorkerShowsAMismatchRatio) {
  TestPublisher pub({});
  SubscriptionSpec s = spec(pub);
  s.hash_check.scheme = HashScheme::kVllmSha256Cbor;  // the content's hashes are made up
  ASSERT_TRUE(ingest_->add(s).ok());
  ASSERT_TRUE(pub.wait_subscriber());  // batches may meet the start's replay: checked once
  for (uint64_t k = 0; k < 5; ++k) pub.publish(content(k));
  ASSERT_TRUE(settle(4));
  EXPECT_EQ(state().hash.mismatched, 5u);
  EXPECT_NE(metrics_text().find("kvgate_events_hash_mismatch_ratio{worker=\"w1\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace kvgate::events
