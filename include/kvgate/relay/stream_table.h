// StreamTable: the engines a relay serves, by worker name, each with one RankStream per
// data-parallel rank. What ListWorkers answers and where Subscribe finds a rank.
//
// Threading: every method from any thread. Streams live as long as the table (workers are added,
// never removed, so a subscriber's RankStream pointer stays valid).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/result.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/relay/rank_stream.h"
#include "kvgate/relay/v1/relay.pb.h"

namespace kvgate::relay {

struct WorkerSpec {
  std::string name;         // what subscribers name it by (e.g. the engine's URL)
  std::string engine_url;   // its HTTP API
  std::string kv_endpoint;  // rank 0's event publisher
  uint32_t block_size = 0;
  uint32_t ranks = 1;
};

class StreamTable {
 public:
  StreamTable(HistoryLimits limits, uint64_t hash_seed = kDefaultHashSeed)
      : limits_(limits), hash_seed_(hash_seed) {}

  // The worker's streams, one per rank. ALREADY_EXISTS for a name in the table.
  Result<std::vector<RankStream*>> add(const WorkerSpec& spec);
  // nullptr when there is no such worker or rank.
  RankStream* find(std::string_view worker, uint32_t rank) const;
  bool has_worker(std::string_view worker) const;
  // "connecting", "live", "degraded": what ListWorkers says of the worker.
  void set_state(std::string_view worker, std::string state);
  void list(v1::ListWorkersResponse* out) const;

 private:
  struct Worker {
    WorkerSpec spec;
    std::string state = "connecting";
    std::vector<std::unique_ptr<RankStream>> ranks;
  };
  const HistoryLimits limits_;
  const uint64_t hash_seed_;
  mutable Mutex mu_;
  std::map<std::string, Worker, std::less<>> workers_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace kvgate::relay
