// The engine alone, driven by a ManualClock: timing model, scheduling, pool and KV events, all
// exact.
#include "kvgate/mock/engine.h"

#include <map>
#include <random>

#include "gtest/gtest.h"
#include "kvgate/index/indexer.h"

namespace kvgate::mock {
namespace {

using namespace std::chrono_literals;

struct Record {
  MonoTime arrival{};
  std::optional<MonoTime> first;
  std::optional<MonoTime> finish;
  uint32_t cached = 0;
  uint32_t outputs = 0;
  uint32_t preemptions = 0;
  std::vector<TokenId> tokens;
};

// Drives an engine with a manual clock; records every request and every event.
class Driver {
 public:
  explicit Driver(EngineConfig c) : engine(std::move(c)) {}

  RequestId add(std::vector<TokenId> prompt, uint32_t max_tokens) {
    auto id = engine.add(std::move(prompt), max_tokens, clock.now());
    EXPECT_TRUE(id.ok()) << id.status();
    records[*id].arrival = clock.now();
    return *id;
  }
  // Runs one step; returns its duration (0 when idle).
  Duration step() {
    auto d = engine.begin_step(clock.now());
    if (!d) return Duration(0);
    clock.advance(*d);
    const StepOutput& out = engine.finish_step(clock.now());
    durations.push_back(*d);
    shapes.push_back(out);
    for (const TokenOutput& t : out.tokens) {
      Record& r = records[t.id];
      if (t.first) r.first = clock.now();
      if (t.finished) r.finish = clock.now();
      r.cached = t.cached_tokens;
      r.preemptions = t.preemptions;
      ++r.outputs;
      r.tokens.push_back(t.token);
    }
    std::vector<events::WireEvent> batch;
    engine.take_events(&batch);
    if (!batch.empty()) batches.push_back(std::move(batch));
    return *d;
  }
  void run_until_idle() {
    for (int i = 0; i < 1'000'000; ++i) {
      if (step() == Duration(0)) return;
    }
    FAIL() << "engine never went idle";
  }
  Duration ttft(RequestId id) { return *records[id].first - records[id].arrival; }

  ManualClock clock;
  Engine engine;
  std::map<RequestId, Record> records;
  std::vector<Duration> durations;
  std::vector<StepOutput> shapes;
  std::vector<std::vector<events::WireEvent>> batches;
};

std::vector<TokenId> tokens(uint32_t n, uint32_t seed) {
  std::vector<TokenId> t(n);
  for (uint32_t i = 0; i < n; ++i) t[i] = 1000 + (seed * 7919 + i * 31) % 20000;
  return t;
}

EngineConfig small_config() {
  EngineConfig c;
  c.block_size = 16;
  c.num_blocks = 4096;
  return c;
}

TEST(TimingModel, Formula) {
  TimingModel t;
  EXPECT_EQ(t.step(0, 1, 100), 6000us + 40us + 4000ns);
  EXPECT_EQ(t.step(20000, 0, 0), 6000us + 1s);
  t.speedup = 10;
  EXPECT_EQ(t.step(20000, 0, 0), (6000us + 1s) / 10);
  t.speedup = 1;
  EXPECT_EQ(t.step(0, 0, 0, 20000), 6000us + 100ms);  // a tenth of computing them
}

TEST(Engine, TtftGrowsWithUncachedPromptTokens) {
  Driver d(small_config());
  auto small = d.add(tokens(1000, 1), 1);
  d.run_until_idle();
  auto large = d.add(tokens(4000, 2), 1);
  d.run_until_idle();
  const TimingModel& tm = d.engine.config().timing;
  EXPECT_EQ(d.ttft(small), tm.step(1000, 0, 0));
  EXPECT_EQ(d.ttft(large), tm.step(4000, 0, 0));
  EXPECT_GT(d.ttft(large), d.ttft(small));
}

TEST(Engine, ChunkedPrefillSplitsLongPromptsByTheBudget) {
  EngineConfig c = small_config();
  c.max_num_batched_tokens = 1024;
  Driver d(c);
  auto id = d.add(tokens(2500, 3), 1);
  d.run_until_idle();
  const TimingModel& tm = c.timing;
  EXPECT_EQ(d.ttft(id), tm.step(1024, 0, 0) * 2 + tm.step(452, 0, 0));
  ASSERT_EQ(d.shapes.size(), 3u);
  EXPECT_EQ(d.shapes[0].prefill_tokens, 1024u);
  EXPECT_EQ(d.shapes[2].prefill_tokens, 452u);
}

TEST(Engine, TtftShrinksWithCachedTokensAndUsageReportsThem) {
  Driver d(small_config());
  std::vector<TokenId> shared = tokens(3000, 5);
  auto a = d.add(shared, 4);
  d.run_until_idle();
  std::vector<TokenId> b_prompt = shared;
  b_prompt.resize(3200);
  for (size_t i = 3000; i < 3200; ++i) b_prompt[i] = 7;
  auto b = d.add(b_prompt, 4);
  d.run_until_idle();
  // 3000 shared tokens are 187 full blocks of 16 (2992 tokens).
  EXPECT_EQ(d.records[a].cached, 0u);
  EXPECT_EQ(d.records[b].cached, 2992u);
  const TimingModel& tm = d.engine.config().timing;
  EXPECT_EQ(d.ttft(b), tm.step(3200 - 2992, 0, 0));
  EXPECT_LT(d.ttft(b), d.ttft(a));
  // The same prompt again: everything but the last token's block is cached.
  auto c = d.add(b_prompt, 1);
  d.run_until_idle();
  EXPECT_EQ(d.records[c].cached, (3200 - 1) / 16 * 16);
  EXPECT_EQ(d.engine.counters().prefix_cache_queries, 3000u + 3200 + 3200);
  EXPECT_EQ(d.engine.counters().prefix_cache_hits, 2992u + (3200 - 1) / 16 * 16);
}

TEST(Engine, DecodeSlowsWithBatchSize) {
  auto decode_step = [](int batch) {
    Driver d(small_config());
    for (int i = 0; i < batch; ++i) d.add(tokens(100, 100 + i), 20);
    d.step();         // every prefill in one step
    return d.step();  // a pure decode step
  };
  Duration one = decode_step(1), many = decode_step(64);
  TimingModel tm;
  EXPECT_EQ(one, tm.step(0, 1, 101));
  EXPECT_EQ(many, tm.step(0, 64, 64 * 101));
  EXPECT_GT(many, one);
}

TEST(Engine, RequestsQueueWhenTheRunningLimitIsFull) {
  EngineConfig c = small_config();
  c.max_num_seqs = 2;
  Driver d(c);
  auto a = d.add(tokens(64, 1), 5);
  auto b = d.add(tokens(64, 2), 5);
  auto q = d.add(tokens(64, 3), 5);
  d.step();
  EXPECT_EQ(d.engine.load().running, 2u);
  EXPECT_EQ(d.engine.load().waiting, 1u);
  d.run_until_idle();
  // The queued request starts only when a slot frees: after the first two finished.
  EXPECT_GE(*d.records[q].first, *d.records[a].finish);
  EXPECT_GE(*d.records[q].first, *d.records[b].finish);
  EXPECT_GT(d.ttft(q), d.ttft(a));
}

TEST(Engine, RequestsQueueWhenThePoolIsFull) {
  EngineConfig c = small_config();
  c.num_blocks = 20;  // 320 tokens
  Driver d(c);
  auto a = d.add(tokens(200, 1), 40);  // needs 15 blocks by its end
  auto b = d.add(tokens(200, 2), 1);   // 13 blocks: does not fit beside a
  d.step();
  EXPECT_EQ(d.engine.load().running, 1u);
  EXPECT_EQ(d.engine.load().waiting, 1u);
  EXPECT_GT(d.engine.load().kv_usage(), 0.6);
  d.run_until_idle();
  EXPECT_GE(*d.records[b].first, *d.records[a].finish);
  EXPECT_EQ(d.engine.counters().preemptions, 0u);
}

TEST(Engine, PreemptsWhenDecodeOutgrowsThePool) {
  EngineConfig c = small_config();
  c.num_blocks = 16;  // 256 tokens
  Driver d(c);
  auto a = d.add(tokens(100, 1), 100);  // each fits alone (13 blocks), not both to the end
  auto b = d.add(tokens(100, 2), 100);
  d.run_until_idle();
  EXPECT_GT(d.engine.counters().preemptions, 0u);
  EXPECT_EQ(d.records[a].outputs, 100u);
  EXPECT_EQ(d.records[b].outputs, 100u);
  EXPECT_GT(d.records[b].preemptions, 0u);  // the later request is the victim
  EXPECT_EQ(d.records[a].preemptions, 0u);
  EXPECT_EQ(d.engine.load().used_blocks, 0u);
}

// Applies a step's events to a map of engine hash -> copies, as the index would count them.
void apply_events(const std::vector<events::WireEvent>& batch, std::map<uint64_t, int>* held) {
  for (const auto& ev : batch) {
    if (auto* s = std::get_if<events::BlockStored>(&ev)) {
      for (auto h : s->block_hashes) ++(*held)[h];
    } else if (auto* r = std::get_if<events::BlockRemoved>(&ev)) {
      for (auto h : r->block_hashes) {
        if (--(*held)[h] == 0) held->erase(h);
      }
    } else {
      held->clear();
    }
  }
}

TEST(Engine, EvictsTailsBeforeSharedHeads) {
  EngineConfig c = small_config();
  c.block_size = 4;
  c.num_blocks = 8;
  Driver d(c);
  auto a_prompt = tokens(16, 1);
  d.add(a_prompt, 1);  // 4 blocks, all stored
  d.run_until_idle();
  d.add(tokens(16, 2), 1);  // the 4 never-used blocks
  d.run_until_idle();
  EXPECT_EQ(d.engine.counters().evicted_blocks, 0u);
  d.add(tokens(8, 3), 1);  // 2 blocks: evicts a's last two blocks, tail first
  d.run_until_idle();
  EXPECT_EQ(d.engine.counters().evicted_blocks, 2u);
  auto e = d.add(a_prompt, 1);
  d.run_until_idle();
  EXPECT_EQ(d.records[e].cached, 8u);  // a's head survived
}

TEST(Engine, StoredEventsChainTheEngineHashes) {
  EngineConfig c = small_config();
  c.block_size = 4;
  c.max_num_batched_tokens = 4;  // one block per step
  Driver d(c);
  auto prompt = tokens(12, 9);
  d.add(prompt, 1);
  d.run_until_idle();
  events::VllmSha256Cbor vh;
  std::vector<events::Digest> digests;
  std::vector<events::EngineHash> want;
  for (int i = 0; i < 3; ++i) {
    std::span<const TokenId> block(prompt.data() + 4 * i, 4);
    digests.push_back(vh.block(i == 0 ? vh.none_hash() : digests.back(), block));
    want.push_back(events::VllmSha256Cbor::wire_value(digests.back()));
  }
  ASSERT_EQ(d.batches.size(), 3u);  // one batch per step that stored
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(d.batches[i].size(), 1u);
    const auto& s = std::get<events::BlockStored>(d.batches[i][0]);
    EXPECT_EQ(s.block_hashes, std::vector<events::EngineHash>{want[i]});
    EXPECT_EQ(s.parent, i == 0 ? std::nullopt : std::optional<events::EngineHash>(want[i - 1]));
    EXPECT_EQ(s.token_ids,
              std::vector<TokenId>(prompt.begin() + 4 * i, prompt.begin() + 4 * i + 4));
    EXPECT_EQ(s.block_size, 4u);
    EXPECT_EQ(s.medium, "GPU");
  }
}

TEST(Engine, SglangSchemeHashes) {
  EngineConfig c = small_config();
  c.block_size = 4;
  c.hash_scheme = HashScheme::kSglangSha256;
  Driver d(c);
  auto prompt = tokens(8, 4);
  d.add(prompt, 1);
  d.run_until_idle();
  auto d0 = events::SglangSha256::block(nullptr, std::span<const TokenId>(prompt.data(), 4));
  auto d1 = events::SglangSha256::block(&d0, std::span<const TokenId>(prompt.data() + 4, 4));
  ASSERT_EQ(d.batches.size(), 1u);
  const auto& s = std::get<events::BlockStored>(d.batches[0][0]);
  EXPECT_EQ(s.block_hashes,
            (std::vector<events::EngineHash>{events::SglangSha256::wire_value(d0),
                                             events::SglangSha256::wire_value(d1)}));
  EXPECT_FALSE(s.medium.has_value());
}

TEST(Engine, OutputBlocksAreCachedToo) {
  EngineConfig c = small_config();
  c.block_size = 4;
  Driver d(c);
  d.add(tokens(6, 1), 10);  // 16 tokens in all; the last one's KV is never computed
  d.run_until_idle();
  auto truth = d.engine.truth();
  EXPECT_EQ(truth.size(), 3u);
}

TEST(Engine, ImportedPrefixIsStoredOnceAndServesAsTheNextHit) {
  EngineConfig c = small_config();
  c.block_size = 4;
  Driver d(c);
  auto prompt = tokens(18, 6);  // 4 full blocks and 2 tokens
  // The engine already holds the first block: only the 3 after it are stored.
  d.add(std::vector<TokenId>(prompt.begin(), prompt.begin() + 5), 1);
  d.run_until_idle();
  d.batches.clear();
  EXPECT_EQ(d.engine.cached_prefix_blocks(prompt, 4), 1u);
  auto stored = d.engine.import_prefix(prompt, 4);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, 3u);
  std::vector<events::WireEvent> evs;
  d.engine.take_events(&evs);
  ASSERT_EQ(evs.size(), 1u);
  const auto& s = std::get<events::BlockStored>(evs[0]);
  EXPECT_EQ(s.block_hashes.size(), 3u);
  EXPECT_TRUE(s.parent.has_value());
  EXPECT_EQ(s.token_ids, std::vector<TokenId>(prompt.begin() + 4, prompt.begin() + 16));
  EXPECT_EQ(d.engine.cached_prefix_blocks(prompt, 4), 4u);
  // Importing again stores nothing; a request takes the imported blocks as its hit and computes
  // only the tail.
  EXPECT_EQ(*d.engine.import_prefix(prompt, 4), 0u);
  d.engine.take_events(&evs);
  EXPECT_EQ(evs.size(), 1u);
  auto id = d.add(prompt, 2);
  d.run_until_idle();
  EXPECT_EQ(d.records[id].cached, 16u);
  EXPECT_EQ(d.ttft(id), c.timing.step(2, 0, 0));
}

TEST(Engine, ImportFailsWhenThePoolIsTooSmall) {
  EngineConfig c = small_config();
  c.block_size = 4;
  c.num_blocks = 2;
  Driver d(c);
  auto prompt = tokens(16, 7);
  EXPECT_EQ(d.engine.import_prefix(prompt, 4).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(d.engine.truth().empty());
}

TEST(Engine, ClearCacheAnnouncesAndEmptiesEverything) {
  EngineConfig c = small_config();
  Driver d(c);
  auto a = d.add(tokens(500, 1), 30);
  d.step();
  d.step();
  ASSERT_FALSE(d.engine.truth().empty());
  ASSERT_TRUE(d.engine.clear_cache(/*announce=*/true).ok());
  EXPECT_TRUE(d.engine.truth().empty());
  EXPECT_EQ(d.engine.load().used_blocks, 0u);
  std::vector<events::WireEvent> ev;
  d.engine.take_events(&ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<events::AllBlocksCleared>(ev[0]));
  d.run_until_idle();  // the preempted request recomputes and finishes
  EXPECT_EQ(d.records[a].outputs, 30u);
  EXPECT_EQ(d.records[a].preemptions, 1u);
}

TEST(Engine, AbortInsideAStepTakesEffectWhenItFinishes) {
  Driver d(small_config());
  auto a = d.add(tokens(100, 1), 50);
  auto dur = d.engine.begin_step(d.clock.now());
  ASSERT_TRUE(dur.has_value());
  d.engine.abort(a);
  d.clock.advance(*dur);
  const StepOutput& out = d.engine.finish_step(d.clock.now());
  EXPECT_TRUE(out.tokens.empty());
  EXPECT_EQ(d.engine.load().running, 0u);
  EXPECT_EQ(d.engine.load().used_blocks, 0u);
  EXPECT_EQ(d.engine.counters().aborted_requests, 1u);
  EXPECT_FALSE(d.engine.begin_step(d.clock.now()).has_value());
}

TEST(Engine, RejectsRequestsThatCanNeverRun) {
  EngineConfig c = small_config();
  c.num_blocks = 10;
  c.max_model_len = 1000;
  Engine e(c);
  ManualClock clock;
  EXPECT_FALSE(e.add({}, 1, clock.now()).ok());
  EXPECT_FALSE(e.add(tokens(990, 1), 20, clock.now()).ok());  // over max_model_len
  EXPECT_FALSE(e.add(tokens(161, 1), 1, clock.now()).ok());   // 11 blocks > pool
  EXPECT_TRUE(e.add(tokens(159, 1), 1, clock.now()).ok());
}

// Random prefix-sharing traffic through a small pool (evictions, copies, preemptions): the
// events, replayed into a per-hash copy count, always equal the engine's truth.
// One request of a churning workload: a random head with a random tail, mostly short answers.
void add_churn_request(Driver& d, std::mt19937& rng,
                       const std::vector<std::vector<TokenId>>& heads) {
  auto p = heads[rng() % heads.size()];
  p.resize(p.size() + rng() % 200);
  for (size_t i = p.size() - p.size() % 7; i < p.size(); ++i) p[i] = 300 + rng() % 5000;
  d.add(std::move(p), rng() % 5 == 0 ? 150 + rng() % 150 : 1 + rng() % 40);
  for (int s = rng() % 4; s > 0; --s) d.step();
}

TEST(Engine, EventsReproduceTruthUnderChurn) {
  for (auto scheme : {HashScheme::kVllmSha256Cbor, HashScheme::kSglangSha256}) {
    EngineConfig c = small_config();
    c.block_size = 16;
    c.num_blocks = 300;
    c.max_num_batched_tokens = 512;
    c.hash_scheme = scheme;
    Driver d(c);
    std::mt19937 rng(7);
    std::vector<std::vector<TokenId>> heads;
    for (int i = 0; i < 6; ++i) heads.push_back(tokens(64 + 64 * i, 50 + i));
    std::map<uint64_t, int> held;
    for (int round = 0; round < 300; ++round) {
      add_churn_request(d, rng, heads);
      for (auto& b : d.batches) apply_events(b, &held);
      d.batches.clear();
      auto truth = d.engine.truth();
      std::map<uint64_t, int> want;
      for (const auto& b : truth) want[b.engine_hash] = static_cast<int>(b.copies);
      ASSERT_EQ(held, want) << "round " << round;
    }
    d.run_until_idle();
    EXPECT_GT(d.engine.counters().evicted_blocks, 0u);
    EXPECT_GT(d.engine.counters().prefix_cache_hits, 0u);
    EXPECT_GT(d.engine.counters().preemptions, 0u);
  }
}

// Copies per (engine hash, on the host tier), as a tiered index counts them.
using TieredCopies = std::map<std::pair<uint64_t, bool>, int>;

bool on_host(const std::optional<std::string>& medium) { return medium && *medium == "CPU"; }

void apply_tiered(const std::vector<events::WireEvent>& batch, TieredCopies* held) {
  for (const auto& ev : batch) {
    if (auto* s = std::get_if<events::BlockStored>(&ev)) {
      for (auto h : s->block_hashes) ++(*held)[{h, on_host(s->medium)}];
    } else if (auto* r = std::get_if<events::BlockRemoved>(&ev)) {
      for (auto h : r->block_hashes) {
        if (--(*held)[{h, on_host(r->medium)}] == 0) held->erase({h, on_host(r->medium)});
      }
    } else {
      held->clear();
    }
  }
}

TieredCopies tiered_truth(const Engine& engine) {
  TieredCopies want;
  for (const auto& b : engine.truth()) {
    if (b.copies > 0) want[{b.engine_hash, false}] = static_cast<int>(b.copies);
    if (b.on_host) want[{b.engine_hash, true}] = 1;
  }
  return want;
}

TEST(HostTier, APrefixTheDeviceEvictedLoadsBackFromTheHostTier) {
  EngineConfig c = small_config();
  c.block_size = 4;
  c.num_blocks = 8;
  c.host_blocks = 16;
  Driver d(c);
  const auto a_prompt = tokens(16, 1);
  d.add(a_prompt, 1);
  d.run_until_idle();
  // 7 blocks: the 3 never used, a's partial last block, then a's tail, tail first. Only a's
  // first block is left on the device; every one of a's blocks is still on the host.
  d.add(tokens(28, 2), 1);
  d.run_until_idle();
  EXPECT_EQ(d.engine.counters().evicted_blocks, 3u);
  EXPECT_EQ(d.engine.counters().offloaded_blocks, 4u + 7u);
  d.batches.clear();
  const auto again = d.add(a_prompt, 1);
  d.run_until_idle();
  // Three blocks hit (the last token is always computed): the first on the device, two loaded
  // back from the host at a tenth of computing them.
  EXPECT_EQ(d.records[again].cached, 12u);
  EXPECT_EQ(d.ttft(again), c.timing.step(4, 0, 0, 8));
  EXPECT_LT(d.ttft(again), c.timing.step(12, 0, 0));
  EXPECT_EQ(d.engine.counters().host_hit_tokens, 8u);
  EXPECT_EQ(d.engine.counters().prefix_cache_hits, 4u);
  // The loaded blocks are announced on the device again, chained to the first block.
  ASSERT_FALSE(d.batches.empty());
  const events::BlockStored* loaded = nullptr;
  for (const auto& ev : d.batches[0]) {
    if (auto* s = std::get_if<events::BlockStored>(&ev); s && s->block_hashes.size() == 2) {
      loaded = s;
    }
  }
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(loaded->medium, std::optional<std::string>("GPU"));
  EXPECT_TRUE(loaded->parent.has_value());
  EXPECT_EQ(loaded->token_ids.size(), 8u);
}

TEST(HostTier, EvictsItsLeastRecentlyUsedBlocksForRoom) {
  EngineConfig c = small_config();
  c.block_size = 4;
  c.host_blocks = 4;
  Driver d(c);
  d.add(tokens(16, 1), 1);
  d.add(tokens(16, 2), 1);
  d.run_until_idle();
  EXPECT_EQ(d.engine.counters().offloaded_blocks, 8u);
  EXPECT_EQ(d.engine.counters().host_evicted_blocks, 4u);
  size_t host_copies = 0;
  for (const auto& b : d.engine.truth()) host_copies += b.on_host ? 1 : 0;
  EXPECT_EQ(host_copies, 4u);
  TieredCopies held;
  for (auto& b : d.batches) apply_tiered(b, &held);
  EXPECT_EQ(held, tiered_truth(d.engine));
}

TEST(HostTier, EventsReproduceBothTiersUnderChurn) {
  EngineConfig c = small_config();
  c.num_blocks = 300;
  c.host_blocks = 500;
  c.max_num_batched_tokens = 512;
  Driver d(c);
  std::mt19937 rng(11);
  std::vector<std::vector<TokenId>> heads;
  for (int i = 0; i < 8; ++i) heads.push_back(tokens(64 + 96 * i, 70 + i));
  TieredCopies held;
  for (int round = 0; round < 300; ++round) {
    add_churn_request(d, rng, heads);
    if (round == 150) {  // AllBlocksCleared empties both tiers
      ASSERT_TRUE(d.engine.clear_cache(/*announce=*/true).ok());
      d.engine.take_events(&d.batches.emplace_back());
    }
    for (auto& b : d.batches) apply_tiered(b, &held);
    d.batches.clear();
    ASSERT_EQ(held, tiered_truth(d.engine)) << "round " << round;
  }
  d.run_until_idle();
  EXPECT_GT(d.engine.counters().evicted_blocks, 0u);
  EXPECT_GT(d.engine.counters().host_hit_tokens, 0u);
  EXPECT_GT(d.engine.counters().host_evicted_blocks, 0u);
}

}  // namespace
}  // namespace kvgate::mock
