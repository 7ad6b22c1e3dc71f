// PodSet: the pods a watcher holds, in one vector the handler reads as it is (no copy per change),
// with an index by (namespace, name). Removal moves the last pod into the hole, so the order is
// not kept.
//
// Threading: one thread (the watcher's).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "kvgate/kube/pod.h"

namespace kvgate::kube::detail {

class PodSet {
 public:
  // Inserts the pod or replaces the one of its namespace and name.
  void upsert(Pod pod);
  // Removes the pod of that namespace and name; whether there was one.
  bool erase(std::string_view namespace_name, std::string_view name);
  // Replaces everything (a list's answer).
  void replace(std::vector<Pod> pods);

  const std::vector<Pod>& pods() const { return pods_; }
  size_t size() const { return pods_.size(); }

 private:
  struct Key {
    std::string namespace_name;
    std::string name;
  };
  using KeyView = std::pair<std::string_view, std::string_view>;
  struct Hash {
    using is_transparent = void;
    size_t operator()(const KeyView& k) const { return absl::HashOf(k.first, k.second); }
    size_t operator()(const Key& k) const { return (*this)(KeyView(k.namespace_name, k.name)); }
  };
  struct Eq {
    using is_transparent = void;
    static KeyView view(const Key& k) { return {k.namespace_name, k.name}; }
    static KeyView view(const KeyView& k) { return k; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return view(a) == view(b);
    }
  };

  std::vector<Pod> pods_;
  absl::flat_hash_map<Key, size_t, Hash, Eq> index_;
};

}  // namespace kvgate::kube::detail
