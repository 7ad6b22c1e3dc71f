#include "index/chain/sharded_index.h"

#include <numa.h>

#include <algorithm>

#include "absl/container/flat_hash_set.h"

#include "index/chain/chain_index.h"

namespace kvgate::index::chain {
namespace {
thread_local std::vector<HolderMatch> tl_shard_out;
thread_local std::vector<HolderMatch> tl_merged;
}  // namespace

ShardedIndex::ShardedIndex(std::vector<std::unique_ptr<ChainIndex>> shards)
    : shards_(std::move(shards)) {
  name_ = std::string(shards_.at(0)->name()) + "x" + std::to_string(shards_.size());
  concurrency_ = shards_[0]->concurrency();
  for (const auto& s : shards_) {
    concurrency_.lookups_concurrent_with_writes &= s->concurrency().lookups_concurrent_with_writes;
    concurrency_.writers_per_holder &= s->concurrency().writers_per_holder;
  }
}

std::unique_ptr<ShardedIndex> ShardedIndex::chain_shards(uint32_t count,
                                                         const IndexerOptions& options) {
  const int nodes = numa_available() >= 0 ? numa_num_configured_nodes() : 1;
  std::vector<int> memory_nodes;
  for (uint32_t i = 0; i < std::max<uint32_t>(count, 1); ++i) {
    memory_nodes.push_back(nodes > 1 ? static_cast<int>(i % static_cast<uint32_t>(nodes)) : -1);
  }
  return on_nodes(memory_nodes, options);
}

std::unique_ptr<ShardedIndex> ShardedIndex::on_nodes(const std::vector<int>& memory_nodes,
                                                     const IndexerOptions& options) {
  std::vector<std::unique_ptr<ChainIndex>> shards;
  for (int node : memory_nodes) shards.push_back(std::make_unique<ChainIndex>(options, node));
  if (shards.empty()) shards.push_back(std::make_unique<ChainIndex>(options, -1));
  return std::make_unique<ShardedIndex>(std::move(shards));
}

ApplyResult ShardedIndex::apply(HolderId holder, std::span<const Event> events) {
  return shards_[shard_of(holder)]->apply(holder, events);
}

void ShardedIndex::remove_holder(HolderId holder) {
  shards_[shard_of(holder)]->remove_holder(holder);
}

void ShardedIndex::expect_capacity(HolderId holder, uint64_t blocks) {
  shards_[shard_of(holder)]->expect_capacity(holder, blocks);
}

void ShardedIndex::lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const {
  shards_[0]->lookup(chain, out);
  for (size_t i = 1; i < shards_.size(); ++i) {
    shards_[i]->lookup(chain, tl_shard_out);
    if (tl_shard_out.empty()) continue;
    tl_merged.clear();
    std::merge(out.begin(), out.end(), tl_shard_out.begin(), tl_shard_out.end(),
               std::back_inserter(tl_merged),
               [](const HolderMatch& a, const HolderMatch& b) { return a.holder < b.holder; });
    out.swap(tl_merged);
  }
}

IndexStats ShardedIndex::stats() const {
  IndexStats total;
  for (const auto& s : shards_) {
    const IndexStats one = s->stats();
    total.holders += one.holders;
    total.memberships += one.memberships;
    total.bytes += one.bytes;
    total.resident_blocks += one.resident_blocks;
  }
  if (shards_.size() > 1) {
    // A block held by holders of two shards is resident once: count the union.
    absl::flat_hash_set<SeqHash> resident;
    resident.reserve(total.resident_blocks);
    for (const auto& s : shards_) s->collect_resident(resident);
    total.resident_blocks = resident.size();
  }
  return total;
}

Status ShardedIndex::memberships(std::vector<Membership>& out) const {
  out.clear();
  std::vector<Membership> one;
  for (const auto& s : shards_) {
    if (Status st = s->memberships(one); !st.ok()) return st;
    out.insert(out.end(), one.begin(), one.end());
  }
  std::sort(out.begin(), out.end(), [](const Membership& a, const Membership& b) {
    return a.holder != b.holder ? a.holder < b.holder : a.seq < b.seq;
  });
  return absl::OkStatus();
}

Status ShardedIndex::holder_memberships(HolderId holder, std::vector<Membership>& out) const {
  return shards_[shard_of(holder)]->holder_memberships(holder, out);
}

}  // namespace kvgate::index::chain
