// FakeIndexer: an Indexer whose lookup answers are set by the test, for policy and gateway tests
// that need "holder H holds N blocks of this chain" without feeding events.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "kvgate/index/indexer.h"

namespace kvgate::fakes {

class FakeIndexer final : public index::Indexer {
 public:
  // Holder `h` holds the first `depth` blocks of any chain that starts with `first_block`, the
  // first `device_depth` of them on the device (all of them if not given).
  void set(SeqHash first_block, HolderId h, uint32_t depth, uint32_t device_depth = UINT32_MAX) {
    answers_[first_block][h] = {depth, std::min(depth, device_depth)};
  }
  void clear() { answers_.clear(); }
  mutable int lookups = 0;

  std::string_view name() const override { return "fake"; }
  index::Concurrency concurrency() const override { return {}; }
  index::ApplyResult apply(HolderId, std::span<const index::Event>) override { return {}; }
  void lookup(std::span<const SeqHash> chain, std::vector<index::HolderMatch>& out) const override {
    ++lookups;
    out.clear();
    if (chain.empty()) return;
    auto it = answers_.find(chain[0]);
    if (it == answers_.end()) return;
    for (const auto& [h, depths] : it->second) {
      const uint32_t d = std::min<uint32_t>(depths.first, static_cast<uint32_t>(chain.size()));
      const uint32_t device = std::min(d, depths.second);
      if (d > 0) out.push_back({.holder = h, .device_depth = device, .any_depth = d});
    }
  }
  void remove_holder(HolderId) override {}
  index::IndexStats stats() const override { return {}; }

 private:
  std::map<SeqHash, std::map<HolderId, std::pair<uint32_t, uint32_t>>> answers_;  // any, device
};

}  // namespace kvgate::fakes
