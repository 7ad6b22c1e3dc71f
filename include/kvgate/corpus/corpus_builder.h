// Expands a Mooncake trace into an index corpus (corpus_file.h), as peers do for comparability:
//
// - length factor f: hash id h becomes the f ids h*f .. h*f+f-1 (512-token blocks into f
//   smaller ones; f = 4 gives 128-token blocks). Every id expands, the partial last one too.
// - duplication c: c structurally identical copies of every request with disjoint ids (copy k
//   adds (max id + 1) * k before expanding); requests run in trace order, each row's c copies
//   back to back.
// - each request goes to one of N workers drawn by a seeded RNG; the router looks its full chain
//   up first (a lookup record), then the worker's KvPool serves it, and its evictions and stores
//   form that worker's event batch (removed, then stored; device tier; holder id = worker).
//
// Block content: a block's local hash is XXH3-64 of its expanded id (u64 LE, seed = hash seed),
// its sequence hash chains as the router's (core/block_hash.h), and its engine hash is
// XXH3-64(parent engine hash || id) under a fixed engine seed, root parent a fixed constant:
// distinct per chain position as a vLLM engine's is.
#pragma once

#include <cstdint>
#include <string>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/result.h"
#include "kvgate/corpus/corpus_file.h"
#include "kvgate/corpus/mooncake_trace.h"

namespace kvgate::corpus {

struct BuildOptions {
  uint32_t workers = 128;
  uint32_t duplication = 20;
  uint32_t length_factor = 4;
  uint32_t block_tokens = 128;  // must be 512 / length_factor
  uint32_t pool_blocks = 16'384;
  uint64_t seed = 42;
  uint64_t hash_seed = kDefaultHashSeed;
};

Status validate(const BuildOptions& o);

// Writes the corpus to `out_path` and returns its header.
Result<CorpusHeader> build_corpus(const Trace& trace, const std::string& trace_name,
                                  const BuildOptions& options, const std::string& out_path);

// The engine hash the builder gives a block (exposed for tests).
index::EngineHash engine_hash(index::EngineHash parent, uint64_t id);
inline constexpr index::EngineHash kRootEngineParent = 0x6b76676174650000ull;

}  // namespace kvgate::corpus
