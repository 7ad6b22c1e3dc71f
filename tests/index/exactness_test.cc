// Reference and positional indexers against the reference on seeded random corpora, and proof
// that the harness catches an indexer that is wrong. Long mode: KVGATE_EXACTNESS_LONG=1 (see
// harness/exactness.h for the knobs).
#include <set>

#include "gtest/gtest.h"
#include "harness/exactness.h"
#include "index/reference_indexer.h"
#include "kvgate/index/indexer.h"
#include "support/sanitizer.h"

namespace kvgate::index::harness {
namespace {

// Sanitizer builds run a third of the corpus so the asan and tsan presets stay within ctest's
// timeout; the release build runs the full 300,000 events per seed.
constexpr uint64_t kEvents = testing_support::kUnderSanitizer ? 100'000 : 300'000;

IndexerFactory factory(IndexKind kind, bool synchronized = false) {
  return [kind, synchronized]() -> std::unique_ptr<Indexer> {
    auto made = make_indexer(kind);
    if (!made.ok()) return nullptr;
    return synchronized ? make_synchronized(std::move(*made)) : std::move(*made);
  };
}

void expect_exact(const IndexerFactory& make, HarnessOptions options, std::vector<uint64_t> seeds) {
  options = options_from_env(options);
  for (uint64_t seed : seeds_from_env(seeds)) {
    options.seed = seed;
    auto report = run_exactness(make, options);
    ASSERT_TRUE(report.ok()) << report.status();
    std::printf("seed %llu: %s\n", static_cast<unsigned long long>(seed),
                report->summary().c_str());
    EXPECT_GE(report->events, options.events);
  }
}

TEST(Exactness, ReferenceAgreesWithItself) {
  expect_exact(factory(IndexKind::kReference), {.events = kEvents}, {1});
}

TEST(Exactness, PositionalAgreesWithTheReference) {
  expect_exact(factory(IndexKind::kPositional), {.events = kEvents}, {1, 2});
}

TEST(Exactness, SynchronizedPositionalUnderTwoLanesAndAReader) {
  expect_exact(factory(IndexKind::kPositional, true),
               {.events = 100'000, .lanes = 2, .readers = 1, .sync_every = 256}, {3});
}

// The corpus exercises every rule: a run that never orphaned, moved or cleared would prove
// nothing about them.
TEST(Exactness, CorpusCoversEveryRule) {
  auto report = run_exactness(factory(IndexKind::kReference), {.seed = 7, .events = 100'000});
  ASSERT_TRUE(report.ok()) << report.status();
  const ApplyResult& t = report->totals;
  EXPECT_GT(t.stored_blocks, 100'000u);
  EXPECT_GT(t.removed_blocks, 10'000u);
  EXPECT_GT(t.orphan_events, 1'000u);
  EXPECT_GT(t.unknown_removals, 1'000u);
  EXPECT_GT(t.moved_blocks, 1'000u);
  EXPECT_GT(t.malformed_events, 100u);
  EXPECT_GT(t.clears, 100u);
  EXPECT_GT(report->holder_removals, 10u);
  EXPECT_GT(report->lookups, 100'000u);
  EXPECT_GT(report->matched_blocks, report->lookup_blocks / 10);
  EXPECT_GT(report->peak_memberships, 2'000u);
}

TEST(Exactness, SameSeedSameRun) {
  const HarnessOptions o{.seed = 5, .events = 20'000};
  auto a = run_exactness(factory(IndexKind::kPositional), o);
  auto b = run_exactness(factory(IndexKind::kPositional), o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->summary(), b->summary());
  auto c = run_exactness(factory(IndexKind::kPositional), {.seed = 6, .events = 20'000});
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->summary(), c->summary());
}

// Deliberately wrong indexers: the reference with one defect each.
enum class Defect {
  kOverCountsAtTheEnd,  // a miss after 4 matched blocks still counts one more (a jump search)
  kLooksPastHoles,      // keeps counting held blocks after a miss
  kHostIsDevice,        // applies host-tier events to the device tier
  kIgnoresClears,       // reports the clear, keeps the blocks
  kDeviceOffByOne,      // device depth one short when some block is not on the device
};

class BrokenIndexer final : public Indexer {
 public:
  explicit BrokenIndexer(Defect d) : defect_(d) {}
  std::string_view name() const override { return "broken"; }
  Concurrency concurrency() const override { return {}; }
  ApplyResult apply(HolderId holder, std::span<const Event> events) override {
    std::vector<Event> changed(events.begin(), events.end());
    uint32_t dropped_clears = 0;
    if (defect_ == Defect::kHostIsDevice) {
      for (Event& e : changed) {
        if (e.tier == Tier::kHost) e.tier = Tier::kDevice;
      }
    }
    if (defect_ == Defect::kIgnoresClears) {
      const size_t before = changed.size();
      std::erase_if(changed, [](const Event& e) { return e.kind == EventKind::kCleared; });
      dropped_clears = static_cast<uint32_t>(before - changed.size());
    }
    ApplyResult r = inner_.apply(holder, changed);
    r.clears += dropped_clears;
    return r;
  }
  void lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const override {
    inner_.lookup(chain, out);
    for (HolderMatch& m : out) {
      switch (defect_) {
        case Defect::kOverCountsAtTheEnd:
          if (m.any_depth >= 4 && m.any_depth < chain.size()) ++m.any_depth;
          break;
        case Defect::kLooksPastHoles: {
          std::vector<Membership> held;
          (void)inner_.holder_memberships(m.holder, held);
          std::set<SeqHash> seqs;
          for (const Membership& x : held) seqs.insert(x.seq);
          for (size_t i = m.any_depth + 1; i < chain.size() && seqs.count(chain[i]); ++i) {
            ++m.any_depth;
          }
          break;
        }
        case Defect::kDeviceOffByOne:
          if (m.device_depth > 0 && m.device_depth < m.any_depth) --m.device_depth;
          break;
        default:
          break;
      }
    }
  }
  void remove_holder(HolderId holder) override { inner_.remove_holder(holder); }
  IndexStats stats() const override { return inner_.stats(); }
  Status memberships(std::vector<Membership>& out) const override {
    return inner_.memberships(out);
  }
  Status holder_memberships(HolderId holder, std::vector<Membership>& out) const override {
    return inner_.holder_memberships(holder, out);
  }

 private:
  Defect defect_;
  ReferenceIndexer inner_;
};

class BrokenIndexerTest : public ::testing::TestWithParam<Defect> {};

TEST_P(BrokenIndexerTest, HarnessCatchesIt) {
  const Defect d = GetParam();
  auto report = run_exactness([d] { return std::make_unique<BrokenIndexer>(d); }, {.seed = 1});
  ASSERT_FALSE(report.ok()) << "the harness passed a broken indexer: " << report->summary();
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(report.status().message().find("broken disagrees with the reference: seed 1"),
            std::string::npos);
  std::printf("caught: %s\n", std::string(report.status().message()).c_str());
}

INSTANTIATE_TEST_SUITE_P(Defects, BrokenIndexerTest,
                         ::testing::Values(Defect::kOverCountsAtTheEnd, Defect::kLooksPastHoles,
                                           Defect::kHostIsDevice, Defect::kIgnoresClears,
                                           Defect::kDeviceOffByOne));

TEST(Exactness, AFailingFactoryIsAnError) {
  auto report = run_exactness([] { return std::unique_ptr<Indexer>(); }, {});
  EXPECT_FALSE(report.ok());
}

}  // namespace
}  // namespace kvgate::index::harness
