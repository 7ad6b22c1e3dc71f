// Rate limits shared between replicas: the max-min fair split of a limit over the replicas'
// demands, and two LimitShares exchanging their demands as the state sync would carry them.
#include "app/limit_shares.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

namespace kvgate::app {
namespace {

TEST(FairShare, EqualDemandsSplitEvenly) {
  EXPECT_DOUBLE_EQ(fair_share({2.0, 2.0}, 0, 0.02), 0.5);
  EXPECT_DOUBLE_EQ(fair_share({2.0, 2.0}, 1, 0.02), 0.5);
  EXPECT_NEAR(fair_share({3.0, 3.0, 3.0}, 2, 0.02), 1.0 / 3, 1e-12);
}

TEST(FairShare, ASmallDemandGetsWhatItAsksAndTheRestGoesToTheBigOne) {
  // Demands as fractions of the limit: 0.1 asks a tenth, 3.0 three times the limit.
  const double small = fair_share({0.1, 3.0}, 0, 0.02);
  const double big = fair_share({0.1, 3.0}, 1, 0.02);
  EXPECT_NEAR(small, 0.01 + 0.1, 1e-12);  // its part of the reserve, and its demand
  EXPECT_NEAR(big, 1.0 - small, 1e-12);
}

TEST(FairShare, UnaskedCapacityIsSpreadAndNoDemandSplitsEvenly) {
  // Together they ask half the limit: each gets its demand and half of what is left.
  EXPECT_NEAR(fair_share({0.1, 0.4}, 0, 0.0), 0.1 + 0.25, 1e-12);
  EXPECT_NEAR(fair_share({0.0, 0.0, 0.0}, 1, 0.02), 1.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(fair_share({5.0}, 0, 0.02), 1.0);
  EXPECT_DOUBLE_EQ(fair_share({}, 0, 0.02), 1.0);
}

TEST(FairShare, SharesAlwaysSumToOne) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> demand(0.0, 4.0);
  for (int round = 0; round < 1000; ++round) {
    std::vector<double> d(1 + round % 6);
    for (double& x : d) x = round % 5 == 0 ? 0.0 : demand(rng);
    double sum = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      const double s = fair_share(d, i, 0.02);
      EXPECT_GT(s, 0.0);
      sum += s;
    }
    EXPECT_NEAR(sum, 1.0, 1e-9) << "round " << round;
  }
}

class LimitSharesTest : public ::testing::Test {
 protected:
  LimitSharesTest()
      : path_((std::filesystem::temp_directory_path() /
               ("kvgate-limit-shares-" + std::to_string(getpid()) + ".yaml"))
                  .string()) {
    std::ofstream(path_) << "keys:\n  - key: sk-a\n    tenant: a\n    rpm: 600\n    tpm: 60000\n"
                            "  - key: sk-free\n    tenant: b\n";
    for (auto* t : {&table_a_, &table_b_}) {
      auto loaded = KeyTable::load(path_);
      EXPECT_TRUE(loaded.ok()) << loaded.status();
      if (loaded.ok()) *t = *loaded;
    }
  }
  ~LimitSharesTest() override { std::filesystem::remove(path_); }

  // Both replicas publish, then both apply what the sync would have pulled.
  void exchange() {
    sync::SharedState fleet;
    a_.publish(fleet);
    b_.publish(fleet);
    a_.apply(fleet);
    b_.apply(fleet);
  }
  static const KeyEntry& key(const std::shared_ptr<const KeyTable>& t) { return *t->find("sk-a"); }

  const std::string path_;
  std::shared_ptr<const KeyTable> table_a_, table_b_;
  ManualClock clock_;
  LimitShares a_{"gw-a", [this] { return table_a_; }, clock_};
  LimitShares b_{"gw-b", [this] { return table_b_; }, clock_};
};

TEST_F(LimitSharesTest, TheReplicasSharesFollowTheirDemandsAndSumToOne) {
  exchange();  // (a first exchange: no demand measured yet)
  EXPECT_EQ(a_.replicas(), 2u);
  EXPECT_DOUBLE_EQ(key(table_a_).requests->share(), 0.5);
  // Replica A is asked past the limit, B a fifth of it.
  const auto now = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) (void)key(table_a_).requests->take(1, now);  // (refused too)
  for (int i = 0; i < 4; ++i) (void)key(table_b_).requests->take(1, now);
  (void)key(table_a_).tokens->take(30000, now);
  (void)key(table_b_).tokens->take(400, now);
  clock_.advance(std::chrono::seconds(1));
  exchange();
  const double ra = key(table_a_).requests->share(), rb = key(table_b_).requests->share();
  EXPECT_NEAR(ra + rb, 1.0, 1e-9);
  EXPECT_GT(ra, rb);
  // B asked 4/s of a 10/s limit for the one second measured (the average starts at zero): B
  // gets what it asks and its part of the reserve, A the rest.
  const double weight = 1 - std::exp(-1.0 / LimitShares::kDemandSmoothing.count());
  EXPECT_NEAR(rb, 0.01 + 0.4 * weight, 1e-9);
  const double ta = key(table_a_).tokens->share(), tb = key(table_b_).tokens->share();
  EXPECT_NEAR(ta + tb, 1.0, 1e-9);
  EXPECT_GT(ta, tb);
}

TEST_F(LimitSharesTest, WithRedisGoneEachReplicaKeepsOneOverTheReplicasLastSeen) {
  exchange();
  const auto now = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) (void)key(table_a_).requests->take(1, now);
  clock_.advance(std::chrono::seconds(1));
  exchange();
  ASSERT_GT(key(table_a_).requests->share(), 0.5);
  a_.forget_peers();
  EXPECT_DOUBLE_EQ(key(table_a_).requests->share(), 0.5);
  EXPECT_DOUBLE_EQ(key(table_a_).tokens->share(), 0.5);
}

TEST_F(LimitSharesTest, AShareIsTheBucketsCapacityAndRefill) {
  const KeyEntry& k = key(table_a_);
  const auto t0 = std::chrono::steady_clock::now();
  k.requests->set_share(0.25, t0);  // 600 rpm -> 150 here
  int taken = 0;
  while (k.requests->take(1, t0).ok) ++taken;
  EXPECT_EQ(taken, 150);
  // Refilled at a quarter of 10/s: 2.5 in a second.
  EXPECT_TRUE(k.requests->take(2, t0 + std::chrono::seconds(1)).ok);
  EXPECT_FALSE(k.requests->take(1, t0 + std::chrono::seconds(1)).ok);
}

// A client hears what the whole limit has left, not this replica's share of it.
TEST(TokenBucket, RemainingIsTheWholeLimitsEstimateUnderAShare) {
  const auto t0 = std::chrono::steady_clock::now();
  TokenBucket whole(600);
  const TokenBucket::Take alone = whole.take(100, t0);
  EXPECT_DOUBLE_EQ(alone.remaining, 500);
  EXPECT_DOUBLE_EQ(alone.limit_remaining, 500);
  TokenBucket quarter(600);
  quarter.set_share(0.25, t0);  // 150 here
  const TokenBucket::Take taken = quarter.take(50, t0);
  EXPECT_DOUBLE_EQ(taken.remaining, 100);
  EXPECT_DOUBLE_EQ(taken.limit_remaining, 400);
  const TokenBucket::Take refused = quarter.take(101, t0);
  EXPECT_FALSE(refused.ok);
  EXPECT_DOUBLE_EQ(refused.limit_remaining, 400);
  EXPECT_LE(quarter.take(0, t0).limit_remaining, 600);
}

TEST(LimitId, IsAStableHashNeverTheKey) {
  KeyEntry k;
  k.key_sha256 = sha256_of("sk-secret");
  const std::string id = limit_id(k);
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(id, limit_id(k));
  EXPECT_EQ(id.find("sk-"), std::string::npos);
  KeyEntry other;
  other.key_sha256 = sha256_of("sk-other");
  EXPECT_NE(limit_id(other), id);
}

}  // namespace
}  // namespace kvgate::app
