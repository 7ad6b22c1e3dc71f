#include "mock/detail/oracle.h"

#include <algorithm>
#include <variant>

namespace kvgate::mock::detail {
namespace {
thread_local std::vector<SeqHash> tl_chain;
thread_local std::vector<index::HolderMatch> tl_matches;
}  // namespace

FleetOracle::FleetOracle(uint32_t block_size, uint64_t router_hash_seed)
    : block_size_(block_size),
      hasher_(router_hash_seed),
      index_(std::move(
          *index::make_indexer(index::IndexKind::kChain, {.hash_seed = router_hash_seed}))) {}

void FleetOracle::apply(uint32_t holder, const std::vector<events::WireEvent>& evs) {
  if (evs.empty()) return;
  // The index's events are views: keep their hash arrays alive for the call.
  std::vector<std::vector<index::EngineHash>> engine(evs.size());
  std::vector<std::vector<LocalHash>> local(evs.size());
  std::vector<index::Event> out;
  out.reserve(evs.size());
  for (size_t i = 0; i < evs.size(); ++i) {
    if (const auto* st = std::get_if<events::BlockStored>(&evs[i])) {
      engine[i] = st->block_hashes;
      const uint32_t bs = st->block_size ? st->block_size : block_size_;
      for (size_t b = 0; b < st->block_hashes.size() && (b + 1) * bs <= st->token_ids.size(); ++b) {
        local[i].push_back(hasher_.local(std::span(st->token_ids).subspan(b * bs, bs)));
      }
      out.push_back({.kind = index::EventKind::kStored,
                     .tier = index::Tier::kDevice,
                     .has_parent = st->parent.has_value(),
                     .parent = st->parent.value_or(0),
                     .engine_hashes = engine[i],
                     .local_hashes = local[i]});
    } else if (const auto* rm = std::get_if<events::BlockRemoved>(&evs[i])) {
      engine[i] = rm->block_hashes;
      out.push_back({.kind = index::EventKind::kRemoved,
                     .tier = index::Tier::kDevice,
                     .engine_hashes = engine[i]});
    } else {
      out.push_back({.kind = index::EventKind::kCleared});
    }
  }
  index_->apply(HolderId(holder), out);
}

void FleetOracle::clear(uint32_t holder) {
  const index::Event cleared{.kind = index::EventKind::kCleared};
  index_->apply(HolderId(holder), std::span(&cleared, 1));
}

uint32_t FleetOracle::best_prefix_tokens(std::span<const TokenId> prompt) const {
  if (prompt.empty()) return 0;
  std::vector<SeqHash>& chain = tl_chain;
  chain.clear();
  hasher_.hash_blocks(prompt, block_size_, nullptr, &chain);
  index_->lookup(chain, tl_matches);
  uint32_t best = 0;
  for (const auto& m : tl_matches) best = std::max(best, m.device_depth);
  // An engine always computes at least one token of the prompt.
  const uint32_t max_blocks = static_cast<uint32_t>((prompt.size() - 1) / block_size_);
  return std::min(best, max_blocks) * block_size_;
}

}  // namespace kvgate::mock::detail
