#include "kvgate/workers/prefill_rate.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kvgate::workers {
namespace {

using namespace std::chrono_literals;

TEST(PrefillRate, WithoutSamplesItIsThePrior) {
  PrefillRate r({.prior_tokens_per_second = 10'000});
  EXPECT_DOUBLE_EQ(r.tokens_per_second(), 10'000);
  EXPECT_EQ(r.samples(), 0u);
}

TEST(PrefillRate, SamplesOutweighThePriorAsWorkAddsUp) {
  ManualClock clock;
  PrefillRate r({.prior_tokens_per_second = 10'000, .prior_tokens = 16'384, .half_life = 1h});
  // One short sample barely moves it: the prior's 16k tokens weigh more.
  r.observe(1'000, 200ms, clock.now());  // 5,000 tokens/s
  EXPECT_GT(r.tokens_per_second(), 9'000);
  // A worker at 20,000 tokens/s: 40 prompts of 8,000 tokens.
  for (int i = 0; i < 40; ++i) {
    clock.advance(100ms);
    r.observe(8'000, 400ms, clock.now());
  }
  // (16,384 + 1,000 + 320,000 tokens) / (1.64 + 0.2 + 16 s): the prior and the slow sample's
  // share left.
  EXPECT_NEAR(r.tokens_per_second(), 18'912, 10);
  EXPECT_EQ(r.samples(), 41u);
}

TEST(PrefillRate, OldSamplesFadeWithTheHalfLife) {
  ManualClock clock;
  PrefillRate r({.prior_tokens_per_second = 10'000, .prior_tokens = 1'000, .half_life = 10s});
  for (int i = 0; i < 50; ++i) {
    clock.advance(100ms);
    r.observe(8'000, 400ms, clock.now());  // 20,000 tokens/s
  }
  EXPECT_NEAR(r.tokens_per_second(), 20'000, 300);
  // The worker slows to half (a decode-heavy batch): within a few half-lives the estimate follows.
  for (int i = 0; i < 300; ++i) {
    clock.advance(200ms);
    r.observe(8'000, 800ms, clock.now());  // 10,000 tokens/s
  }
  EXPECT_NEAR(r.tokens_per_second(), 10'000, 300);
}

TEST(PrefillRate, OffIsThePriorWhateverItSees) {
  ManualClock clock;
  PrefillRate r({.prior_tokens_per_second = 7'000, .half_life = Duration::zero()});
  r.observe(8'000, 100ms, clock.now());
  EXPECT_DOUBLE_EQ(r.tokens_per_second(), 7'000);
  EXPECT_EQ(r.samples(), 0u);
  EXPECT_FALSE(r.learning());
}

TEST(PrefillRate, ConcurrentSamplesAreAllCounted) {
  ManualClock clock;
  PrefillRate r({.prior_tokens_per_second = 10'000, .prior_tokens = 0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2'000; ++i) {
        r.observe(1'000, 50ms, clock.now());  // 20,000 tokens/s
        (void)r.tokens_per_second();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(r.samples(), 8'000u);
  EXPECT_NEAR(r.tokens_per_second(), 20'000, 1e-6);
}

}  // namespace
}  // namespace kvgate::workers
