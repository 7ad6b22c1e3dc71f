// Normalization: one decoded batch of one holder (worker, dp rank) into the index's event model
// (index::Event), with the router's local hash of every stored block.
//
// Rules (docs/events.md has the reasoning):
//   * Local hashes: BlockHasher::local() of each block's token ids (pairs folded by
//     pair_token()), salted by routing_salt(lora_name, cache_salt); the index derives sequence
//     hashes from the parent itself.
//   * Tier from `medium`: nil / GPU -> device; CPU, CPU_PINNED -> host; DISK -> disk; EXTERNAL
//     and unknown strings -> external (unknown counted).
//   * Block size: learned per holder from its stores; a change is logged and counted, and the
//     new size is used from then on.
//   * KV-cache groups (hybrid models): a group is full-attention unless its kv_cache_spec_kind
//     names another kind or it has a sliding window. Once a full-attention group is present, the
//     events of every other group are dropped (kSlidingWindowGroup). Until then (no group_idx, or
//     only window groups) every group's events apply: window groups publish their own removals,
//     so the index stays exact for what they hold. When the first full-attention group appears
//     after window-group events were applied, the batch starts with a clear of the holder (those
//     window blocks would otherwise never be removed).
//   * vLLM names a request's cache salt only in the extra keys of its block 0: a store that
//     continues a chain without naming a salt inherits its parent's (a bounded map of salted
//     blocks per holder; an evicted parent leaves the continuation unsalted).
//   * Stores whose token count is not block_size per hash, and stores/removals without hashes,
//     are dropped with a reason.
//
// Threading: a Normalizer holds one holder's state and is used by one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/core/clock.h"
#include "kvgate/core/ids.h"
#include "kvgate/events/decode.h"
#include "kvgate/index/indexer.h"

namespace kvgate::events {

// The salt of a block's router local hash: "" (unsalted) without LoRA name and cache salt, else
// "lora=<name>" and/or "salt=<salt>" joined by '\x1f'. The request side salts its BlockHasher
// with the same string so that its chain meets the stored blocks.
std::string routing_salt(std::optional<std::string_view> lora_name,
                         std::optional<std::string_view> cache_salt);

// The tier a `medium` string names; `known` is false for strings outside the documented set.
index::Tier tier_of_medium(std::optional<std::string_view> medium, bool* known = nullptr);

// One holder's batch in the index's model. Owns the buffers its events' spans point into (moving
// the batch keeps them valid; copying does not, so it is move-only).
struct NormalizedBatch {
  HolderKey key;
  HolderId holder;
  uint64_t seq = 0;
  double ts = 0;  // publisher's wall clock (0: unknown)
  bool replayed = false;
  // Clear the holder before applying (a resync or publisher restart decided by the cursor).
  bool clear_first = false;
  // Only the clear: no admitted batch behind it (a restart or resync's own clear).
  bool clear_only = false;
  std::vector<index::Event> events;
  std::vector<EngineHash> engine_hashes;
  std::vector<LocalHash> local_hashes;
  uint32_t stored_blocks = 0;
  DropCounts dropped{};  // decode and normalization drops of this batch

  NormalizedBatch() = default;
  NormalizedBatch(NormalizedBatch&&) = default;
  NormalizedBatch& operator=(NormalizedBatch&&) = default;
  NormalizedBatch(const NormalizedBatch&) = delete;
  NormalizedBatch& operator=(const NormalizedBatch&) = delete;

  void clear();
};

struct NormalizerStats {
  uint64_t block_size_changes = 0;
  uint64_t unknown_mediums = 0;
  uint64_t group_policy_clears = 0;
};

class Normalizer {
 public:
  explicit Normalizer(uint64_t hash_seed = kDefaultHashSeed, size_t max_salted_blocks = 65536)
      : hasher_(hash_seed), max_salted_blocks_(max_salted_blocks) {}

  // Fills `out` (its events and buffers cleared first; key, seq and flags left to the caller)
  // from `in`, adding normalization drops to out->dropped on top of the decode drops.
  void normalize(const DecodedBatch& in, NormalizedBatch* out);

  // Forgets per-holder chain state (salts of stored blocks): the holder was cleared.
  void reset_chains();

  // The block size learned from this holder's stores (0 until the first store).
  uint32_t block_size() const { return block_size_; }
  const NormalizerStats& stats() const { return stats_; }

 private:
  bool group_allowed(const DecodedEvent& e) const;

  BlockHasher hasher_;
  // The last salt's hasher, reused while consecutive stores share a salt.
  std::string salt_;
  BlockHasher salted_;
  bool salted_valid_ = false;
  uint32_t block_size_ = 0;
  // group_idx -> full-attention?
  absl::flat_hash_map<int64_t, bool> groups_;
  bool full_group_seen_ = false;
  bool window_applied_ = false;
  NormalizerStats stats_;
  size_t max_salted_blocks_;
  absl::flat_hash_map<std::string, uint32_t> salt_ids_;
  std::vector<std::string> salts_;
  absl::flat_hash_map<EngineHash, uint32_t> salt_of_;  // salted block -> index in salts_
  std::deque<EngineHash> salt_order_;                  // FIFO eviction of salt_of_
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // per event: (hash offset, count)
};

}  // namespace kvgate::events
