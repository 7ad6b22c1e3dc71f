// Micro benches of the indexers' two hot calls, on a synthetic fleet: `holders` holders sharing
// a prefix of half the chain, each with its own tail; the chain index's per-holder record map; and
// the machine's memory round trip.
// Run: build/release/bin/kvgate-bench-index-micro --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "index/chain/detail/record_map.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index {
namespace {

constexpr IndexKind kKinds[] = {IndexKind::kReference, IndexKind::kPositional, IndexKind::kChain};

struct Fleet {
  std::unique_ptr<Indexer> index;
  std::vector<std::vector<SeqHash>> chains;  // per holder, its full chain
};

// Every holder stores [shared prefix of depth/2][own tail of depth/2] plus `extra` unrelated
// blocks, so the maps have a realistic size.
Fleet build(IndexKind kind, uint32_t holders, uint32_t depth, uint32_t extra) {
  Fleet f;
  f.index = std::move(*make_indexer(kind));
  BlockHasher hasher;
  for (uint32_t h = 0; h < holders; ++h) {
    std::vector<EngineHash> engine;
    std::vector<LocalHash> local;
    std::vector<SeqHash> seq;
    for (uint32_t i = 0; i < depth; ++i) {
      const LocalHash l = i < depth / 2 ? 1000 + i : (uint64_t{h} << 32) + i;
      local.push_back(l);
      engine.push_back(l * 31 + 7);
      seq.push_back(i == 0 ? l : hasher.chain(seq.back(), l));
    }
    for (uint32_t i = 0; i < extra; ++i) {
      local.push_back((uint64_t{h} << 40) + i);
      engine.push_back((uint64_t{h} << 40) + i);
    }
    Event e;
    e.kind = EventKind::kStored;
    e.engine_hashes = engine;
    e.local_hashes = local;
    f.index->apply(HolderId(h), std::span<const Event>(&e, 1));
    f.chains.push_back(std::move(seq));
  }
  return f;
}

void BM_Lookup(benchmark::State& state) {
  const IndexKind kind = kKinds[state.range(0)];
  const uint32_t holders = static_cast<uint32_t>(state.range(1));
  const uint32_t depth = static_cast<uint32_t>(state.range(2));
  Fleet f = build(kind, holders, depth, 4096);
  std::vector<HolderMatch> out;
  out.reserve(holders);
  size_t i = 0;
  for (auto _ : state) {
    f.index->lookup(f.chains[i++ % holders], out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(index_kind_name(kind)));
  state.counters["blocks/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * depth,
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Lookup)
    ->ArgNames({"kind", "holders", "depth"})
    ->ArgsProduct({{0, 1, 2}, {4, 128}, {16, 96}});

// One holder stores a 32-block chain under a held parent and removes it again: 64 block ops. The
// removal lists the blocks head first (`tail_first` 0) or tail first (1), as engines evict a
// sequence; the chain index removes a holder's last block in one step and takes its general path
// (positions held past a gap, in the holder's writer-side state) for the others.
void BM_StoreRemove(benchmark::State& state) {
  const IndexKind kind = kKinds[state.range(0)];
  const uint32_t holders = static_cast<uint32_t>(state.range(1));
  const bool tail_first = state.range(2) != 0;
  Fleet f = build(kind, holders, 64, 4096);
  constexpr uint32_t kBlocks = 32;
  std::vector<EngineHash> engine(kBlocks);
  std::vector<LocalHash> local(kBlocks);
  for (uint32_t i = 0; i < kBlocks; ++i) {
    local[i] = 0xabc000 + i;
    engine[i] = 0xdef000 + i;
  }
  Event events[2];
  events[0].kind = EventKind::kStored;
  events[0].has_parent = true;
  events[0].parent = 1000 * 31 + 7;  // the first shared block's engine hash
  events[0].engine_hashes = engine;
  events[0].local_hashes = local;
  std::vector<EngineHash> removed(engine);
  if (tail_first) std::reverse(removed.begin(), removed.end());
  events[1].kind = EventKind::kRemoved;
  events[1].engine_hashes = removed;
  uint32_t h = 0;
  for (auto _ : state) {
    const ApplyResult r = f.index->apply(HolderId(h++ % holders), events);
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel(std::string(index_kind_name(kind)));
  state.counters["blocks/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2 * kBlocks, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_StoreRemove)
    ->ArgNames({"kind", "holders", "tail_first"})
    ->ArgsProduct({{0, 1, 2}, {4, 128}, {0, 1}});

// The chain index's record map as a full KV pool churns it: `maps` maps each sized for and holding
// 16,384 records (the corpus's pool; 73% load), each iteration erasing one held key and inserting a
// new one in the next map, then finding a held key there. One map stays in the core's cache, so
// the figure is the map's own work (its bucket scans); 128 maps (46 MB) add a miss per operation,
// the corpus replay's case without its writers' prefetching.
void BM_RecordMapChurn(benchmark::State& state) {
  using chain::detail::RecordMap;
  constexpr size_t kPool = 16384;
  const auto maps = static_cast<size_t>(state.range(0));
  std::mt19937_64 rng(42);
  std::vector<std::unique_ptr<RecordMap>> map(maps);
  std::vector<std::vector<uint64_t>> held(maps);
  for (size_t m = 0; m < maps; ++m) {
    map[m] = std::make_unique<RecordMap>();
    map[m]->reserve(kPool);
    for (size_t i = 0; i < kPool; ++i) {
      held[m].push_back(rng());
      map[m]->insert(held[m].back(), 1, static_cast<uint16_t>(i), {});
    }
  }
  size_t m = 0;
  for (auto _ : state) {
    m = m + 1 == maps ? 0 : m + 1;
    uint64_t& key = held[m][rng() % kPool];
    map[m]->erase(map[m]->find(key));
    key = rng();
    map[m]->insert(key, 1, 0, {});
    benchmark::DoNotOptimize(map[m]->find(held[m][rng() % kPool]));
  }
  state.counters["ns/op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 4,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RecordMapChurn)->ArgNames({"maps"})->Arg(1)->Arg(128);

// The machine's memory round trip: dependent loads chasing random cycles through `MiB` of cache
// lines, `chains` cycles at once (one load of each per iteration). With one chain, an iteration is
// one round trip: the unit a deep lookup's latency is read in (a run header, then its blocks,
// then the next run). With sixteen, the loads overlap: the cost per line of a writer's pass that
// loads a whole event's lines first.
void BM_DependentLoad(benchmark::State& state) {
  struct alignas(64) Line {
    uint32_t next;
  };
  const size_t lines = static_cast<size_t>(state.range(0)) << 20 >> 6;
  const auto chains = static_cast<size_t>(state.range(1));
  std::vector<uint32_t> order(lines);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  std::vector<Line> v(lines);
  for (size_t i = 0; i < lines; ++i) v[order[i]].next = order[(i + 1) % lines];
  std::vector<uint32_t> at(chains);
  for (size_t c = 0; c < chains; ++c) at[c] = order[c * (lines / chains)];
  for (auto _ : state) {
    for (size_t c = 0; c < chains; ++c) at[c] = v[at[c]].next;
    benchmark::DoNotOptimize(at.data());
  }
  state.counters["ns/load"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(chains),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DependentLoad)
    ->ArgNames({"MiB", "chains"})
    ->ArgsProduct({{1, 4, 16, 64, 256}, {1, 16}});

}  // namespace
}  // namespace kvgate::index

BENCHMARK_MAIN();
