#include "kvgate/events/replay_pacer.h"

#include <gtest/gtest.h>

namespace kvgate::events {
namespace {

using namespace std::chrono_literals;

// Sends a request whenever the pacer allows, as a publisher whose sequence breaks without end
// would have the subscription do, over `span` of time; returns the send times.
std::vector<MonoTime> chaos(ReplayPacer& p, MonoTime start, Duration span, Duration step = 1ms) {
  std::vector<MonoTime> sent;
  for (MonoTime t = start; t < start + span; t += step) {
    if (!p.ready(t)) continue;
    p.sent(t);
    sent.push_back(t);
  }
  return sent;
}

TEST(ReplayPacer, TheFirstRequestGoesAtOnce) {
  ReplayPacer p;
  const MonoTime t0 = MonoTime{} + 1h;
  EXPECT_TRUE(p.ready(t0));
  p.sent(t0);
  EXPECT_FALSE(p.ready(t0 + 99ms));
  EXPECT_TRUE(p.ready(t0 + 100ms));
  EXPECT_EQ(p.ready_at(), t0 + 100ms);
}

TEST(ReplayPacer, RequestsThatKeepComingAreNeverMoreThanTenASecondAndBackOff) {
  ReplayPacer p({.min_interval = 100ms, .max_interval = 5000ms});
  const MonoTime t0 = MonoTime{} + 1h;
  const std::vector<MonoTime> sent = chaos(p, t0, 10s);
  // Spacing doubles from 100 ms: 0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3 (then 5 s apart).
  ASSERT_EQ(sent.size(), 7u);
  for (size_t i = 1; i < sent.size(); ++i) EXPECT_GE(sent[i] - sent[i - 1], 100ms);
  EXPECT_EQ(sent[6] - sent[5], 3200ms);
  EXPECT_EQ(p.interval(), 5000ms);
  // No window of one second holds more than ten, at any phase.
  for (const MonoTime from : sent) {
    size_t in_window = 0;
    for (const MonoTime t : sent) in_window += t >= from && t < from + 1s;
    EXPECT_LE(in_window, 10u);
  }
}

TEST(ReplayPacer, AfterACalmSpellTheSpacingStartsOver) {
  ReplayPacer p({.min_interval = 100ms, .max_interval = 5000ms});
  const MonoTime t0 = MonoTime{} + 1h;
  chaos(p, t0, 2s);
  ASSERT_GT(p.interval(), 100ms);
  const MonoTime later = t0 + 2s + 4 * p.interval();  // four spacings of quiet
  ASSERT_TRUE(p.ready(later));
  p.sent(later);
  EXPECT_EQ(p.interval(), 100ms);
  EXPECT_TRUE(p.ready(later + 100ms));
}

TEST(ReplayPacer, AHealthyStreamsOccasionalGapsAreNeverHeldBack) {
  ReplayPacer p;
  const MonoTime t0 = MonoTime{} + 1h;
  for (int i = 0; i < 20; ++i) {  // one gap a second
    const MonoTime t = t0 + i * 1s;
    ASSERT_TRUE(p.ready(t)) << i;
    p.sent(t);
    EXPECT_EQ(p.interval(), 100ms);
  }
}

}  // namespace
}  // namespace kvgate::events
