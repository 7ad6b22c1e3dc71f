#include "kvgate/index/indexer.h"

#include <string>

#include "index/chain/chain_index.h"
#include "index/chain/sharded_index.h"
#include "index/positional_indexer.h"
#include "index/reference_indexer.h"

namespace kvgate::index {

std::string_view tier_name(Tier t) {
  switch (t) {
    case Tier::kDevice:
      return "device";
    case Tier::kHost:
      return "host";
    case Tier::kDisk:
      return "disk";
    case Tier::kExternal:
      return "external";
  }
  return "unknown";
}

ApplyResult& ApplyResult::operator+=(const ApplyResult& o) {
  stored_blocks += o.stored_blocks;
  removed_blocks += o.removed_blocks;
  orphan_events += o.orphan_events;
  orphan_blocks += o.orphan_blocks;
  unknown_removals += o.unknown_removals;
  moved_blocks += o.moved_blocks;
  malformed_events += o.malformed_events;
  clears += o.clears;
  return *this;
}

Status Indexer::memberships(std::vector<Membership>& out) const {
  out.clear();
  return absl::UnimplementedError(std::string(name()) + " cannot enumerate its memberships");
}

Status Indexer::holder_memberships(HolderId, std::vector<Membership>& out) const {
  out.clear();
  return absl::UnimplementedError(std::string(name()) + " cannot enumerate its memberships");
}

std::string_view index_kind_name(IndexKind k) {
  switch (k) {
    case IndexKind::kReference:
      return "reference";
    case IndexKind::kPositional:
      return "positional";
    case IndexKind::kChain:
      return "chain";
  }
  return "unknown";
}

Result<IndexKind> parse_index_kind(std::string_view s) {
  for (IndexKind k : {IndexKind::kReference, IndexKind::kPositional, IndexKind::kChain}) {
    if (s == index_kind_name(k)) return k;
  }
  return absl::InvalidArgumentError("unknown index kind '" + std::string(s) +
                                    "' (expected reference, positional or chain)");
}

Result<std::unique_ptr<Indexer>> make_indexer(IndexKind kind) {
  return make_indexer(kind, IndexerOptions{});
}

Result<std::unique_ptr<Indexer>> make_indexer(IndexKind kind, const IndexerOptions& options) {
  switch (kind) {
    case IndexKind::kReference:
      return std::unique_ptr<Indexer>(std::make_unique<ReferenceIndexer>(options));
    case IndexKind::kPositional:
      return std::unique_ptr<Indexer>(std::make_unique<PositionalIndexer>(options));
    case IndexKind::kChain:
      if (options.shard_memory_nodes.size() > 1) {
        return std::unique_ptr<Indexer>(
            chain::ShardedIndex::on_nodes(options.shard_memory_nodes, options));
      }
      if (options.shards > 1) {
        return std::unique_ptr<Indexer>(chain::ShardedIndex::chain_shards(options.shards, options));
      }
      return std::unique_ptr<Indexer>(std::make_unique<chain::ChainIndex>(options));
  }
  return absl::InvalidArgumentError("unknown index kind");
}

}  // namespace kvgate::index
