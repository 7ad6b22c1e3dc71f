#include "kvgate/core/holder_ids.h"

namespace kvgate {

HolderId HolderIdAllocator::acquire(const HolderKey& key) {
  MutexLock lock(&mu_);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  // The lowest free id of the worker's class (ids of one class are classes_ apart).
  const uint32_t cls = key.worker.value() % classes_;
  uint32_t id = cls;
  while (id < keys_.size() && keys_[id].has_value()) id += classes_;
  if (id >= keys_.size()) keys_.resize(id + 1);
  keys_[id] = key;
  ids_.emplace(key, HolderId(id));
  return HolderId(id);
}

std::optional<HolderId> HolderIdAllocator::find(const HolderKey& key) const {
  MutexLock lock(&mu_);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  return std::nullopt;
}

std::optional<HolderKey> HolderIdAllocator::key_of(HolderId id) const {
  MutexLock lock(&mu_);
  if (!id.valid() || id.value() >= keys_.size()) return std::nullopt;
  return keys_[id.value()];
}

std::optional<HolderId> HolderIdAllocator::release(const HolderKey& key) {
  MutexLock lock(&mu_);
  auto it = ids_.find(key);
  if (it == ids_.end()) return std::nullopt;
  const HolderId id = it->second;
  ids_.erase(it);
  keys_[id.value()].reset();
  return id;
}

std::vector<HolderId> HolderIdAllocator::holders_of(WorkerId worker) const {
  MutexLock lock(&mu_);
  std::vector<HolderId> out;
  for (uint32_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] && keys_[i]->worker == worker) out.emplace_back(i);
  }
  return out;
}

uint32_t HolderIdAllocator::bound() const {
  MutexLock lock(&mu_);
  return static_cast<uint32_t>(keys_.size());
}

}  // namespace kvgate
