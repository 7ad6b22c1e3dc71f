// Copies of one block per storage tier, as the positional and reference indexers count them.
#pragma once

#include <array>
#include <cstdint>

#include "kvgate/index/indexer.h"

namespace kvgate::index::detail {

using TierCounts = std::array<uint32_t, kTierCount>;

inline bool any_copy(const TierCounts& c) {
  static_assert(kTierCount == 4, "any_copy() reads four tiers");
  return (c[0] | c[1] | c[2] | c[3]) != 0;
}

// The tiers holding at least one copy, as a Tier bit mask.
inline uint8_t mask_of(const TierCounts& c) {
  uint8_t m = 0;
  for (size_t t = 0; t < kTierCount; ++t) {
    if (c[t] > 0) m |= tier_bit(static_cast<Tier>(t));
  }
  return m;
}

}  // namespace kvgate::index::detail
