#include "kube/pod_set.h"

namespace kvgate::kube::detail {

void PodSet::upsert(Pod pod) {
  const auto it = index_.find(KeyView(pod.namespace_name, pod.name));
  if (it != index_.end()) {
    pods_[it->second] = std::move(pod);
    return;
  }
  index_.emplace(Key{pod.namespace_name, pod.name}, pods_.size());
  pods_.push_back(std::move(pod));
}

bool PodSet::erase(std::string_view namespace_name, std::string_view name) {
  const auto it = index_.find(KeyView(namespace_name, name));
  if (it == index_.end()) return false;
  const size_t hole = it->second;
  index_.erase(it);
  if (hole + 1 != pods_.size()) {
    pods_[hole] = std::move(pods_.back());
    index_.find(KeyView(pods_[hole].namespace_name, pods_[hole].name))->second = hole;
  }
  pods_.pop_back();
  return true;
}

void PodSet::replace(std::vector<Pod> pods) {
  pods_.clear();
  index_.clear();
  for (Pod& pod : pods) upsert(std::move(pod));
}

}  // namespace kvgate::kube::detail
