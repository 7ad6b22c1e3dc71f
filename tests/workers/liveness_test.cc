// The liveness rules, one by one, on a clock the test moves: what wedges a worker and what does
// not, what makes it unreachable, and what ends each veto.
#include "kvgate/workers/liveness.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kvgate/workers/inflight.h"

namespace kvgate::workers {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class LivenessTest : public ::testing::Test {
 protected:
  ManualClock clock;
  LivenessTracker live{{.wedge = seconds(3), .stall = seconds(2)}, clock};

  std::optional<LivenessTransition> after(Duration d) {
    clock.advance(d);
    return live.evaluate();
  }
};

TEST_F(LivenessTest, StreamsWithoutATokenForTheWedgeTimeWedgeTheWorker) {
  live.note_stream_started();
  live.note_stream_started();
  EXPECT_FALSE(after(milliseconds(2900)));
  const auto t = after(milliseconds(200));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->from, Liveness::kLive);
  EXPECT_EQ(t->to, Liveness::kWedged);
  EXPECT_EQ(t->reason, LivenessReason::kNoProgress);
  EXPECT_TRUE(live.vetoed());
}

TEST_F(LivenessTest, ALongPromptsExpectedPrefillIsNotTakenForAWedge) {
  // 40,000 uncached tokens at the assumed 4,000 per second: 10 s before a first token is due.
  live.note_stream_started(40'000);
  EXPECT_FALSE(after(seconds(12)));
  EXPECT_EQ(live.state(), Liveness::kLive);
  // Silent for the wedge time after the expected prefill: wedged.
  const auto t = after(milliseconds(1100));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, Liveness::kWedged);
}

TEST_F(LivenessTest, TheLongestExpectedPrefillCountsNotTheirSum) {
  // Many long prompts at once: the engine prefills them together; a sum would grow with the
  // traffic and hide a frozen busy engine.
  for (int i = 0; i < 50; ++i) live.note_stream_started(16'000);  // 4 s each
  EXPECT_FALSE(after(milliseconds(6900)));
  EXPECT_TRUE(after(milliseconds(200)));
}

TEST_F(LivenessTest, ShortPromptsStillRoutedToASilentWorkerDoNotPutOffItsWedge) {
  // A frozen engine keeps receiving requests until its veto: prompts shorter than the wedge time
  // (1,000 tokens: 0.25 s) excuse nothing.
  live.note_stream_started(1'000);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(after(milliseconds(500)));
    live.note_stream_started(1'000);
  }
  EXPECT_FALSE(after(milliseconds(400)));
  EXPECT_TRUE(after(milliseconds(200)));
}

TEST_F(LivenessTest, AnEmptiedPileExpectsNoPrefill) {
  // A long prompt cancelled at once: the next stream's silence counts from its own start.
  live.note_stream_started(400'000);
  live.note_stream_ended();
  clock.advance(seconds(1));
  live.note_stream_started();
  EXPECT_FALSE(after(milliseconds(2900)));
  EXPECT_TRUE(after(milliseconds(200)));
}

TEST_F(LivenessTest, ARateOfZeroAllowsForNoPrefill) {
  LivenessTracker strict{{.wedge = seconds(3), .prefill_tokens_per_second = 0}, clock};
  strict.note_stream_started(1'000'000);
  clock.advance(milliseconds(3100));
  EXPECT_TRUE(strict.evaluate());
}

TEST_F(LivenessTest, ProgressOnAnyStreamKeepsTheWorkerLive) {
  live.note_stream_started();
  for (int i = 0; i < 20; ++i) {
    clock.advance(seconds(1));
    live.note_progress();  // another stream's token: the engine generates
    EXPECT_FALSE(live.evaluate());
  }
  EXPECT_EQ(live.state(), Liveness::kLive);
}

TEST_F(LivenessTest, ProgressAPeerReplicaSawKeepsTheWorkerLiveAndNeverGoesBack) {
  live.note_stream_started();  // this replica's one stream waits for its first token
  for (int i = 0; i < 10; ++i) {
    clock.advance(seconds(1));
    // The engine generates for a peer's streams; the peer says so a second late.
    live.note_peer_progress(clock.now() - seconds(1));
    EXPECT_FALSE(live.evaluate());
  }
  const MonoTime seen = *live.last_progress();
  live.note_peer_progress(seen - seconds(5));  // an older report moves nothing
  EXPECT_EQ(*live.last_progress(), seen);
  // The peers fall silent too: wedged after the wedge time from the last progress anyone saw.
  EXPECT_FALSE(after(milliseconds(1900)));
  ASSERT_TRUE(after(milliseconds(200)));
  EXPECT_EQ(live.state(), Liveness::kWedged);
}

TEST_F(LivenessTest, NonStreamedRequestsNeverWedgeAWorker) {
  // Non-streamed requests do not join the pile: a worker busy with long non-streamed answers and
  // nothing else shows no progress for minutes and is still live.
  for (int i = 0; i < 60; ++i) EXPECT_FALSE(after(seconds(5)));
  EXPECT_EQ(live.pile(), 0);
}

TEST_F(LivenessTest, AnIdleWorkerIsNotWedgedByItsFirstStream) {
  // No progress for an hour (no traffic), then a stream arrives: the clock starts with the pile.
  EXPECT_FALSE(after(std::chrono::hours(1)));
  live.note_stream_started();
  EXPECT_FALSE(after(seconds(2)));
  live.note_progress();
  live.note_stream_ended();
  EXPECT_FALSE(after(seconds(10)));
}

TEST_F(LivenessTest, AWedgeEndsWithProgressNotWithThePileDraining) {
  live.note_stream_started();
  ASSERT_TRUE(after(seconds(3)));
  // The veto cuts the stuck streams short: the pile drains, the veto stays.
  live.note_stream_ended();
  EXPECT_FALSE(after(seconds(10)));
  EXPECT_EQ(live.state(), Liveness::kWedged);
  // A health probe's answer is contact, not progress: a paused engine answers /health.
  live.note_contact();
  EXPECT_FALSE(after(milliseconds(100)));
  EXPECT_EQ(live.state(), Liveness::kWedged);
  // A token (the wedge probe's, or any generation's) ends it.
  live.note_progress();
  const auto t = after(milliseconds(100));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, Liveness::kLive);
  EXPECT_EQ(t->reason, LivenessReason::kProgress);
}

TEST_F(LivenessTest, FailedConnectionsAndSilenceMakeItUnreachableUntilFirstContact) {
  live.note_contact();
  clock.advance(milliseconds(500));
  live.note_connect_failed();
  EXPECT_FALSE(after(milliseconds(1000)));  // 1.5 s of silence: not yet
  const auto t = after(milliseconds(600));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->to, Liveness::kUnreachable);
  EXPECT_EQ(t->reason, LivenessReason::kStalled);
  live.note_connect_failed();
  EXPECT_FALSE(after(seconds(5)));
  live.note_contact();
  const auto back = after(milliseconds(10));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to, Liveness::kLive);
  EXPECT_EQ(back->reason, LivenessReason::kContact);
}

TEST_F(LivenessTest, ContactAfterAFailedConnectionIsNoStall) {
  live.note_connect_failed();
  clock.advance(milliseconds(100));
  live.note_contact();  // the next attempt got through
  EXPECT_FALSE(after(seconds(10)));
}

TEST_F(LivenessTest, AWedgedWorkerThatStopsAcceptingBecomesUnreachable) {
  live.note_contact();
  live.note_stream_started();
  ASSERT_TRUE(after(seconds(3)));
  live.note_connect_failed();
  const auto t = after(seconds(2));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->from, Liveness::kWedged);
  EXPECT_EQ(t->to, Liveness::kUnreachable);
  EXPECT_EQ(t->reason, LivenessReason::kConnectFailed);
}

TEST_F(LivenessTest, ZeroDisablesEachRule) {
  LivenessTracker off{{.wedge = Duration::zero(), .stall = Duration::zero()}, clock};
  off.note_stream_started();
  off.note_connect_failed();
  clock.advance(std::chrono::hours(1));
  EXPECT_FALSE(off.evaluate());
}

// Concurrent reports and evaluations (run under ThreadSanitizer by `make tsan`).
TEST_F(LivenessTest, ReportsFromManyThreadsWhileEvaluated) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!stop) {
        live.note_stream_started();
        live.note_progress();
        live.note_contact();
        live.note_stream_ended();
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    clock.advance(milliseconds(1));
    (void)live.evaluate();
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(live.pile(), 0);
}

// --- InflightRequests ---

struct Recorder {
  std::vector<VetoKind> calls;
  static void on_veto(void* self, VetoKind k) { static_cast<Recorder*>(self)->calls.push_back(k); }
};

TEST(InflightRequestsTest, AVetoReachesEveryEntryStillListed) {
  InflightRequests list;
  Recorder a, b, c;
  InflightRequests::Entry ea{&Recorder::on_veto, &a}, eb{&Recorder::on_veto, &b},
      ec{&Recorder::on_veto, &c};
  list.add(&ea);
  list.add(&eb);
  list.add(&ec);
  list.remove(&eb);
  list.remove(&eb);  // twice: harmless
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.veto_all(VetoKind::kWedged), 2u);
  EXPECT_EQ(a.calls, std::vector<VetoKind>{VetoKind::kWedged});
  EXPECT_TRUE(b.calls.empty());
  EXPECT_EQ(c.calls, std::vector<VetoKind>{VetoKind::kWedged});
  list.remove(&ea);
  list.remove(&ec);
  EXPECT_EQ(list.veto_all(VetoKind::kUnhealthy), 0u);
}

TEST(InflightRequestsTest, EntriesComeAndGoWhileVetoesRun) {
  InflightRequests list;
  std::atomic<int> calls{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      while (!stop) {
        InflightRequests::Entry e{[](void* n, VetoKind) { ++*static_cast<std::atomic<int>*>(n); },
                                  &calls};
        list.add(&e);
        list.remove(&e);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) (void)list.veto_all(VetoKind::kUnreachable);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(list.size(), 0u);
}

}  // namespace
}  // namespace kvgate::workers
