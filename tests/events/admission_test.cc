#include "kvgate/events/admission.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace kvgate::events {
namespace {

using Cursor = AdmissionCursor<uint64_t>;
using Kind = Cursor::Action::Kind;

// Renders actions compactly: "A3" apply 3, "R3" replayed 3, "C" restart clear, "C:reason",
// "Q5" replay requested from 5, "X" replay cancelled.
std::string render(const Cursor::Actions& actions) {
  std::string s;
  for (const auto& a : actions) {
    if (!s.empty()) s += ' ';
    switch (a.kind) {
      case Kind::kApply:
        s += (a.replayed ? "R" : "A") + std::to_string(a.seq);
        EXPECT_EQ(a.payload, a.seq * 10);  // the payload travels with its seq
        break;
      case Kind::kClear:
        s += a.reason ? "C:" + std::string(resync_reason_name(*a.reason)) : "C";
        break;
      case Kind::kRequestReplay:
        s += "Q" + std::to_string(a.seq);
        break;
      case Kind::kCancelReplay:
        s += "X";
        break;
    }
  }
  return s;
}

struct Harness {
  Cursor cursor;
  explicit Harness(Cursor::Options o = {}) : cursor(o) {}
  std::string live(uint64_t s) {
    Cursor::Actions out;
    cursor.on_live(s, s * 10, &out);
    return render(out);
  }
  std::string replay(uint64_t s) {
    Cursor::Actions out;
    cursor.on_replay(s, s * 10, &out);
    return render(out);
  }
  std::string end() {
    Cursor::Actions out;
    cursor.on_replay_end(&out);
    return render(out);
  }
  std::string fail() {
    Cursor::Actions out;
    cursor.on_replay_failed(ResyncReason::kReplayTimeout, &out);
    return render(out);
  }
  std::string start() {
    Cursor::Actions out;
    cursor.on_start(&out);
    return render(out);
  }
};

Cursor::Options no_replay() {
  Cursor::Options o;
  o.replay = false;
  return o;
}

TEST(Admission, InOrderApplies) {
  Harness h;
  EXPECT_EQ(h.live(0), "A0");
  EXPECT_EQ(h.live(1), "A1");
  EXPECT_EQ(h.live(2), "A2");
  EXPECT_EQ(h.cursor.cursor(), 2u);
  EXPECT_EQ(h.cursor.stats().applied, 3u);
  EXPECT_FALSE(h.cursor.degraded());
}

// A subscriber that comes up on a running engine asks for everything retained at once.
TEST(Admission, StartAsksForEverythingRetainedAndHoldsLiveBatchesMeanwhile) {
  Harness h;
  EXPECT_EQ(h.start(), "Q0");
  EXPECT_EQ(h.live(3), "");  // held until the replay ends
  EXPECT_EQ(h.replay(0), "R0");
  EXPECT_EQ(h.replay(1), "R1");
  EXPECT_EQ(h.replay(2), "R2");
  EXPECT_EQ(h.end(), "A3");
  EXPECT_EQ(h.live(4), "A4");
  EXPECT_FALSE(h.cursor.degraded());
  EXPECT_EQ(h.cursor.stats().replays, 1u);
}

TEST(Admission, StartOnAnIdleEngineGetsAnEmptyReplay) {
  Harness h;
  EXPECT_EQ(h.start(), "Q0");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(0), "A0");
  EXPECT_FALSE(h.cursor.degraded());
}

TEST(Admission, StartReplayThatFailsBeforeAnythingArrivedLosesNothing) {
  // The engine is not up yet: nothing is known, nothing is lost, no resync.
  Harness h;
  EXPECT_EQ(h.start(), "Q0");
  EXPECT_EQ(h.fail(), "");
  EXPECT_FALSE(h.cursor.degraded());
  EXPECT_EQ(h.live(0), "A0");  // the engine starts publishing from its seq 0
  EXPECT_FALSE(h.cursor.degraded());
  // A later engine that comes up mid-stream is a gap as usual.
  Harness late;
  late.start();
  late.fail();
  EXPECT_EQ(late.live(5), "Q0");
}

TEST(Admission, StartReplayThatFailsTreatsWhatArrivedMeanwhileAsLive) {
  Harness h;
  EXPECT_EQ(h.start(), "Q0");
  EXPECT_EQ(h.live(0), "");
  EXPECT_EQ(h.live(1), "");
  EXPECT_EQ(h.fail(), "A0 A1");  // complete from seq 0: nothing lost
  EXPECT_FALSE(h.cursor.degraded());
  // Batches from mid-stream: a gap, asked for again (held while that replay runs).
  Harness mid;
  mid.start();
  mid.live(7);
  mid.live(8);
  EXPECT_EQ(mid.fail(), "Q0");
  EXPECT_EQ(mid.cursor.buffered(), 2u);
  EXPECT_EQ(mid.fail(), "C:replay_timeout A7 A8");  // a real failure this time
  EXPECT_TRUE(mid.cursor.degraded());
}

TEST(Admission, StartBeyondTheReplayWindowRebuildsFromTheOldestRetainedBatch) {
  // The engine retains only 40.. of its history: the holder is rebuilt from 40 and marked
  // degraded (partial: a subset of the engine's cache), then follows the live stream.
  Harness h;
  EXPECT_EQ(h.start(), "Q0");
  EXPECT_EQ(h.replay(40), "C:replay_window R40");
  EXPECT_EQ(h.replay(41), "R41");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(42), "A42");
  EXPECT_TRUE(h.cursor.degraded());
  h.cursor.on_engine_cleared();  // exact again once the engine empties its cache
  EXPECT_FALSE(h.cursor.degraded());
}

TEST(Admission, GapIsReplayedBeforeNewerBatches) {
  Harness h;
  h.live(0);
  h.live(1);
  EXPECT_EQ(h.live(4), "Q2");  // 2 and 3 lost: ask from 2, hold 4
  EXPECT_TRUE(h.cursor.awaiting_replay());
  EXPECT_EQ(h.live(5), "");  // held
  EXPECT_EQ(h.cursor.buffered(), 2u);
  EXPECT_EQ(h.replay(2), "R2");
  EXPECT_EQ(h.replay(3), "R3");
  EXPECT_EQ(h.replay(4), "R4");  // the replay also carries what we hold
  EXPECT_EQ(h.end(), "A5");      // 4 is a duplicate now; 5 follows
  EXPECT_EQ(h.live(6), "A6");
  EXPECT_EQ(h.cursor.stats().gaps, 1u);
  EXPECT_EQ(h.cursor.stats().replays, 1u);
  EXPECT_EQ(h.cursor.stats().replayed, 3u);
  EXPECT_EQ(h.cursor.stats().duplicates, 1u);
  EXPECT_FALSE(h.cursor.degraded());
}

// Live batches still in flight when the replay ended are duplicates of what it delivered, not a
// publisher restart (taking them for one would clear a holder that was whole).
TEST(Admission, LiveBatchesTheReplayDeliveredAreDuplicates) {
  Harness h;
  h.live(0);
  EXPECT_EQ(h.live(3), "Q1");
  for (uint64_t s = 1; s <= 5; ++s) EXPECT_EQ(h.replay(s), "R" + std::to_string(s));
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(4), "");  // delivered by the replay
  EXPECT_EQ(h.live(5), "");
  EXPECT_EQ(h.live(6), "A6");
  EXPECT_EQ(h.cursor.stats().restarts, 0u);
  EXPECT_EQ(h.cursor.stats().duplicates, 3u);
  // Now going back is a restart.
  EXPECT_EQ(h.live(0), "C A0");
  EXPECT_EQ(h.cursor.stats().restarts, 1u);
}

TEST(Admission, LiveSeqGoingBackIsARestartEvenInsideAReplayedRange) {
  Harness h;
  for (uint64_t s = 0; s <= 5; ++s) h.live(s);
  EXPECT_EQ(h.live(8), "Q6");
  for (uint64_t s = 6; s <= 10; ++s) h.replay(s);
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(9), "");  // newer than live 8, delivered by the replay: duplicate
  EXPECT_EQ(h.live(10), "");
  EXPECT_EQ(h.live(11), "A11");
  // 7 after live 11 cannot come from the same process, though the replay covered 7.
  EXPECT_EQ(h.live(7), "C Q0");
  EXPECT_EQ(h.cursor.stats().restarts, 1u);
}

TEST(Admission, RestartFromZeroClearsAndApplies) {
  Harness h;
  h.live(0);
  h.live(1);
  h.live(2);
  EXPECT_EQ(h.live(0), "C A0");
  EXPECT_EQ(h.live(1), "A1");
  EXPECT_FALSE(h.cursor.degraded());
  EXPECT_EQ(h.cursor.stats().restarts, 1u);
}

TEST(Admission, RestartSeenMidStreamReplaysTheNewPublisherFromZero) {
  Harness h;
  for (uint64_t s = 0; s <= 9; ++s) h.live(s);
  EXPECT_EQ(h.live(2), "C Q0");  // new publisher, its 0 and 1 missed
  EXPECT_EQ(h.replay(0), "R0");
  EXPECT_EQ(h.replay(1), "R1");
  EXPECT_EQ(h.replay(2), "R2");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(3), "A3");
  EXPECT_FALSE(h.cursor.degraded());
}

TEST(Admission, RestartWhileAwaitingReplayCancelsItAndDropsTheOldBuffer) {
  Harness h;
  h.live(0);
  h.live(1);
  EXPECT_EQ(h.live(5), "Q2");
  EXPECT_EQ(h.live(6), "");
  EXPECT_EQ(h.live(0), "X C A0");
  EXPECT_FALSE(h.cursor.awaiting_replay());
  EXPECT_EQ(h.cursor.buffered(), 0u);
  EXPECT_EQ(h.replay(2), "");  // the cancelled replay's late answer
  EXPECT_EQ(h.cursor.stats().stray_replays, 1u);
  EXPECT_EQ(h.live(1), "A1");
}

TEST(Admission, FirstBatchAfterZeroAsksTheReplayFromZero) {
  Harness h;
  EXPECT_EQ(h.live(7), "Q0");
  EXPECT_EQ(h.replay(0), "R0");
  for (uint64_t s = 1; s <= 7; ++s) EXPECT_EQ(h.replay(s), "R" + std::to_string(s));
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(8), "A8");
  EXPECT_FALSE(h.cursor.degraded());
}

TEST(Admission, ReplayWindowThatMovedOnResyncs) {
  Harness h;
  EXPECT_EQ(h.live(0), "A0");
  EXPECT_EQ(h.live(50), "Q1");
  // The engine kept only the last batches: the replay starts at 40.
  EXPECT_EQ(h.replay(40), "C:replay_window R40");
  EXPECT_TRUE(h.cursor.degraded());
  for (uint64_t s = 41; s <= 50; ++s) h.replay(s);
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(51), "A51");
  EXPECT_EQ(h.cursor.stats().resyncs[static_cast<size_t>(ResyncReason::kReplayWindow)], 1u);
  h.cursor.on_engine_cleared();
  EXPECT_FALSE(h.cursor.degraded());
}

TEST(Admission, InitialReplayStartingLateIsDegraded) {
  Harness h;
  EXPECT_EQ(h.live(20000), "Q0");
  EXPECT_EQ(h.replay(10001), "C:replay_window R10001");
  EXPECT_TRUE(h.cursor.degraded());
}

TEST(Admission, ReplayTimeoutResyncsFromTheBuffer) {
  Harness h;
  h.live(0);
  EXPECT_EQ(h.live(3), "Q1");
  h.live(4);
  h.live(6);  // another loss while waiting
  EXPECT_EQ(h.fail(), "C:replay_timeout A3 A4 C:replay_timeout A6");
  EXPECT_TRUE(h.cursor.degraded());
  EXPECT_FALSE(h.cursor.awaiting_replay());
  EXPECT_EQ(h.live(7), "A7");
  EXPECT_EQ(h.cursor.stats().resyncs[static_cast<size_t>(ResyncReason::kReplayTimeout)], 2u);
  EXPECT_EQ(h.replay(1), "");  // too late
}

TEST(Admission, ReplayEndingShortOfTheBufferResyncs) {
  Harness h;
  h.live(0);
  EXPECT_EQ(h.live(5), "Q1");
  EXPECT_EQ(h.replay(1), "R1");
  EXPECT_EQ(h.replay(2), "R2");
  EXPECT_EQ(h.end(), "C:replay_incomplete A5");
  EXPECT_TRUE(h.cursor.degraded());
}

TEST(Admission, BatchLostAfterTheStartReplayReadItsBufferIsAskedForAgain) {
  // The engine read its buffer for the start's replay when it held batch 0; batch 2, published
  // after that read, was lost on the wire. Nothing live was seen when the replay was asked for,
  // so the replay could not have had it: asked again, not a resync.
  Harness h;
  EXPECT_EQ(h.start(), "Q0");
  h.live(0);
  h.live(1);
  h.live(3);
  EXPECT_EQ(h.replay(0), "R0");
  EXPECT_EQ(h.end(), "A1 Q2");
  EXPECT_EQ(h.cursor.buffered(), 1u);
  EXPECT_EQ(h.replay(2), "R2");
  EXPECT_EQ(h.replay(3), "R3");
  EXPECT_EQ(h.end(), "");  // the held 3 is a duplicate now
  EXPECT_EQ(h.live(4), "A4");
  EXPECT_FALSE(h.cursor.degraded());
  EXPECT_EQ(h.cursor.stats().replays, 2u);
  for (uint64_t n : h.cursor.stats().resyncs) EXPECT_EQ(n, 0u);
}

TEST(Admission, BatchLostAfterAGapReplayReadItsBufferIsAskedForAgainOnce) {
  Harness h;
  h.live(0);
  EXPECT_EQ(h.live(2), "Q1");  // newest live seq at the request: 2
  h.live(3);
  h.live(5);  // 4 lost on the wire, after the engine read its buffer (it held up to 3)
  EXPECT_EQ(h.replay(1), "R1");
  EXPECT_EQ(h.replay(2), "R2");
  EXPECT_EQ(h.replay(3), "R3");
  EXPECT_EQ(h.end(), "Q4");  // 4 is newer than every live seq seen at the request
  EXPECT_EQ(h.replay(4), "R4");
  EXPECT_EQ(h.replay(5), "R5");
  EXPECT_EQ(h.end(), "");
  EXPECT_FALSE(h.cursor.degraded());

  // 3 and 4 missing after the first replay: asked again. The second replay does not have 3
  // either, yet 5 was seen before it was asked for, so 3 was in the engine's buffer by then:
  // the replay ended short.
  Harness g;
  g.live(0);
  g.live(2);
  g.live(5);  // held
  g.replay(1);
  g.replay(2);
  EXPECT_EQ(g.end(), "Q3");
  EXPECT_EQ(g.end(), "C:replay_incomplete A5");
  EXPECT_TRUE(g.cursor.degraded());
}

TEST(Admission, ReplayHoleResyncs) {
  Harness h;
  h.live(0);
  EXPECT_EQ(h.live(4), "Q1");
  EXPECT_EQ(h.replay(1), "R1");
  EXPECT_EQ(h.replay(3), "C:replay_window R3");
  EXPECT_EQ(h.replay(4), "R4");
  EXPECT_EQ(h.end(), "");
}

TEST(Admission, WithoutReplaySocketGapsResync) {
  Harness h(no_replay());
  EXPECT_EQ(h.live(0), "A0");
  EXPECT_EQ(h.live(3), "C:no_replay_endpoint A3");
  EXPECT_TRUE(h.cursor.degraded());
  EXPECT_EQ(h.live(4), "A4");
  EXPECT_EQ(h.live(0), "C A0");  // restart: exact again
  EXPECT_FALSE(h.cursor.degraded());
  Harness j(no_replay());
  EXPECT_EQ(j.live(9), "C:no_replay_endpoint A9");  // joined mid-stream
  EXPECT_TRUE(j.cursor.degraded());
}

TEST(Admission, BufferOverflowGivesUpTheReplay) {
  Cursor::Options o;
  o.max_buffered = 2;
  Harness h(o);
  h.live(0);
  EXPECT_EQ(h.live(2), "Q1");
  EXPECT_EQ(h.live(3), "");
  EXPECT_EQ(h.live(4), "X C:buffer_overflow A2 A3 A4");
  EXPECT_FALSE(h.cursor.awaiting_replay());
  EXPECT_EQ(h.replay(1), "");
  EXPECT_EQ(h.live(5), "A5");
}

TEST(Admission, LostDownstreamClearsBeforeTheNextBatch) {
  Harness h;
  h.live(0);
  h.live(1);
  h.cursor.on_lost_downstream();
  EXPECT_EQ(h.live(2), "C:lost_downstream A2");
  EXPECT_EQ(h.live(3), "A3");
  EXPECT_TRUE(h.cursor.degraded());
}

TEST(Admission, DuplicateOfTheLastBatchWithoutReplayIsARestart) {
  // ZMQ never redelivers a live message, so a repeated seq outside a replay window can only come
  // from a new publisher process.
  Harness h;
  h.live(0);
  h.live(1);
  EXPECT_EQ(h.live(1), "C Q0");
}

// ---- Model-based: a lossy, restarting publisher with a bounded replay buffer ------------------

struct Published {
  uint64_t incarnation;
  uint64_t seq;
};

TEST(Admission, ModelLossyPublisherStaysExactUnlessDegraded) {
  CursorStats total;
  uint64_t exact_checks = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    const bool replay_socket = seed % 5 != 0;
    const size_t window = 5 + rng() % 40;
    const double loss = (rng() % 4) * 0.08;
    AdmissionCursor<Published>::Options o;
    o.replay = replay_socket;
    o.max_buffered = 2 + rng() % 30;
    AdmissionCursor<Published> cursor(o);

    uint64_t inc = 0, next = 0;
    std::deque<Published> replay_buffer;
    std::vector<Published> holder;  // what the index holds, in apply order since the last clear
    bool holder_started_clean = true;
    std::optional<uint64_t> pending_from;  // replay requested, not served yet
    int serve_in = 0;
    uint64_t restarts = 0, losses = 0;
    bool any_delivered = false;

    auto run = [&](AdmissionCursor<Published>::Actions& actions) {
      for (auto& a : actions) {
        switch (a.kind) {
          case AdmissionCursor<Published>::Action::Kind::kApply:
            ASSERT_EQ(a.payload.seq, a.seq);
            ASSERT_EQ(a.payload.incarnation, inc) << "a batch of an old publisher applied";
            if (!holder.empty()) {
              ASSERT_GT(a.seq, holder.back().seq) << "applied out of order or twice";
            }
            holder.push_back(a.payload);
            break;
          case AdmissionCursor<Published>::Action::Kind::kClear:
            holder.clear();
            holder_started_clean = !a.reason.has_value();
            break;
          case AdmissionCursor<Published>::Action::Kind::kRequestReplay:
            ASSERT_TRUE(replay_socket);
            pending_from = a.seq;
            serve_in = static_cast<int>(rng() % 6);
            break;
          case AdmissionCursor<Published>::Action::Kind::kCancelReplay:
            pending_from.reset();
            break;
        }
      }
      actions.clear();
    };
    auto check_exact = [&]() {
      if (cursor.degraded() || cursor.awaiting_replay() || !cursor.cursor()) return;
      ++exact_checks;
      // Not degraded: the holder has every batch of this publisher, 0..cursor, none twice.
      ASSERT_TRUE(holder_started_clean);
      ASSERT_EQ(holder.size(), *cursor.cursor() + 1);
      for (size_t i = 0; i < holder.size(); ++i) ASSERT_EQ(holder[i].seq, i);
    };

    AdmissionCursor<Published>::Actions actions;
    for (int step = 0; step < 400; ++step) {
      if (rng() % 100 == 0) {  // publisher restart
        ++inc;
        next = 0;
        replay_buffer.clear();
        if (any_delivered) ++restarts;  // a cursor that saw nothing has nothing to detect
      }
      const Published b{inc, next++};
      replay_buffer.push_back(b);
      if (replay_buffer.size() > window) replay_buffer.pop_front();
      // A restart is visible only through a live seq going back: the new process's first batch
      // is delivered (a lost one would read as a gap, which no seq rule can tell apart).
      const bool restart_marker = b.seq == 0 && inc > 0;
      if (!restart_marker && std::uniform_real_distribution<double>(0, 1)(rng) < loss) {
        ++losses;
      } else {
        any_delivered = true;
        cursor.on_live(b.seq, b, &actions);
        run(actions);
      }
      if (pending_from && serve_in-- <= 0) {
        const uint64_t from = *pending_from;
        pending_from.reset();
        if (rng() % 10 == 0) {
          cursor.on_replay_failed(ResyncReason::kReplayTimeout, &actions);
        } else {
          // Now and then the replay ends early (its ROUTER dropped replies at its high-water mark).
          const bool short_reply = rng() % 10 == 0;
          if (short_reply) ++losses;
          size_t sent = 0;
          for (const Published& r : replay_buffer) {
            if (r.seq < from) continue;
            if (short_reply && sent++ >= 1) break;
            cursor.on_replay(r.seq, r, &actions);
            run(actions);
          }
          cursor.on_replay_end(&actions);
        }
        run(actions);
      }
      if (rng() % 97 == 0) {
        cursor.on_lost_downstream();
        ++losses;
      }
      check_exact();
      if (::testing::Test::HasFatalFailure()) return;
    }
    if (losses == 0 && restarts == 0) {
      for (uint64_t n : cursor.stats().resyncs) EXPECT_EQ(n, 0u) << "resync without a loss";
    }
    EXPECT_EQ(cursor.stats().restarts, restarts) << "every visible restart detected";
    total.replayed += cursor.stats().replayed;
    total.restarts += cursor.stats().restarts;
    total.duplicates += cursor.stats().duplicates;
    for (size_t r = 0; r < kResyncReasonCount; ++r) total.resyncs[r] += cursor.stats().resyncs[r];
  }
  // The model reached every path it is meant to check.
  EXPECT_GT(exact_checks, 10000u);
  EXPECT_GT(total.replayed, 1000u);
  EXPECT_GT(total.restarts, 100u);
  EXPECT_GT(total.duplicates, 100u);
  for (size_t r = 0; r < kResyncReasonCount; ++r) {
    EXPECT_GT(total.resyncs[r], 0u) << resync_reason_name(static_cast<ResyncReason>(r));
  }
}

}  // namespace
}  // namespace kvgate::events
