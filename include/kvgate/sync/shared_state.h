// What gateway replicas share through Redis, how it is keyed, and its wire form.
//
// Every entry is one key `kvgate:{NS}:<kind>:<id>` holding a small JSON document, written with a
// TTL its owner refreshes. The braces are a Redis Cluster hash tag: every key of a namespace lives
// in one slot, so one node's SCAN and MGET find them all.
//
//   worker:<url>     a worker in the fleet (who added it, when, its explicit KV endpoints);
//                    refreshed by every replica that has it registered
//   tomb:<url>       that worker was removed (by whom, when); outlives worker keys so a replica
//                    that still has the worker cannot bring it back
//   load:<replica>   one replica's requests in flight and queued prompt tokens per worker
//   hints:<replica>  the workers that replica saw fail (unhealthy, breaker open)
//   limits:<replica> how much each rate-limited client key asked of that replica lately (requests
//                    and tokens per second), from which every replica sets its share of each
//                    key's limit (app/limit_shares.h)
//   pred:<replica>/<epoch>/<seq>
//                    blocks that replica's approximate mode predicted cached on workers without
//                    KV events since its previous journal; written once, read by peers until
//                    its TTL, applied once each
//
// The fleet is the worker keys not shadowed by a tombstone at least as new (live_workers): a
// worker added again after its removal is newer than its tombstone and is back.
//
// Anything else under the namespace, or a value that is not ours, over the size limit or of the
// wrong shape, is a BadValue: counted and skipped, never applied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/ids.h"
#include "kvgate/workers/worker.h"

namespace kvgate::sync {

struct WorkerRecord {
  std::string url;
  std::vector<workers::KvEndpoint> kv_endpoints;  // given explicitly (empty: discovered)
  std::string added_by;                           // replica id
  int64_t added_at_ms = 0;                        // Unix time
  // Its role in a prefill/decode fleet and a prefill's bootstrap port (absent from a record:
  // regular, none).
  workers::WorkerRole role = workers::WorkerRole::kRegular;
  uint16_t bootstrap_port = 0;
  friend bool operator==(const WorkerRecord&, const WorkerRecord&) = default;
};

struct Tombstone {
  std::string url;
  std::string removed_by;
  int64_t removed_at_ms = 0;
  friend bool operator==(const Tombstone&, const Tombstone&) = default;
};

struct WorkerInflight {
  std::string url;
  int32_t in_flight = 0;
  uint64_t queued_prompt_tokens = 0;
  std::vector<std::pair<DpRank, int32_t>> ranks;  // in flight per pinned rank (non-zero ones)
  int64_t progress_ms = 0;  // when the replica last saw its generations progress (0: not lately)
  friend bool operator==(const WorkerInflight&, const WorkerInflight&) = default;
};

struct ReplicaLoad {
  std::string replica;
  int64_t at_ms = 0;  // when it was taken, Unix time
  std::vector<WorkerInflight> workers;
};

struct HealthHint {
  std::string url;
  bool unhealthy = false;
  bool breaker_open = false;
  friend bool operator==(const HealthHint&, const HealthHint&) = default;
};

struct ReplicaHints {
  std::string replica;
  int64_t at_ms = 0;
  std::vector<HealthHint> workers;
};

// One key's demand on a replica: per second, asked lately (admitted or refused).
struct LimitDemand {
  std::string id;  // the key's limit id (a hash, never the key)
  double requests = 0;
  double tokens = 0;
  friend bool operator==(const LimitDemand&, const LimitDemand&) = default;
};

struct ReplicaLimits {
  std::string replica;
  int64_t at_ms = 0;
  std::vector<LimitDemand> keys;
};

struct PredictionJournal {
  std::string replica;
  int64_t epoch_ms = 0;  // when the replica started: its journals count from 1 per epoch
  uint64_t seq = 0;
  std::vector<std::pair<std::string, std::vector<SeqHash>>> workers;  // URL -> blocks
  // Its key's id: "<replica>/<epoch>/<seq>".
  std::string id() const;
};

struct SharedState {
  std::vector<WorkerRecord> workers;
  std::vector<Tombstone> tombstones;
  std::vector<ReplicaLoad> loads;
  std::vector<ReplicaHints> hints;
  std::vector<PredictionJournal> predictions;
  std::vector<ReplicaLimits> limits;
};

// Whether tombstone `t` removes the worker as `r` added it: a removal at least as new as the add
// (an add after the removal is a new add).
inline bool removes(const Tombstone& t, const WorkerRecord& r) {
  return t.url == r.url && t.removed_at_ms >= r.added_at_ms;
}
// The workers of `state` that no tombstone removes.
std::vector<const WorkerRecord*> live_workers(const SharedState& state);

enum class EntryKind : uint8_t { kWorker, kTombstone, kLoad, kHints, kPredictions, kLimits };

// "kvgate:{NS}:" and "kvgate:{NS}:<kind>:<id>".
std::string key_prefix(std::string_view ns);
std::string entry_key(std::string_view ns, EntryKind kind, std::string_view id);

std::string encode(const WorkerRecord& r);
std::string encode(const Tombstone& t);
std::string encode(const ReplicaLoad& l);
std::string encode(const ReplicaHints& h);
std::string encode(const PredictionJournal& j);
std::string encode(const ReplicaLimits& l);

enum class BadValue : uint8_t { kTooLarge, kUnknownKey, kNotJson, kWrongShape, kCount };
const char* bad_value_name(BadValue b);

// Decodes one pulled key and value of namespace `ns` into `state`; why not when it is not an
// entry of ours (nothing is added then).
std::optional<BadValue> decode_entry(std::string_view ns, std::string_view key,
                                     std::string_view value, size_t max_value_bytes,
                                     SharedState& state);

}  // namespace kvgate::sync
