// ShardedIndex: one index per memory node, holders split between them.
//
// A holder lives in exactly one shard (holder id modulo the shard count), so the shards' holder
// sets are disjoint and a lookup is the union of the shards' answers, merged in holder order.
// With libnuma reporting several nodes, shard i allocates on node i % nodes and the lanes that
// apply its holders' events should run there; on one node the shards still split the write load.
//
// stats().resident_blocks is the exact union: with several shards it is counted by collecting the
// shards' resident hashes (briefly locking each run), so a stats() call costs O(resident blocks).
//
// Threading: as ChainIndex (lookups concurrent with everything, writers per holder).
#pragma once

#include <memory>
#include <vector>

#include "index/chain/chain_index.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index::chain {

class ShardedIndex final : public Indexer {
 public:
  explicit ShardedIndex(std::vector<std::unique_ptr<ChainIndex>> shards);
  // `count` chain indexes, one per NUMA node in turn.
  static std::unique_ptr<ShardedIndex> chain_shards(uint32_t count, const IndexerOptions& options);
  // One chain index per entry of `memory_nodes`, allocating on that libnuma node (-1: anywhere).
  static std::unique_ptr<ShardedIndex> on_nodes(const std::vector<int>& memory_nodes,
                                                const IndexerOptions& options);

  size_t shard_count() const { return shards_.size(); }
  size_t shard_of(HolderId h) const { return h.value() % shards_.size(); }
  const ChainIndex& shard(size_t i) const { return *shards_[i]; }

  // index::Indexer
  std::string_view name() const override { return name_; }
  Concurrency concurrency() const override { return concurrency_; }
  ApplyResult apply(HolderId holder, std::span<const Event> events) override;
  void lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const override;
  void remove_holder(HolderId holder) override;
  void expect_capacity(HolderId holder, uint64_t blocks) override;
  IndexStats stats() const override;
  Status memberships(std::vector<Membership>& out) const override;
  Status holder_memberships(HolderId holder, std::vector<Membership>& out) const override;

 private:
  std::vector<std::unique_ptr<ChainIndex>> shards_;
  std::string name_;
  Concurrency concurrency_;
};

}  // namespace kvgate::index::chain
