// The KV index: which holder (worker, dp rank) holds how much of a request's prefix.
//
// Fed by the engines' stored / removed / cleared events, asked per request for the matched depth
// of the request's chain of sequence hashes. Every implementation gives exactly the answers of
// ReferenceIndexer after any sequence of events (docs/index.md states the semantics; the
// exactness harness in tests/index/ checks them).
//
// Threading: see Indexer::concurrency(). An indexer that does not advertise concurrent use must
// be externally synchronized (make_synchronized() wraps one in a reader-writer lock).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/ids.h"
#include "kvgate/core/result.h"

namespace kvgate::index {

// An engine's block hash, normalized to 64 bits by the event decoder.
using EngineHash = uint64_t;

// Where a copy of a block lives. Decoders map the engines' open `medium` strings onto these.
enum class Tier : uint8_t { kDevice = 0, kHost = 1, kDisk = 2, kExternal = 3 };
inline constexpr size_t kTierCount = 4;
std::string_view tier_name(Tier t);

enum class EventKind : uint8_t { kStored, kRemoved, kCleared };

// One event of a holder's batch: a view into the caller's buffers, valid during apply().
struct Event {
  EventKind kind = EventKind::kCleared;
  Tier tier = Tier::kDevice;
  // kStored: whether the first block continues a chain (parent names the engine hash of the
  // block before it) or starts a sequence at position 0.
  bool has_parent = false;
  EngineHash parent = 0;
  std::span<const EngineHash> engine_hashes;  // kStored and kRemoved
  std::span<const LocalHash> local_hashes;    // kStored: the router's local hash of each block
};

// What every indexer agrees is an event it cannot apply at all (counted as malformed, skipped):
// a stored event must name at least one block and give one local hash per engine hash; an event
// kind or tier outside the enums means the decoder handed over garbage. An empty removal is a
// harmless no-op, not malformed.
inline bool malformed_event(const Event& e) {
  const bool tier_ok = static_cast<size_t>(e.tier) < kTierCount;
  switch (e.kind) {
    case EventKind::kStored:
      return !tier_ok || e.engine_hashes.empty() || e.engine_hashes.size() != e.local_hashes.size();
    case EventKind::kRemoved:
      return !tier_ok;
    case EventKind::kCleared:
      return false;
  }
  return true;
}

// What one apply() did, for the caller's counters.
struct ApplyResult {
  uint32_t stored_blocks = 0;     // block copies added (new memberships and extra copies)
  uint32_t removed_blocks = 0;    // block copies removed
  uint32_t orphan_events = 0;     // stored events dropped whole: the holder lacks the parent
  uint32_t orphan_blocks = 0;     // blocks in those events
  uint32_t unknown_removals = 0;  // removed hashes the holder did not hold on that tier
  uint32_t moved_blocks = 0;      // engine hashes re-stored at a different place
  uint32_t malformed_events = 0;  // e.g. engine and local hash counts differ (event dropped)
  uint32_t clears = 0;

  ApplyResult& operator+=(const ApplyResult& o);
  friend bool operator==(const ApplyResult&, const ApplyResult&) = default;
};

// A holder's block copies after an apply, kept from the results alone by whoever feeds it: a clear
// inside the batch restarts the count (what the batch stored after the clear is then not told
// apart, so it is an estimate for routing, not the index's exact content).
inline uint64_t blocks_after(uint64_t held, const ApplyResult& r) {
  const int64_t blocks = (r.clears > 0 ? 0 : static_cast<int64_t>(held)) +
                         static_cast<int64_t>(r.stored_blocks) -
                         static_cast<int64_t>(r.removed_blocks);
  return blocks > 0 ? static_cast<uint64_t>(blocks) : 0;
}

// One holder's answer to a lookup. Only holders with any_depth > 0 are reported.
struct HolderMatch {
  HolderId holder;
  uint32_t device_depth = 0;  // leading blocks held on the device tier
  uint32_t any_depth = 0;     // leading blocks held on some tier (>= device_depth)
  friend bool operator==(const HolderMatch&, const HolderMatch&) = default;
};

struct IndexStats {
  uint64_t holders = 0;          // holders with at least one block
  uint64_t resident_blocks = 0;  // distinct sequence hashes held by at least one holder
  uint64_t memberships = 0;      // (holder, sequence hash) pairs held on some tier
  uint64_t bytes = 0;            // bytes the index's structures hold, as the index counts them
};

// One (holder, sequence hash) pair held on some tier: the index's content, as the exactness
// harness compares it.
struct Membership {
  HolderId holder;
  SeqHash seq = 0;
  uint8_t tier_mask = 0;  // bit t set: the holder has a copy on Tier t
  friend bool operator==(const Membership&, const Membership&) = default;
};

inline constexpr uint8_t tier_bit(Tier t) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(t));
}

struct Concurrency {
  // lookup() may run on any number of threads concurrently with apply()/remove_holder().
  bool lookups_concurrent_with_writes = false;
  // apply() may run concurrently for different holders (one thread per holder at a time).
  bool writers_per_holder = false;
};

// The largest pool Indexer::expect_capacity believes (no GPU holds more blocks; a table sized for
// a bogus larger figure would take gigabytes): above it, structures grow as the cache fills.
inline constexpr uint64_t kMaxCapacityHint = uint64_t{1} << 24;

class Indexer {
 public:
  virtual ~Indexer() = default;

  virtual std::string_view name() const = 0;
  virtual Concurrency concurrency() const = 0;

  // Applies one holder's events in order. Never fails as a whole: a bad event is counted in the
  // result and skipped, the rest of the batch still applies.
  virtual ApplyResult apply(HolderId holder, std::span<const Event> events) = 0;

  // Fills `out` (cleared first, capacity reused) with each holder's matched depth of `chain`,
  // sorted by holder id.
  virtual void lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const = 0;

  // Forgets everything the holder held; its id may be reused afterwards.
  virtual void remove_holder(HolderId holder) = 0;

  // A hint: the holder's KV cache holds about `blocks` blocks (its engine's pool, per rank), so an
  // indexer may size its per-holder structures for that now rather than grow them while the cache
  // fills (each growth a rehash on the writer's path). Hints above kMaxCapacityHint are ignored.
  // A write for that holder: the same threading as apply(). The default ignores it.
  virtual void expect_capacity(HolderId holder, uint64_t blocks) {
    (void)holder;
    (void)blocks;
  }

  virtual IndexStats stats() const = 0;

  // Debug and test only (the exactness harness compares content with them), never a hot path.
  // Fill `out` (cleared first) with every membership, sorted by holder then sequence hash; the
  // second form with one holder's. An indexer that cannot enumerate its content returns
  // kUnimplemented (the default).
  virtual Status memberships(std::vector<Membership>& out) const;
  virtual Status holder_memberships(HolderId holder, std::vector<Membership>& out) const;
};

enum class IndexKind { kReference, kPositional, kChain };
std::string_view index_kind_name(IndexKind k);
Result<IndexKind> parse_index_kind(std::string_view s);

struct IndexerOptions {
  // Seed of the BlockHasher whose chain step derives stored blocks' sequence hashes; must be the
  // router's (the step is unsalted, so LoRA and namespace salts need no index option).
  uint64_t hash_seed = kDefaultHashSeed;
  // kChain: independent shards, holder h in shard h % shards (one per NUMA node where libnuma
  // reports several). 1: a single chain index.
  uint32_t shards = 1;
  // kChain: when not empty, one shard per entry (overriding `shards`), shard i's memory on
  // libnuma node shard_memory_nodes[i] (-1: not bound): the gateway's per-node shards.
  std::vector<int> shard_memory_nodes;
};

// A new, empty indexer of the given kind.
Result<std::unique_ptr<Indexer>> make_indexer(IndexKind kind);
Result<std::unique_ptr<Indexer>> make_indexer(IndexKind kind, const IndexerOptions& options);

// Wraps an indexer that is not safe for concurrent use so that lookups share a reader lock and
// writes take it exclusively. Indexers that are already concurrent are returned unchanged.
std::unique_ptr<Indexer> make_synchronized(std::unique_ptr<Indexer> inner);

}  // namespace kvgate::index
