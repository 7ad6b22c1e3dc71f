#include "app/routing_input.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "kvgate/events/normalize.h"

namespace kvgate::app {
namespace {

thread_local std::vector<SeqHash> tl_chain;

}  // namespace

size_t RoutingInput::max_prompt_tokens(const workers::FleetSnapshot& fleet) const {
  return fleet.max_model_len > 0     ? fleet.max_model_len
         : config_.max_model_len > 0 ? config_.max_model_len
                                     : kNoTokenLimit;
}

policy::RouteRequest RoutingInput::route_request(const http::Request& req, const ParsedRequest& p,
                                                 std::span<const SeqHash> chain,
                                                 const workers::FleetSnapshot& fleet) const {
  return {.chain = chain,
          .prompt_tokens = static_cast<uint32_t>(p.tokens.size()),
          .block_size = block_size(fleet),
          .routing_key = req.header(config_.routing_key_header),
          .model = p.model,
          .dp_aware = config_.dp_aware};
}

const policy::CacheAwareConfig* RoutingInput::cost_model() const {
  return config_.policy == policy::PolicyKind::kCacheAware ? &config_.cache_aware : nullptr;
}

uint32_t RoutingInput::block_size(const workers::FleetSnapshot& fleet) const {
  return fleet.block_size ? fleet.block_size : config_.default_block_size;
}

std::span<const SeqHash> RoutingInput::prompt_chain(const ParsedRequest& p,
                                                    const workers::FleetSnapshot& fleet) const {
  // Salted as the engines salt LoRA and cache-salted blocks.
  const bool lora =
      std::binary_search(fleet.lora_adapters.begin(), fleet.lora_adapters.end(), p.model);
  const BlockHasher hasher = hasher_.salted(events::routing_salt(
      lora ? std::optional<std::string_view>(p.model) : std::nullopt,
      p.cache_salt.empty() ? std::nullopt : std::optional<std::string_view>(p.cache_salt)));
  std::vector<SeqHash>& chain = tl_chain;
  chain.clear();
  hasher.hash_blocks(p.tokens, block_size(fleet), nullptr, &chain);
  return chain;
}

}  // namespace kvgate::app
