// EventOracle: the largest prefix any worker of the fleet holds, computed by the replay itself.
//
// It subscribes to every worker's KV-event streams with kvgate's own events module (EventIngest)
// into a chain index of its own, and answers per prompt: the deepest holder's matched blocks
// times the block size, capped at what an engine can reuse (vLLM and the mock always recompute
// the prompt's last token, so a prompt of n tokens reuses at most floor((n - 1) / bs) blocks).
//
// Bias (docs/replay.md): the index trails the engines by the events' latency (a step's batch
// leaves after the step, crosses ZMQ, then a lane applies it), the same lag the gateway has. A
// block stored in the last few milliseconds is missed by both, so the oracle is slightly low
// exactly where the router is blind too; and blocks stored between a request's arrival and its
// admission make cached > oracle possible.
//
// Threading: lookup() from any thread, concurrently with the event threads; stats() likewise.
// Construction and destruction from one control thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/result.h"

namespace kvgate::replay {

struct KvStream {
  std::string worker_url;
  uint32_t dp_rank = 0;
  std::string endpoint;         // PUB, tcp://host:port
  std::string replay_endpoint;  // ROUTER, empty: none
  std::string topic;
};

struct OracleOptions {
  uint32_t block_size = 16;  // the workers' KV block size
  uint64_t hash_seed = kDefaultHashSeed;
};

struct OracleStats {
  size_t holders = 0;
  uint64_t applied_batches = 0;
  uint64_t gaps = 0;
  uint64_t resyncs = 0;
  uint64_t backlogged = 0;
  size_t degraded_holders = 0;
  uint64_t resident_blocks = 0;
};

struct WorkerTokens {
  uint32_t worker = 0;  // index into the streams' distinct worker URLs, in order of appearance
  uint32_t rank = 0;    // the data-parallel rank (one KV cache)
  uint32_t tokens = 0;
};

class EventOracle {
 public:
  static Result<std::unique_ptr<EventOracle>> start(const std::vector<KvStream>& streams,
                                                    OracleOptions options);
  ~EventOracle();

  // Tokens of `prompt`'s longest prefix some holder holds now, capped as described above. With
  // `per_worker`, also each holder's (worker and rank) own figure (holders with nothing are left
  // out), which tells a routing miss (the chosen rank held less at arrival) from a loss while
  // queued.
  uint64_t lookup(std::span<const TokenId> prompt,
                  std::vector<WorkerTokens>* per_worker = nullptr) const;
  // The URL of a worker index lookup() reported.
  const std::string& worker_url(uint32_t worker) const;
  // Whether `url` is one of the workers whose streams this oracle follows (a disaggregated
  // fleet's decode workers are not).
  bool follows(std::string_view url) const;
  OracleStats stats() const;
  uint32_t block_size() const;

  class Impl;

 private:
  explicit EventOracle(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The cap: tokens of `matched_blocks` full blocks an engine can reuse for a prompt of
// `prompt_tokens` tokens.
uint64_t reusable_tokens(uint64_t matched_blocks, uint64_t prompt_tokens, uint32_t block_size);

}  // namespace kvgate::replay
