// StreamGuard on an injected timeline: events, not bytes, move its idle clock; its total
// deadline and size bound hold whatever the worker sends.
#include "app/stream_guard.h"

#include <gtest/gtest.h>

namespace kvgate::app {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kEvent = "data: {\"t\":1}\n\n";

TEST(StreamGuard, OnlyEventsMoveTheIdleClock) {
  const MonoTime t0{};
  StreamGuard g(t0, t0, 100s, 1s, 1 << 20);
  EXPECT_FALSE(g.add("data: tok", t0 + 500ms));
  EXPECT_EQ(g.check(t0 + 900ms), StreamEnd::kNone);
  EXPECT_EQ(g.next_wait(t0 + 900ms), 100ms);
  EXPECT_FALSE(g.add("en", t0 + 999ms));
  EXPECT_EQ(g.check(t0 + 1s), StreamEnd::kSilent) << "bytes that end no event are no progress";
  EXPECT_TRUE(g.add("\n\n", t0 + 1s));
  EXPECT_EQ(g.check(t0 + 1900ms), StreamEnd::kNone);
  EXPECT_EQ(g.check(t0 + 2s), StreamEnd::kSilent);
}

TEST(StreamGuard, TheTotalDeadlineHoldsWhileEventsFlow) {
  const MonoTime t0{};
  StreamGuard g(t0, t0 + 2s, 3s, 1s, 1 << 20);
  for (std::chrono::milliseconds t = 2s; t < 3s; t += 100ms) {
    EXPECT_TRUE(g.add(kEvent, t0 + t));
    EXPECT_EQ(g.check(t0 + t), StreamEnd::kNone);
  }
  EXPECT_EQ(g.next_wait(t0 + 2950ms), 50ms) << "the deadline comes before the idle bound";
  EXPECT_EQ(g.check(t0 + 3s), StreamEnd::kDeadline);
  EXPECT_EQ(g.next_wait(t0 + 4s), 1ms) << "never zero, which a reader takes as its default";
}

TEST(StreamGuard, TheSizeBoundCountsEveryByte) {
  const MonoTime t0{};
  StreamGuard g(t0, t0, 100s, 100s, 3 * kEvent.size());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(g.add(kEvent, t0));
  EXPECT_EQ(g.check(t0), StreamEnd::kNone);
  g.add("x", t0);
  EXPECT_EQ(g.check(t0), StreamEnd::kTooLarge);
  EXPECT_EQ(g.bytes(), 3 * kEvent.size() + 1);
}

}  // namespace
}  // namespace kvgate::app
