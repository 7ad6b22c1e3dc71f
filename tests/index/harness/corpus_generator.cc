#include "harness/corpus_generator.h"

#include <algorithm>
#include <string>

namespace kvgate::index::harness {

void Step::clear() {
  kind = Kind::kBatch;
  events.clear();
  lookups.clear();
  engine_buf_.clear();
  local_buf_.clear();
}

Event& Step::stored(std::vector<EngineHash> engine, std::vector<LocalHash> local, bool has_parent,
                    EngineHash parent, Tier tier) {
  Event e;
  e.kind = EventKind::kStored;
  e.tier = tier;
  e.has_parent = has_parent;
  e.parent = has_parent ? parent : 0;
  e.engine_hashes = engine_buf_.emplace_back(std::move(engine));
  e.local_hashes = local_buf_.emplace_back(std::move(local));
  return events.emplace_back(e);
}

Event& Step::removed(std::vector<EngineHash> engine, Tier tier) {
  Event e;
  e.kind = EventKind::kRemoved;
  e.tier = tier;
  e.engine_hashes = engine_buf_.emplace_back(std::move(engine));
  return events.emplace_back(e);
}

void Step::cleared() { events.push_back(Event{}); }

std::string Step::describe() const {
  if (kind == Kind::kRemoveHolder) return "remove_holder";
  std::string s;
  for (const Event& e : events) {
    if (!s.empty()) s += ", ";
    switch (e.kind) {
      case EventKind::kStored:
        s += "stored x" + std::to_string(e.engine_hashes.size()) +
             (e.has_parent ? " [parent]" : " [root]");
        break;
      case EventKind::kRemoved:
        s += "removed x" + std::to_string(e.engine_hashes.size());
        break;
      case EventKind::kCleared:
        s += "cleared";
        continue;
    }
    s += " ";
    s += tier_name(e.tier);
  }
  return s;
}

void CorpusGenerator::Shadow::add(Key k, Tier t) {
  auto [it, inserted] = copies.try_emplace(k);
  if (inserted) {
    it->second.slot = static_cast<uint32_t>(keys.size());
    keys.push_back(k);
  }
  (t == Tier::kDevice ? it->second.device : it->second.host)++;
}

bool CorpusGenerator::Shadow::remove(Key k, Tier t) {
  auto it = copies.find(k);
  if (it == copies.end()) return false;
  uint32_t& n = t == Tier::kDevice ? it->second.device : it->second.host;
  if (n == 0) return false;
  --n;
  if (it->second.device + it->second.host > 0) return true;
  const uint32_t slot = it->second.slot;
  keys[slot] = keys.back();
  copies[keys[slot]].slot = slot;
  keys.pop_back();
  copies.erase(k);
  if (evicted.size() < 256) {
    evicted.push_back(k);
  } else {
    evicted[k % 256] = k;
  }
  return true;
}

void CorpusGenerator::Shadow::reset() {
  keys.clear();
  copies.clear();
}

CorpusGenerator::CorpusGenerator(const GeneratorOptions& options)
    : options_(options), rng_(options.seed), hasher_(options.hash_seed) {
  shadows_.resize(options.holders);
  nodes_.reserve(1 << 16);
  for (int i = 0; i < 8; ++i) new_node(kNone);
}

uint32_t CorpusGenerator::new_node(uint32_t parent) {
  Node n;
  n.parent = parent;
  n.depth = parent == kNone ? 1 : nodes_[parent].depth + 1;
  n.local = rng_.next();
  n.seq = parent == kNone ? n.local : hasher_.chain(nodes_[parent].seq, n.local);
  n.engine[0] = rng_.next();
  n.engine[1] = rng_.next();
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(std::move(n));
  if (parent == kNone) {
    roots_.push_back(id);
  } else {
    nodes_[parent].children.push_back(id);
  }
  return id;
}

uint32_t CorpusGenerator::pick_root() {
  // A few popular heads (system prompts) and a trickle of new ones.
  if (rng_.chance(0.05)) return new_node(kNone);
  return roots_[rng_.below(std::min<size_t>(roots_.size(), rng_.chance(0.7) ? 8 : 1u << 20))];
}

uint32_t CorpusGenerator::pick_child(uint32_t node) {
  const auto& children = nodes_[node].children;
  // Mostly follow what some holder already stored (shared prefixes); else a divergent sibling.
  if (!children.empty() && rng_.chance(0.7)) return children[rng_.below(children.size())];
  return new_node(node);
}

void CorpusGenerator::path(uint32_t node, std::vector<SeqHash>& out) const {
  out.clear();
  for (uint32_t n = node; n != kNone; n = nodes_[n].parent) out.push_back(nodes_[n].seq);
  std::reverse(out.begin(), out.end());
}

void CorpusGenerator::add_lookups(Step& step, uint32_t last_node) {
  std::vector<SeqHash> full;
  path(last_node, full);
  const size_t n = full.size();
  step.lookups.push_back(full);
  step.lookups.emplace_back(full.begin(), full.begin() + (n + 1) / 2);
  if (n >= 3) {
    auto middle = full;
    middle[n / 2] = rng_.next();
    step.lookups.push_back(std::move(middle));
  }
  auto tail = full;
  tail.back() = rng_.next();
  for (int i = 0; i < 3; ++i) tail.push_back(hasher_.chain(tail.back(), rng_.next()));
  step.lookups.push_back(std::move(tail));
}

void CorpusGenerator::evict(Step& step, Shadow& s, size_t count, Key keep) {
  std::vector<EngineHash> device, host;
  const size_t attempts = count * 2;
  for (size_t i = 0; i < attempts && count > 0 && s.keys.size() > 1; ++i) {
    const Key k = random_key(s);
    if (k == keep) continue;
    const Copies c = s.copies[k];
    for (uint32_t j = 0; j < c.device; ++j) device.push_back(engine_of(k));
    for (uint32_t j = 0; j < c.host; ++j) host.push_back(engine_of(k));
    while (s.remove(k, Tier::kDevice)) {
    }
    while (s.remove(k, Tier::kHost)) {
    }
    --count;
  }
  if (!device.empty()) step.removed(std::move(device), Tier::kDevice);
  if (!host.empty()) step.removed(std::move(host), Tier::kHost);
}

void CorpusGenerator::extend(Step& step, Shadow& s, bool long_chain) {
  const size_t n = long_chain ? rng_.between(16, 64) : rng_.between(1, 8);
  const uint64_t variant = rng_.chance(0.05) ? 1 : 0;
  bool has_parent = false;
  Key parent_key = 0;
  uint32_t cur = kNone;
  if (!s.keys.empty() && !rng_.chance(0.2)) {
    parent_key = random_key(s);
    if (nodes_[node_of(parent_key)].depth + n <= options_.max_depth) {
      has_parent = true;
      cur = node_of(parent_key);
    }
  }
  if (s.keys.size() + n > options_.holder_capacity) {
    evict(step, s, s.keys.size() + n - options_.holder_capacity, parent_key);
    if (has_parent && !s.copies.contains(parent_key)) has_parent = false;
  }
  std::vector<EngineHash> engine;
  std::vector<LocalHash> local;
  std::vector<Key> keys;
  for (size_t i = 0; i < n; ++i) {
    cur = cur == kNone ? pick_root() : pick_child(cur);
    keys.push_back(uint64_t{cur} * 2 + variant);
    engine.push_back(nodes_[cur].engine[variant]);
    local.push_back(nodes_[cur].local);
  }
  const Tier tier = rng_.chance(0.1) ? Tier::kHost : Tier::kDevice;
  step.stored(std::move(engine), std::move(local), has_parent,
              has_parent ? engine_of(parent_key) : 0, tier);
  for (Key k : keys) s.add(k, tier);
  add_lookups(step, cur);
}

void CorpusGenerator::remove_some(Step& step, Shadow& s) {
  if (s.keys.empty()) return;
  std::vector<EngineHash> device, host;
  const size_t n = rng_.between(1, 4);
  for (size_t i = 0; i < n && !s.keys.empty(); ++i) {
    const Key k = random_key(s);
    if (s.remove(k, Tier::kDevice)) {
      device.push_back(engine_of(k));
    } else if (s.remove(k, Tier::kHost)) {
      host.push_back(engine_of(k));
    }
  }
  if (!device.empty()) step.removed(std::move(device), Tier::kDevice);
  if (!host.empty()) step.removed(std::move(host), Tier::kHost);
}

void CorpusGenerator::heal(Step& step, Shadow& s) {
  for (int attempt = 0; attempt < 8 && !s.evicted.empty(); ++attempt) {
    const Key k = s.evicted[rng_.below(s.evicted.size())];
    const uint32_t node = node_of(k);
    const uint32_t parent = nodes_[node].parent;
    const Key parent_key = uint64_t{parent} * 2 + k % 2;
    if (parent != kNone && !s.copies.contains(parent_key)) continue;
    step.stored({engine_of(k)}, {nodes_[node].local}, parent != kNone,
                parent != kNone ? engine_of(parent_key) : 0, Tier::kDevice);
    s.add(k, Tier::kDevice);
    // The blocks below the healed one are reachable again: look up the deepest of them.
    uint32_t deepest = node;
    while (!nodes_[deepest].children.empty()) {
      const uint32_t child = nodes_[deepest].children.front();
      if (!s.copies.contains(uint64_t{child} * 2 + k % 2)) break;
      deepest = child;
    }
    add_lookups(step, deepest);
    return;
  }
  extend(step, s, false);
}

void CorpusGenerator::duplicate(Step& step, Shadow& s) {
  if (s.keys.empty()) return extend(step, s, false);
  const Key k = random_key(s);
  const uint32_t node = node_of(k);
  const uint32_t parent = nodes_[node].parent;
  const Tier tier = rng_.chance(0.5) ? Tier::kHost : Tier::kDevice;
  step.stored({engine_of(k)}, {nodes_[node].local}, parent != kNone,
              parent != kNone ? nodes_[parent].engine[k % 2] : 0, tier);
  s.add(k, tier);
  add_lookups(step, node);
}

void CorpusGenerator::orphan(Step& step, Shadow& s) {
  const uint32_t node = static_cast<uint32_t>(rng_.below(nodes_.size()));
  EngineHash parent = rng_.next();
  if (rng_.chance(0.5) && !s.copies.contains(uint64_t{node} * 2)) parent = nodes_[node].engine[0];
  const uint32_t child = pick_child(node);
  step.stored({nodes_[child].engine[0]}, {nodes_[child].local}, true, parent, Tier::kDevice);
}

void CorpusGenerator::unknown_removal(Step& step, Shadow& s) {
  if (s.keys.empty() || rng_.chance(0.5)) {
    step.removed({rng_.next(), rng_.next()}, Tier::kDevice);
  } else {
    step.removed({engine_of(random_key(s))}, Tier::kDisk);
  }
}

void CorpusGenerator::move(Step& step, Shadow& s) {
  if (s.keys.empty()) return extend(step, s, false);
  // The engine reuses a block's hash for other content without telling us it dropped the old
  // one (engines whose "hash" is a physical block id do): the latest store wins.
  const Key moved = random_key(s);
  const EngineHash engine = engine_of(moved);
  while (s.remove(moved, Tier::kDevice)) {
  }
  while (s.remove(moved, Tier::kHost)) {
  }
  bool has_parent = false;
  Key parent_key = 0;
  uint32_t node;
  if (!s.keys.empty() && rng_.chance(0.7)) {
    parent_key = random_key(s);
    has_parent = nodes_[node_of(parent_key)].depth < options_.max_depth;
  }
  node = new_node(has_parent ? node_of(parent_key) : kNone);
  nodes_[node].engine[0] = engine;
  step.stored({engine}, {nodes_[node].local}, has_parent, has_parent ? engine_of(parent_key) : 0,
              Tier::kDevice);
  s.add(uint64_t{node} * 2, Tier::kDevice);
  add_lookups(step, node);
}

void CorpusGenerator::malformed(Step& step) {
  step.stored({rng_.next(), rng_.next()}, {rng_.next()}, false, 0, Tier::kDevice);
}

void CorpusGenerator::next(Step& step) {
  step.clear();
  const uint32_t h = static_cast<uint32_t>(rng_.below(options_.holders));
  step.holder = HolderId(h);
  Shadow& s = shadows_[h];
  if (rng_.chance(0.0015)) {
    // Removed from the fleet; the id comes back with later batches (a re-added worker).
    step.kind = Step::Kind::kRemoveHolder;
    s.reset();
    return;
  }
  const size_t target = rng_.chance(0.5) ? 1 : rng_.between(2, 5);
  while (step.events.size() < target) {
    const uint64_t roll = rng_.below(1000);
    if (roll < 420) {
      extend(step, s, false);
    } else if (roll < 450) {
      extend(step, s, true);
    } else if (roll < 610) {
      remove_some(step, s);
    } else if (roll < 700) {
      heal(step, s);
    } else if (roll < 790) {
      duplicate(step, s);
    } else if (roll < 840) {
      orphan(step, s);
    } else if (roll < 890) {
      unknown_removal(step, s);
    } else if (roll < 940) {
      move(step, s);
    } else if (roll < 955) {
      step.cleared();
      s.reset();
    } else if (roll < 965) {
      malformed(step);
    } else {
      remove_some(step, s);
    }
  }
  // One chain of the shared tree, whoever holds it.
  std::vector<SeqHash> any;
  path(static_cast<uint32_t>(rng_.below(nodes_.size())), any);
  if (any.size() <= options_.max_depth) step.lookups.push_back(std::move(any));
  events_ += step.events.size();
}

}  // namespace kvgate::index::harness
