// PositionalIndexer: the design the chain index replaces, kept as the baseline to measure against
// (`--kv-index positional`), made exact.
//
// One hash-map entry per block position, i.e. per sequence hash, listing the holders that hold
// it with their per-tier reference counts; a lookup probes it once per request block, in order,
// and stops at the first block no candidate holder still matches. Beside it, each holder's own
// map from engine hash to record (sequence hash, copy count per tier) resolves parents, removals
// and moves. Semantics: ReferenceIndexer.
//
// Threading: none; externally synchronized (make_synchronized() wraps it).
#pragma once

#include <array>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index {

class PositionalIndexer final : public Indexer {
 public:
  explicit PositionalIndexer(const IndexerOptions& options = {});

  // index::Indexer
  std::string_view name() const override { return "positional"; }
  Concurrency concurrency() const override { return {}; }
  ApplyResult apply(HolderId holder, std::span<const Event> events) override;
  void lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const override;
  void remove_holder(HolderId holder) override;
  IndexStats stats() const override;
  Status memberships(std::vector<Membership>& out) const override;
  Status holder_memberships(HolderId holder, std::vector<Membership>& out) const override;

 private:
  using TierCounts = std::array<uint32_t, kTierCount>;
  // One holder's hold on one sequence hash: per tier, how many of its records map here with a
  // copy on that tier.
  struct Holding {
    uint32_t holder;
    TierCounts refs;
  };
  // Sorted by holder id, so a lookup merges it with its sorted candidates.
  using Holdings = absl::InlinedVector<Holding, 1>;
  struct Record {
    SeqHash seq;
    TierCounts copies;
  };
  using Records = absl::flat_hash_map<EngineHash, Record>;

  void store(uint32_t holder, Records& records, const Event& e, ApplyResult& r);
  void remove(uint32_t holder, Records& records, const Event& e, ApplyResult& r);
  void drop_all(uint32_t holder, Records& records);
  void add_ref(SeqHash seq, uint32_t holder, size_t tier);
  void drop_ref(SeqHash seq, uint32_t holder, size_t tier);
  void drop_refs(SeqHash seq, uint32_t holder, const TierCounts& copies);
  static size_t heap_slots(const Holdings& h) { return h.capacity() > 1 ? h.capacity() : 0; }

  BlockHasher hasher_;
  absl::flat_hash_map<SeqHash, Holdings> blocks_;
  absl::flat_hash_map<uint32_t, Records> holders_;  // only holders with at least one record
  uint64_t memberships_ = 0;
  uint64_t heap_holding_slots_ = 0;  // Holding slots allocated outside blocks_' inline storage
};

}  // namespace kvgate::index
