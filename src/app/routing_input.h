// What a routing decision is asked from a parsed request: the prompt's bound, its block chain at
// the fleet's block size (salted as the engines salt), and the routing request. The generation
// pipeline and /debug/route ask it the same way.
//
// Threading: const methods from any thread; prompt_chain() returns a view of a per-thread buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "app/request_model.h"
#include "kvgate/app/config.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/http/message.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {

class RoutingInput {
 public:
  RoutingInput(const GatewayConfig& config, BlockHasher hasher)
      : config_(config), hasher_(hasher) {}

  // The longest prompt any worker takes (the longest context served), or kNoTokenLimit.
  size_t max_prompt_tokens(const workers::FleetSnapshot& fleet) const;
  // The block size requests are hashed at.
  uint32_t block_size(const workers::FleetSnapshot& fleet) const;
  // `p`'s block chain at block_size() (a view of a per-thread buffer, valid until this thread's
  // next call).
  std::span<const SeqHash> prompt_chain(const ParsedRequest& p,
                                        const workers::FleetSnapshot& fleet) const;
  // The routing request for `p` (its `chain` kept alive by the caller).
  policy::RouteRequest route_request(const http::Request& req, const ParsedRequest& p,
                                     std::span<const SeqHash> chain,
                                     const workers::FleetSnapshot& fleet) const;
  // cache_aware's cost model (expected waits in explanations), or null for other policies.
  const policy::CacheAwareConfig* cost_model() const;

 private:
  const GatewayConfig& config_;
  const BlockHasher hasher_;
};

}  // namespace kvgate::app
