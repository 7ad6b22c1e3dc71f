#include "kvgate/relay/engine_feed.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "events/test_publisher.h"
#include "kvgate/events/decode.h"
#include "kvgate/events/encode.h"
#include "kvgate/events/normalize.h"
#include "relay/test_subscriber.h"
#include "support/wait.h"

namespace kvgate::relay {
namespace {

using events::testing::TestPublisher;
using namespace std::chrono_literals;
using testing::content;
using testing::kHolder;
using testing::TestSubscriber;

using kvgate::testing::wait_until;

// Batch k of an engine's life: a 2-block sequence continuing the one before every other batch,
// and now and then the eviction of an earlier block.
events::WireBatch content_of(uint64_t k) {
  events::WireBatch b;
  events::BlockStored s;
  s.block_hashes = {5000 + 2 * k, 5001 + 2 * k};
  if (k % 2 == 1) s.parent = 5001 + 2 * (k - 1);
  s.token_ids = {static_cast<TokenId>(4 * k), static_cast<TokenId>(4 * k + 1),
                 static_cast<TokenId>(4 * k + 2), static_cast<TokenId>(4 * k + 3)};
  s.block_size = 2;
  b.events.push_back(s);
  if (k >= 4 && k % 4 == 0) {
    events::BlockRemoved r;
    r.block_hashes = {5000 + 2 * (k - 4)};
    b.events.push_back(r);
  }
  return b;
}

// What an index fed these batches directly, each once and in order, holds.
std::vector<index::Membership> truth(const std::vector<events::WireBatch>& batches) {
  auto idx = testing::reference();
  events::Normalizer n;
  events::BatchDecoder d;
  events::DecodedBatch decoded;
  for (const events::WireBatch& b : batches) {
    std::string bytes;
    events::encode_batch(b, events::WireFormat::kVllmArray, &bytes);
    EXPECT_TRUE(d.decode(bytes, &decoded));
    events::NormalizedBatch nb;
    n.normalize(decoded, &nb);
    idx->apply(kHolder, nb.events);
  }
  return content(*idx);
}

class EngineFeedTest : public ::testing::Test {
 protected:
  EngineFeedTest() {
    FeedOptions o;
    // Long enough for a replay on a loaded machine: one that timed out would resync the rank
    // (a new epoch), which these tests do not expect.
    o.subscription.replay_timeout = 5s;
    o.subscription.heartbeat = 200ms;
    o.poll_interval = 10ms;
    feed_ = std::make_unique<EngineFeed>(table_, o);
  }
  Status add(const TestPublisher& pub) {
    return feed_->add({.name = "engine-a", .engine_url = "http://127.0.0.1:1", .block_size = 2},
                      {{.rank = 0,
                        .publisher = pub.endpoint(),
                        .replay = pub.replay_endpoint(),
                        .topic = "kv-events"}});
  }
  // Reads what the rank has for `f` until it has applied `seq`.
  bool follow_until(TestSubscriber& f, uint64_t seq) {
    return wait_until([&] {
      f.drain(*table_.find("engine-a", 0));
      return f.last_seq == seq;
    });
  }

  StreamTable table_{HistoryLimits{}};
  std::unique_ptr<EngineFeed> feed_;
};

TEST_F(EngineFeedTest, BatchesLostOnTheWayToTheRelayAreRefilledThereSubscribersSeeNoGap) {
  TestPublisher pub({.window = 1000});
  ASSERT_TRUE(add(pub).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  // The subscription's start-up replay (of everything retained) is asked for first. The engine
  // may serve it before or among the batches below; what it misses is asked for again.
  ASSERT_TRUE(wait_until([&] {
    const auto st = feed_->stats();
    return !st.empty() && st[0].cursor.replays >= 1;
  }));
  std::vector<events::WireBatch> sent;
  for (uint64_t k = 0; k < 40; ++k) {
    sent.push_back(content_of(k));
    pub.publish(sent.back(), /*deliver=*/k % 7 != 3);  // every seventh lost on the wire
  }
  TestSubscriber f;
  ASSERT_TRUE(follow_until(f, 39));
  EXPECT_EQ(f.batches, 40u);
  EXPECT_TRUE(f.reasons.empty()) << "no snapshot: the relay's history has every batch";
  EXPECT_EQ(content(*f.idx), truth(sent));
  std::vector<FeedRankStats> st;
  ASSERT_TRUE(wait_until([&] {  // the stats are published every 100 ms
    st = feed_->stats();
    return st.size() == 1 && st[0].batches == 40;
  }));
  EXPECT_GE(st[0].cursor.gaps, 1u) << "the relay saw the losses";
  EXPECT_GE(st[0].cursor.replayed, 5u) << "and refilled them from the engine's replay";
  EXPECT_FALSE(st[0].degraded);
  v1::ListWorkersResponse list;
  table_.list(&list);
  ASSERT_TRUE(wait_until([&] {
    list.Clear();
    table_.list(&list);
    return list.workers(0).state() == "live";
  }));
  EXPECT_EQ(list.workers(0).ranks(0).last_seq(), 39u);
}

TEST_F(EngineFeedTest, AnEngineRestartStartsANewEpochSubscribersFollowItsState) {
  TestPublisher pub({.window = 1000});
  ASSERT_TRUE(add(pub).ok());
  ASSERT_TRUE(pub.wait_subscriber());
  for (uint64_t k = 0; k < 10; ++k) pub.publish(content_of(k));
  TestSubscriber f;
  ASSERT_TRUE(follow_until(f, 9));
  const uint64_t first_epoch = f.cursor.epoch;

  pub.restart();  // the engine process restarts: nothing held, numbering from 0 again
  std::vector<events::WireBatch> after;
  for (uint64_t k = 100; k < 106; ++k) {
    after.push_back(content_of(k));
    pub.publish(after.back());
  }
  ASSERT_TRUE(follow_until(f, 5));
  EXPECT_NE(f.cursor.epoch, first_epoch);
  EXPECT_EQ(f.reasons, std::vector{v1::OutOfRange::REASON_OTHER_EPOCH});
  EXPECT_EQ(content(*f.idx), truth(after));
  v1::ListWorkersResponse list;
  table_.list(&list);
  EXPECT_FALSE(list.workers(0).ranks(0).degraded()) << "a restart is not a loss";
  EXPECT_TRUE(wait_until([&] {
    const auto st = feed_->stats();
    return !st.empty() && st[0].cursor.restarts >= 1;
  }));
}

TEST_F(EngineFeedTest, AWorkerIsServedOnceAndNeedsAnEndpoint) {
  TestPublisher pub({});
  ASSERT_TRUE(add(pub).ok());
  EXPECT_EQ(add(pub).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(feed_->add({.name = "engine-b"}, {}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvgate::relay
