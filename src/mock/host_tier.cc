#include "mock/detail/host_tier.h"

namespace kvgate::mock::detail {

bool HostTier::copy_in(const BlockMeta& meta) {
  if (auto it = where_.find(meta.hash); it != where_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return false;
  }
  lru_.push_front(meta);
  where_.emplace(meta.hash, lru_.begin());
  return true;
}

void HostTier::touch(events::EngineHash hash) {
  if (auto it = where_.find(hash); it != where_.end()) lru_.splice(lru_.begin(), lru_, it->second);
}

void HostTier::trim(std::vector<events::EngineHash>* out) {
  while (lru_.size() > capacity_) {
    out->push_back(lru_.back().hash);
    where_.erase(lru_.back().hash);
    lru_.pop_back();
  }
}

void HostTier::clear() {
  lru_.clear();
  where_.clear();
}

}  // namespace kvgate::mock::detail
