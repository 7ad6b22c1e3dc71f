// Block hashing sits on every routing decision (a prompt's tokens -> its block chain).
// Run: build/release/bench/core/kvgate-bench-core --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <numeric>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/tokenizer.h"

namespace kvgate {
namespace {

void BM_HashPromptBlocks(benchmark::State& state) {
  const size_t tokens = static_cast<size_t>(state.range(0));
  const uint32_t block = static_cast<uint32_t>(state.range(1));
  std::vector<TokenId> prompt(tokens);
  std::iota(prompt.begin(), prompt.end(), 1000);
  const BlockHasher h;
  std::vector<SeqHash> seq;
  seq.reserve(tokens / block + 1);
  for (auto _ : state) {
    seq.clear();
    h.hash_blocks(prompt, block, nullptr, &seq);
    benchmark::DoNotOptimize(seq.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * tokens * sizeof(TokenId)));
  state.counters["blocks"] = static_cast<double>(tokens / block);
}
BENCHMARK(BM_HashPromptBlocks)
    ->Args({1344, 16})
    ->Args({8288, 16})
    ->Args({12288, 128})
    ->Args({32768, 16});

void BM_TokenizeText(benchmark::State& state) {
  std::string text;
  while (text.size() < static_cast<size_t>(state.range(0)))
    text += "The quick brown fox jumps over the lazy dog. ";
  const TestTokenizer t;
  std::vector<TokenId> out;
  for (auto _ : state) {
    out.clear();
    t.encode(text, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_TokenizeText)->Arg(100 << 10);

}  // namespace
}  // namespace kvgate

BENCHMARK_MAIN();
