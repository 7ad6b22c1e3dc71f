#include "kvgate/relay/block_set.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace kvgate::relay {
namespace {

bool any_copy(const std::array<uint32_t, index::kTierCount>& c) {
  return std::any_of(c.begin(), c.end(), [](uint32_t n) { return n > 0; });
}

// A ghost's name in a snapshot: derived from its place, so a snapshot is the same every time,
// and moved off any engine hash the rank holds.
EngineHash ghost_name(SeqHash seq, const absl::flat_hash_set<EngineHash>& taken) {
  EngineHash name = seq ^ 0x6b76676174652d67ull;  // "kvgate-g"
  while (taken.contains(name)) name = name * 0x9E3779B97F4A7C15ull + 1;
  return name;
}

}  // namespace

index::ApplyResult BlockSet::apply(std::span<const index::Event> events) {
  index::ApplyResult r;
  for (const index::Event& e : events) {
    if (index::malformed_event(e)) {
      ++r.malformed_events;
      continue;
    }
    switch (e.kind) {
      case index::EventKind::kStored:
        store(e, r);
        break;
      case index::EventKind::kRemoved:
        remove(e, r);
        break;
      case index::EventKind::kCleared:
        clear();
        ++r.clears;
        break;
    }
  }
  return r;
}

void BlockSet::clear() {
  records_.clear();
  nodes_.clear();
  copies_ = 0;
}

size_t BlockSet::ghosts() const {
  return static_cast<size_t>(std::count_if(nodes_.begin(), nodes_.end(),
                                           [](const auto& n) { return n.second.names == 0; }));
}

void BlockSet::store(const index::Event& e, index::ApplyResult& r) {
  const size_t n = e.engine_hashes.size();
  SeqHash prev = 0;
  if (e.has_parent) {
    auto parent = records_.find(e.parent);
    if (parent == records_.end()) {
      ++r.orphan_events;
      r.orphan_blocks += n;
      return;
    }
    prev = parent->second.seq;
  }
  const size_t tier = static_cast<size_t>(e.tier);
  for (size_t i = 0; i < n; ++i) {
    const bool root = i == 0 && !e.has_parent;
    const SeqHash seq = root ? e.local_hashes[0] : hasher_.chain(prev, e.local_hashes[i]);
    auto [it, inserted] = records_.try_emplace(e.engine_hashes[i]);
    Record& rec = it->second;
    if (!inserted && rec.seq != seq) {
      // Latest store wins: the engine hash now names a block at another place.
      ++r.moved_blocks;
      for (uint32_t c : rec.copies) copies_ -= c;
      const SeqHash old = rec.seq;
      rec = Record{};
      rec.seq = seq;
      name(seq, root, prev, e.local_hashes[i]);
      unname(old);  // after naming the new place: the old one may lead to it
    } else if (inserted) {
      rec.seq = seq;
      name(seq, root, prev, e.local_hashes[i]);
    }
    ++rec.copies[tier];
    ++copies_;
    ++r.stored_blocks;
    prev = seq;
  }
}

void BlockSet::remove(const index::Event& e, index::ApplyResult& r) {
  const size_t tier = static_cast<size_t>(e.tier);
  for (const EngineHash eh : e.engine_hashes) {
    auto it = records_.find(eh);
    if (it == records_.end() || it->second.copies[tier] == 0) {
      ++r.unknown_removals;
      continue;
    }
    --it->second.copies[tier];
    --copies_;
    ++r.removed_blocks;
    if (!any_copy(it->second.copies)) {
      const SeqHash seq = it->second.seq;
      records_.erase(it);
      unname(seq);
    }
  }
}

void BlockSet::name(SeqHash seq, bool root, SeqHash parent, LocalHash local) {
  auto [it, inserted] = nodes_.try_emplace(seq);
  if (inserted) {
    it->second.root = root;
    it->second.parent = root ? 0 : parent;
    it->second.local = local;
    if (!root) ++nodes_.at(parent).children;
  }
  ++it->second.names;
}

void BlockSet::unname(SeqHash seq) {
  auto it = nodes_.find(seq);
  --it->second.names;
  // Walk up while nothing is at or below the place any more.
  while (it->second.names == 0 && it->second.children == 0) {
    const bool root = it->second.root;
    const SeqHash parent = it->second.parent;
    nodes_.erase(it);
    if (root) return;
    it = nodes_.find(parent);
    --it->second.children;
  }
}

void BlockSet::snapshot(absl::FunctionRef<void(const index::Event&)> emit,
                        size_t max_blocks_per_event) const {
  max_blocks_per_event = std::max<size_t>(1, max_blocks_per_event);
  // Children per place and the records at each place, in a fixed order.
  std::vector<std::pair<SeqHash, SeqHash>> edges;  // (parent, child)
  std::vector<SeqHash> roots;
  edges.reserve(nodes_.size());
  for (const auto& [seq, node] : nodes_) {
    if (node.root) {
      roots.push_back(seq);
    } else {
      edges.emplace_back(node.parent, seq);
    }
  }
  std::sort(edges.begin(), edges.end());
  std::sort(roots.begin(), roots.end());
  std::vector<std::pair<SeqHash, EngineHash>> at;  // (place, engine hash)
  at.reserve(records_.size());
  absl::flat_hash_set<EngineHash> taken;  // names in use: the records', then the ghosts'
  taken.reserve(records_.size());
  for (const auto& [eh, rec] : records_) {
    at.emplace_back(rec.seq, eh);
    taken.insert(eh);
  }
  std::sort(at.begin(), at.end());
  absl::flat_hash_map<SeqHash, EngineHash> name_of;  // the name each place is stored under
  name_of.reserve(nodes_.size());
  std::vector<EngineHash> ghost_names;

  // One stored event being built: blocks that each continue the one before, on one tier.
  index::Tier open_tier = index::Tier::kDevice;
  bool open_has_parent = false;
  EngineHash open_parent = 0;
  std::vector<EngineHash> engine;
  std::vector<LocalHash> local;
  const auto flush = [&] {
    if (engine.empty()) return;
    index::Event e{.kind = index::EventKind::kStored,
                   .tier = open_tier,
                   .has_parent = open_has_parent,
                   .parent = open_parent,
                   .engine_hashes = engine,
                   .local_hashes = local};
    emit(e);
    engine.clear();
    local.clear();
  };
  // Stores `eh` at `node`'s place once on `tier`, continuing the open event when it can.
  const auto store = [&](const Node& node, EngineHash eh, index::Tier tier) {
    const bool continues = !engine.empty() && open_tier == tier && !node.root &&
                           name_of.at(node.parent) == engine.back() &&
                           engine.size() < max_blocks_per_event;
    if (!continues) {
      flush();
      open_tier = tier;
      open_has_parent = !node.root;
      open_parent = node.root ? 0 : name_of.at(node.parent);
    }
    engine.push_back(eh);
    local.push_back(node.local);
  };

  // Depth first from each root, a place before the places after it.
  std::vector<SeqHash> stack(roots.rbegin(), roots.rend());
  while (!stack.empty()) {
    const SeqHash seq = stack.back();
    stack.pop_back();
    const Node& node = nodes_.at(seq);
    auto first = std::lower_bound(at.begin(), at.end(), std::make_pair(seq, EngineHash{0}));
    if (first == at.end() || first->first != seq) {
      const EngineHash g = ghost_name(seq, taken);
      taken.insert(g);
      ghost_names.push_back(g);
      name_of[seq] = g;
      store(node, g, index::Tier::kDevice);
    } else {
      name_of[seq] = first->second;
      for (auto r = first; r != at.end() && r->first == seq; ++r) {
        const Record& rec = records_.at(r->second);
        for (size_t t = 0; t < index::kTierCount; ++t) {
          for (uint32_t c = 0; c < rec.copies[t]; ++c) {
            store(node, r->second, static_cast<index::Tier>(t));
          }
        }
      }
    }
    auto child = std::lower_bound(edges.begin(), edges.end(), std::make_pair(seq, SeqHash{0}));
    const auto begin = child;
    while (child != edges.end() && child->first == seq) ++child;
    for (auto c = child; c != begin;) stack.push_back((--c)->second);
  }
  flush();
  for (size_t i = 0; i < ghost_names.size(); i += max_blocks_per_event) {
    const size_t n = std::min(max_blocks_per_event, ghost_names.size() - i);
    index::Event e{.kind = index::EventKind::kRemoved,
                   .tier = index::Tier::kDevice,
                   .engine_hashes = std::span<const EngineHash>(ghost_names.data() + i, n)};
    emit(e);
  }
}

}  // namespace kvgate::relay
