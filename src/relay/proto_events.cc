#include "kvgate/relay/proto_events.h"

#include <string>

namespace kvgate::relay {

static_assert(v1::TIER_DEVICE == static_cast<int>(index::Tier::kDevice) &&
              v1::TIER_HOST == static_cast<int>(index::Tier::kHost) &&
              v1::TIER_DISK == static_cast<int>(index::Tier::kDisk) &&
              v1::TIER_EXTERNAL == static_cast<int>(index::Tier::kExternal) &&
              v1::Tier_ARRAYSIZE == index::kTierCount);

void to_proto(const index::Event& e, v1::Event* out) {
  out->Clear();
  switch (e.kind) {
    case index::EventKind::kStored:
      out->set_kind(v1::EVENT_KIND_STORED);
      break;
    case index::EventKind::kRemoved:
      out->set_kind(v1::EVENT_KIND_REMOVED);
      break;
    case index::EventKind::kCleared:
      out->set_kind(v1::EVENT_KIND_CLEARED);
      return;
  }
  out->set_tier(static_cast<v1::Tier>(e.tier));
  if (e.has_parent) {
    out->set_has_parent(true);
    out->set_parent(e.parent);
  }
  out->mutable_engine_hashes()->Add(e.engine_hashes.begin(), e.engine_hashes.end());
  out->mutable_local_hashes()->Add(e.local_hashes.begin(), e.local_hashes.end());
}

Status from_proto(const v1::Event& e, OwnedEvent* out) {
  switch (e.kind()) {
    case v1::EVENT_KIND_STORED:
      out->kind = index::EventKind::kStored;
      break;
    case v1::EVENT_KIND_REMOVED:
      out->kind = index::EventKind::kRemoved;
      break;
    case v1::EVENT_KIND_CLEARED:
      out->kind = index::EventKind::kCleared;
      break;
    default:
      return absl::InvalidArgumentError("relay event: unknown kind " + std::to_string(e.kind()));
  }
  if (e.tier() < 0 || static_cast<size_t>(e.tier()) >= index::kTierCount) {
    return absl::InvalidArgumentError("relay event: unknown tier " + std::to_string(e.tier()));
  }
  out->tier = static_cast<index::Tier>(e.tier());
  out->has_parent = e.has_parent();
  out->parent = e.parent();
  out->engine_hashes.assign(e.engine_hashes().begin(), e.engine_hashes().end());
  out->local_hashes.assign(e.local_hashes().begin(), e.local_hashes().end());
  return absl::OkStatus();
}

}  // namespace kvgate::relay
