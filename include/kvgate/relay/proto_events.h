// Index events to and from the relay's wire messages (kvgate.relay.v1.Event).
//
// Threading: pure functions.
#pragma once

#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/index/indexer.h"
#include "kvgate/relay/v1/relay.pb.h"

namespace kvgate::relay {

// An event that owns its hashes (index::Event only views them).
struct OwnedEvent {
  index::EventKind kind = index::EventKind::kCleared;
  index::Tier tier = index::Tier::kDevice;
  bool has_parent = false;
  index::EngineHash parent = 0;
  std::vector<index::EngineHash> engine_hashes;
  std::vector<LocalHash> local_hashes;

  index::Event view() const {
    return {.kind = kind,
            .tier = tier,
            .has_parent = has_parent,
            .parent = parent,
            .engine_hashes = engine_hashes,
            .local_hashes = local_hashes};
  }
};

void to_proto(const index::Event& e, v1::Event* out);
// INVALID_ARGUMENT for a kind or tier this build does not know (a newer relay's).
Status from_proto(const v1::Event& e, OwnedEvent* out);

}  // namespace kvgate::relay
