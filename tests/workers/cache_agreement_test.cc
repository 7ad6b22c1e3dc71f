#include "kvgate/workers/cache_agreement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace kvgate::workers {
namespace {

using Change = CacheAgreement::Change;

TEST(CacheAgreement, AgreementIsOneMinusTheGapOverTheLarger) {
  EXPECT_DOUBLE_EQ(CacheAgreement::agreement(0, 0), 1.0);
  EXPECT_DOUBLE_EQ(CacheAgreement::agreement(100, 100), 1.0);
  EXPECT_DOUBLE_EQ(CacheAgreement::agreement(100, 98), 0.98);
  EXPECT_DOUBLE_EQ(CacheAgreement::agreement(98, 100), 0.98);
  EXPECT_DOUBLE_EQ(CacheAgreement::agreement(0, 512), 0.0);
  EXPECT_DOUBLE_EQ(CacheAgreement::agreement(512, 0), 0.0);
}

TEST(CacheAgreement, TotalsGrowAndTheRatioWaitsForAFullWindow) {
  CacheAgreement a(0.9);
  EXPECT_EQ(a.note(1000, 500), Change::kNone);
  EXPECT_EQ(a.predicted_total(), 1000u);
  EXPECT_EQ(a.reported_total(), 500u);
  EXPECT_DOUBLE_EQ(a.ratio(), 1.0) << "no window has completed";
  EXPECT_FALSE(a.disagreeing());
}

TEST(CacheAgreement, AWorkerWhoseEngineFindsWhatTheIndexMissesTurnsDisagreeingOnce) {
  CacheAgreement a(0.9);
  // The index matches nothing there (a wrong block size), the engine reports hits.
  std::vector<Change> changes;
  for (int i = 0; i < 40; ++i) changes.push_back(a.note(0, 1024));
  EXPECT_EQ(std::count(changes.begin(), changes.end(), Change::kBecameDisagreeing), 1);
  EXPECT_EQ(std::count(changes.begin(), changes.end(), Change::kBecameAgreeing), 0);
  EXPECT_TRUE(a.disagreeing());
  EXPECT_DOUBLE_EQ(a.ratio(), 0.0);
  // Fixed: the next full window agrees and says so once.
  changes.clear();
  for (int i = 0; i < 40; ++i) changes.push_back(a.note(1024, 1008));
  EXPECT_EQ(std::count(changes.begin(), changes.end(), Change::kBecameAgreeing), 1);
  EXPECT_FALSE(a.disagreeing());
  EXPECT_NEAR(a.ratio(), 1008.0 / 1024.0, 1e-9);
}

TEST(CacheAgreement, SmallDriftStaysAgreeing) {
  CacheAgreement a(0.9);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(a.note(1024, 1000), Change::kNone);
  EXPECT_FALSE(a.disagreeing());
  EXPECT_NEAR(a.ratio(), 1000.0 / 1024.0, 1e-9);
}

TEST(CacheAgreement, ThresholdZeroNeverWarns) {
  CacheAgreement a(0.0);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(a.note(0, 1024), Change::kNone);
  EXPECT_FALSE(a.disagreeing());
  EXPECT_DOUBLE_EQ(a.ratio(), 0.0) << "the ratio is still measured";
}

TEST(CacheAgreement, ConcurrentNotesLoseNothing) {
  CacheAgreement a(0.9);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a] {
      for (int i = 0; i < 10'000; ++i) a.note(16, 16);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(a.predicted_total(), 4u * 10'000 * 16);
  EXPECT_EQ(a.reported_total(), 4u * 10'000 * 16);
  EXPECT_DOUBLE_EQ(a.ratio(), 1.0);
}

}  // namespace
}  // namespace kvgate::workers
