#include "kvgate/corpus/corpus_builder.h"

#include <cstring>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "kvgate/corpus/kv_pool.h"
#include "xxhash.h"

namespace kvgate::corpus {
namespace {

constexpr uint64_t kEngineSeed = 0x766c6c6dull;

// splitmix64: the worker draw must be the same on every platform for a given seed.
class WorkerDraw {
 public:
  explicit WorkerDraw(uint64_t seed) : state_(seed) {}
  uint32_t below(uint32_t n) {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<uint32_t>((static_cast<unsigned __int128>(z) * n) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

index::EngineHash engine_hash(index::EngineHash parent, uint64_t id) {
  const uint64_t words[2] = {parent, id};
  return XXH3_64bits_withSeed(words, sizeof(words), kEngineSeed);
}

Status validate(const BuildOptions& o) {
  if (o.workers == 0) return absl::InvalidArgumentError("--workers must be at least 1");
  if (o.duplication == 0) return absl::InvalidArgumentError("--duplication must be at least 1");
  if (o.length_factor == 0 || kTraceBlockTokens % o.length_factor != 0) {
    return absl::InvalidArgumentError("--length-factor must divide 512 (the trace's block size)");
  }
  if (o.block_tokens * o.length_factor != kTraceBlockTokens) {
    return absl::InvalidArgumentError("--block-tokens must be 512 / --length-factor (" +
                                      std::to_string(kTraceBlockTokens / o.length_factor) +
                                      " for length factor " + std::to_string(o.length_factor) +
                                      ")");
  }
  if (o.pool_blocks == 0) return absl::InvalidArgumentError("--pool-blocks must be at least 1");
  return absl::OkStatus();
}

Result<CorpusHeader> build_corpus(const Trace& trace, const std::string& trace_name,
                                  const BuildOptions& o, const std::string& out_path) {
  if (Status s = validate(o); !s.ok()) return s;
  auto writer = CorpusWriter::open(out_path);
  if (!writer.ok()) return writer.status();
  CorpusWriter& w = **writer;

  const BlockHasher hasher(o.hash_seed);
  WorkerDraw draw(o.seed);
  std::vector<KvPool> pools;
  pools.reserve(o.workers);
  for (uint32_t i = 0; i < o.workers; ++i) pools.emplace_back(o.pool_blocks);
  absl::flat_hash_set<SeqHash> distinct;
  std::vector<PoolBlock> blocks;
  std::vector<SeqHash> seqs;
  std::vector<index::EngineHash> stored_engine, evicted;
  std::vector<LocalHash> stored_local, locals;
  std::vector<index::Event> events;
  uint64_t requests = 0, resident = 0, peak = 0;

  for (const TraceRow& row : trace.rows) {
    for (uint32_t copy = 0; copy < o.duplication; ++copy) {
      blocks.clear();
      seqs.clear();
      locals.clear();
      index::EngineHash engine = kRootEngineParent;
      for (uint64_t h : row.hash_ids) {
        const uint64_t shifted = h + (trace.max_hash_id + 1) * copy;
        for (uint32_t j = 0; j < o.length_factor; ++j) {
          const uint64_t id = shifted * o.length_factor + j;
          const LocalHash local = XXH3_64bits_withSeed(&id, sizeof(id), o.hash_seed);
          const SeqHash seq = seqs.empty() ? local : hasher.chain(seqs.back(), local);
          engine = engine_hash(engine, id);
          seqs.push_back(seq);
          locals.push_back(local);
          blocks.push_back({seq, engine});
          distinct.insert(seq);
        }
      }
      ++requests;
      if (Status s = w.lookup(seqs); !s.ok()) return s;

      const uint32_t worker = draw.below(o.workers);
      evicted.clear();
      const KvPool::Outcome out = pools[worker].serve(blocks, evicted);
      events.clear();
      if (!evicted.empty()) {
        index::Event e;
        e.kind = index::EventKind::kRemoved;
        e.engine_hashes = evicted;
        events.push_back(e);
      }
      if (out.stored > 0) {
        stored_engine.clear();
        stored_local.clear();
        for (uint32_t i = out.matched; i < out.matched + out.stored; ++i) {
          stored_engine.push_back(blocks[i].engine);
          stored_local.push_back(locals[i]);
        }
        index::Event e;
        e.kind = index::EventKind::kStored;
        e.has_parent = out.matched > 0;
        e.parent = out.matched > 0 ? blocks[out.matched - 1].engine : 0;
        e.engine_hashes = stored_engine;
        e.local_hashes = stored_local;
        events.push_back(e);
      }
      if (!events.empty()) {
        if (Status s = w.batch(HolderId(worker), events); !s.ok()) return s;
      }
      resident += out.stored;
      resident -= evicted.size();
      peak = std::max(peak, resident);
    }
  }

  CorpusParams p;
  p.workers = o.workers;
  p.duplication = o.duplication;
  p.length_factor = o.length_factor;
  p.block_tokens = o.block_tokens;
  p.pool_blocks = o.pool_blocks;
  p.seed = o.seed;
  p.hash_seed = o.hash_seed;
  std::strncpy(p.trace, trace_name.c_str(), sizeof(p.trace) - 1);
  if (Status s = w.finish(p, requests, distinct.size(), peak, resident); !s.ok()) return s;
  CorpusHeader h{};
  h.params = p;
  h.totals = w.totals();
  return h;
}

}  // namespace kvgate::corpus
