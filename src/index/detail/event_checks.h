// What every indexer agrees is an event it cannot apply at all (counted as malformed, skipped).
#pragma once

#include "kvgate/index/indexer.h"

namespace kvgate::index::detail {

inline bool valid_tier(Tier t) { return static_cast<size_t>(t) < kTierCount; }

// A stored event must name at least one block and give one local hash per engine hash; an event
// kind or tier outside the enums means the decoder handed over garbage. An empty removal is a
// harmless no-op, not malformed.
inline bool malformed(const Event& e) {
  switch (e.kind) {
    case EventKind::kStored:
      return !valid_tier(e.tier) || e.engine_hashes.empty() ||
             e.engine_hashes.size() != e.local_hashes.size();
    case EventKind::kRemoved:
      return !valid_tier(e.tier);
    case EventKind::kCleared:
      return false;
  }
  return true;
}

}  // namespace kvgate::index::detail
