#include "kvgate/relay/rank_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "harness/corpus_generator.h"
#include "kvgate/index/indexer.h"
#include "relay/test_subscriber.h"

namespace kvgate::relay {
namespace {

using Cursor = RankStream::Cursor;
using testing::content;
using testing::kHolder;
using testing::reference;
using testing::TestSubscriber;

// The exactness corpus for one holder, as a rank's admitted batches: `direct` gets them as the
// engine sent them.
struct Feed {
  index::harness::CorpusGenerator gen;
  index::harness::Step step;
  std::unique_ptr<index::Indexer> direct = reference();
  uint64_t seq = 100;  // an engine the relay joined late numbers from wherever it is

  explicit Feed(uint64_t seed) : gen({.seed = seed, .holders = 1, .holder_capacity = 256}) {}
  void one(RankStream& s) {
    do {
      gen.next(step);
    } while (step.kind != index::harness::Step::Kind::kBatch);
    direct->apply(kHolder, step.events);
    s.append({.seq = seq++, .events = step.events});
  }
};

TEST(RankStream, AFreshSubscriberReadsACompleteHistoryThenWaitsForTheNextBatch) {
  RankStream s({});
  Feed feed(1);
  for (int i = 0; i < 30; ++i) feed.one(s);
  TestSubscriber f;
  f.drain(s, 7);
  EXPECT_EQ(f.batches, 30u);
  EXPECT_TRUE(f.reasons.empty()) << "the whole epoch is there: no snapshot";
  EXPECT_EQ(content(*f.idx), content(*feed.direct));

  const uint64_t seen = s.version();
  EXPECT_TRUE(s.next(f.cursor, 10).empty());
  int woken = 0;
  EXPECT_TRUE(s.notify_once(seen, [&] { ++woken; }).has_value());
  EXPECT_EQ(woken, 0);
  feed.one(s);
  EXPECT_EQ(woken, 1);
  feed.one(s);
  EXPECT_EQ(woken, 1) << "once";
  f.drain(s);
  EXPECT_EQ(f.batches, 32u);
  EXPECT_EQ(content(*f.idx), content(*feed.direct));
  // A wake asked for after a batch it has not read is refused: read first.
  EXPECT_FALSE(s.notify_once(seen, [&] { ++woken; }).has_value());
  EXPECT_EQ(woken, 1);
  const auto token = s.notify_once(s.version(), [&] { ++woken; });
  ASSERT_TRUE(token.has_value());
  s.cancel(*token);
  feed.one(s);
  EXPECT_EQ(woken, 1) << "cancelled";
}

TEST(RankStream, AHeartbeatNeverOvertakesABatchTheSubscriberHasNotRead) {
  // The writer appends, then wakes its waiting subscribers; a heartbeat built in between named a
  // seq the subscriber had not been sent, and the subscriber took it for a lost batch.
  RankStream s({});
  Feed feed(2);
  TestSubscriber f;
  f.drain(s);
  ASSERT_NE(s.heartbeat(f.cursor), nullptr) << "an empty epoch: nothing to overtake";
  feed.one(s);
  EXPECT_EQ(s.heartbeat(f.cursor), nullptr) << "the epoch's first batch is unread";
  f.drain(s);
  RankStream::Message h = s.heartbeat(f.cursor);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->heartbeat().last_seq(), 100u);
  feed.one(s);
  feed.one(s);
  EXPECT_EQ(s.heartbeat(f.cursor), nullptr) << "two batches unread";
  f.drain(s);
  h = s.heartbeat(f.cursor);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->heartbeat().last_seq(), 102u);
  s.restart(false);
  EXPECT_EQ(s.heartbeat(f.cursor), nullptr) << "another epoch: the subscriber reads that first";
  f.drain(s);
  EXPECT_NE(s.heartbeat(f.cursor), nullptr);
}

TEST(RankStream, PastTheHistoryASubscriberGetsOutOfRangeASnapshotAndTheTail) {
  RankStream s({.max_batches = 8});
  Feed feed(2);
  for (int i = 0; i < 50; ++i) feed.one(s);

  TestSubscriber fresh;  // the history no longer starts at the epoch's first batch
  fresh.drain(s);
  ASSERT_EQ(fresh.reasons, std::vector{v1::OutOfRange::REASON_FRESH});
  EXPECT_EQ(fresh.batches, 0u);
  EXPECT_EQ(content(*fresh.idx), content(*feed.direct)) << "the snapshot is the state";

  TestSubscriber old;  // resumes the right epoch from a trimmed seq
  old.cursor = fresh.cursor;
  old.cursor.next_seq = 110;
  old.cursor.served = false;
  old.drain(s);
  EXPECT_EQ(old.reasons, std::vector{v1::OutOfRange::REASON_BEFORE_HISTORY});

  TestSubscriber other;  // an epoch the stream is not in
  other.cursor = {.epoch = fresh.cursor.epoch + 1, .next_seq = 149};
  other.drain(s);
  EXPECT_EQ(other.reasons, std::vector{v1::OutOfRange::REASON_OTHER_EPOCH});

  TestSubscriber ahead;
  ahead.cursor = {.epoch = fresh.cursor.epoch, .next_seq = 999};
  ahead.drain(s);
  EXPECT_EQ(ahead.reasons, std::vector{v1::OutOfRange::REASON_AHEAD});

  TestSubscriber within;  // inside the history: just the batches
  within.cursor = {.epoch = fresh.cursor.epoch, .next_seq = 146};
  auto got = s.next(within.cursor, 100);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got.front()->batch().seq(), 146u);
  EXPECT_EQ(got.back()->batch().seq(), 149u);

  // Every follower goes on with the live batches (fewer than the history keeps) and holds what
  // the engine's stream made.
  for (int i = 0; i < 6; ++i) feed.one(s);
  for (TestSubscriber* f : {&fresh, &old, &other, &ahead}) {
    f->drain(s, 3);
    EXPECT_EQ(content(*f->idx), content(*feed.direct));
    EXPECT_EQ(f->batches, 6u);
    EXPECT_EQ(f->snapshots, 1u);
  }
}

TEST(RankStream, ASlowSubscriberFallsBehindToASnapshotAndNeverHoldsTheHistory) {
  RankStream s({.max_batches = 5});
  Feed feed(3);
  TestSubscriber slow;
  for (int i = 0; i < 3; ++i) feed.one(s);
  slow.consume(s.next(slow.cursor, 2));
  EXPECT_EQ(slow.batches, 2u);
  for (int i = 0; i < 40; ++i) feed.one(s);
  v1::RankInfo info;
  s.describe(&info);
  EXPECT_EQ(info.history_batches(), 5u) << "bounded whatever the subscriber does";
  slow.drain(s);
  EXPECT_EQ(slow.reasons, std::vector{v1::OutOfRange::REASON_FELL_BEHIND});
  EXPECT_EQ(content(*slow.idx), content(*feed.direct));
}

TEST(RankStream, HistoryBytesAreBoundedToo) {
  RankStream s({.max_batches = 1'000'000, .max_bytes = 4096});
  Feed feed(4);
  for (int i = 0; i < 300; ++i) feed.one(s);
  v1::RankInfo info;
  s.describe(&info);
  EXPECT_LE(info.history_bytes(), 4096u);
  EXPECT_GT(info.history_batches(), 1u);
  EXPECT_LT(info.history_batches(), 300u);
}

TEST(RankStream, ANewEpochMovesEverySubscriberToItsState) {
  RankStream s({});
  Feed feed(5);
  for (int i = 0; i < 10; ++i) feed.one(s);
  TestSubscriber f;
  f.drain(s);
  const uint64_t first_epoch = f.cursor.epoch;
  // The engine restarted: it holds nothing, its numbering starts over.
  const index::Event cleared{.kind = index::EventKind::kCleared};
  feed.direct->remove_holder(kHolder);
  s.append({.seq = 0, .new_epoch = true, .events = std::span(&cleared, 1)});
  feed.seq = 1;
  for (int i = 0; i < 5; ++i) feed.one(s);
  f.drain(s);
  EXPECT_EQ(f.reasons, std::vector{v1::OutOfRange::REASON_OTHER_EPOCH});
  EXPECT_NE(f.cursor.epoch, first_epoch);
  EXPECT_EQ(content(*f.idx), content(*feed.direct));
  v1::RankInfo info;
  s.describe(&info);
  EXPECT_FALSE(info.degraded());

  // A seq that skips one without the cursor saying so cannot be continued: a degraded epoch.
  feed.seq += 3;
  feed.one(s);
  s.describe(&info);
  EXPECT_TRUE(info.degraded());
}

TEST(RankStream, OneSnapshotServesEverySubscriberAtTheSamePlace) {
  RankStream s({.max_batches = 4});
  Feed feed(6);
  for (int i = 0; i < 20; ++i) feed.one(s);
  Cursor a, b;
  const auto first = s.next(a, 10);
  const auto second = s.next(b, 10);
  ASSERT_GE(first.size(), 2u);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(first[1].get(), second[1].get()) << "the same chunk, built once";
  feed.one(s);
  Cursor c;
  const auto third = s.next(c, 10);
  EXPECT_NE(third[1].get(), first[1].get()) << "a batch later, a new snapshot";
}

// A writer appending the corpus while readers follow it at their own pace, resuming now and then
// as a new stream would, and falling behind the history (one of them held back once, the others
// as scheduling has it): every reader ends holding what the engine's stream made. (Run under
// ThreadSanitizer by the tsan preset.)
TEST(RankStream, ReadersRacingTheWriterEndExact) {
  RankStream s({.max_batches = 64, .snapshot_chunk_blocks = 50});
  Feed feed(7);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> newest{0};  // the writer's last seq
  constexpr int kReaders = 4;
  std::vector<std::unique_ptr<TestSubscriber>> followers;
  for (int i = 0; i < kReaders; ++i) followers.push_back(std::make_unique<TestSubscriber>());
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      TestSubscriber& f = *followers[r];
      std::mt19937 rng(r);
      bool held_back = false;
      while (!done.load(std::memory_order_acquire)) {
        if (r == 0 && !held_back && f.last_seq && *f.last_seq >= 400) {
          // Left behind until the history (64 batches) has moved well past it: a snapshot next.
          held_back = true;
          while (newest.load() < *f.last_seq + 200 && !done.load()) std::this_thread::yield();
        }
        f.consume(s.next(f.cursor, 1 + rng() % 16));
        if (rng() % 200 == 0) {  // the link dropped: resume as a new stream from the last batch
          f.cursor = {.epoch = f.cursor.epoch, .next_seq = f.last_seq ? *f.last_seq + 1 : 0};
        }
        if (rng() % 4 == static_cast<unsigned>(r)) std::this_thread::yield();
      }
    });
  }
  for (int i = 0; i < 3000; ++i) {
    feed.one(s);
    newest.store(feed.seq - 1);
  }
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  for (auto& f : followers) {
    f->drain(s);
    EXPECT_EQ(content(*f->idx), content(*feed.direct));
  }
  EXPECT_GT(followers[0]->snapshots, 0u) << "the reader held back was moved to a snapshot";
}

}  // namespace
}  // namespace kvgate::relay
