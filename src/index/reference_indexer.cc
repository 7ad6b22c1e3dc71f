#include "index/reference_indexer.h"

#include "index/detail/tier_counts.h"

namespace kvgate::index {
namespace {

using detail::any_copy;
using detail::mask_of;

// A std::map node as libstdc++ allocates it: four words of tree links and colour, the value,
// rounded up to the allocator's 16-byte size classes.
template <class Map>
constexpr uint64_t node_bytes() {
  return (32 + sizeof(typename Map::value_type) + 15) / 16 * 16;
}

}  // namespace

ReferenceIndexer::ReferenceIndexer(const IndexerOptions& options) : hasher_(options.hash_seed) {}

ApplyResult ReferenceIndexer::apply(HolderId holder, std::span<const Event> events) {
  ApplyResult r;
  Holder& h = holders_[holder];
  for (const Event& e : events) {
    if (malformed_event(e)) {
      ++r.malformed_events;
      continue;
    }
    switch (e.kind) {
      case EventKind::kStored:
        store(h, e, r);
        break;
      case EventKind::kRemoved:
        remove(h, e, r);
        break;
      case EventKind::kCleared:
        clear(h);
        ++r.clears;
        break;
    }
  }
  if (h.records.empty()) holders_.erase(holder);
  return r;
}

void ReferenceIndexer::store(Holder& h, const Event& e, ApplyResult& r) {
  const size_t n = e.engine_hashes.size();
  SeqHash prev = 0;
  if (e.has_parent) {
    auto parent = h.records.find(e.parent);
    if (parent == h.records.end()) {
      ++r.orphan_events;
      r.orphan_blocks += n;
      return;
    }
    prev = parent->second.seq;
  }
  const size_t tier = static_cast<size_t>(e.tier);
  for (size_t i = 0; i < n; ++i) {
    const SeqHash seq =
        (i == 0 && !e.has_parent) ? e.local_hashes[0] : hasher_.chain(prev, e.local_hashes[i]);
    auto [it, inserted] = h.records.try_emplace(e.engine_hashes[i]);
    Record& rec = it->second;
    if (!inserted) {
      count(h, rec, -1);
      if (rec.seq != seq) {
        // Latest store wins: the engine hash now names a block at another place.
        ++r.moved_blocks;
        rec = Record{};
      }
    }
    rec.seq = seq;
    ++rec.copies[tier];
    count(h, rec, +1);
    ++r.stored_blocks;
    prev = seq;
  }
}

void ReferenceIndexer::remove(Holder& h, const Event& e, ApplyResult& r) {
  const size_t tier = static_cast<size_t>(e.tier);
  for (EngineHash eh : e.engine_hashes) {
    auto it = h.records.find(eh);
    if (it == h.records.end() || it->second.copies[tier] == 0) {
      ++r.unknown_removals;
      continue;
    }
    count(h, it->second, -1);
    --it->second.copies[tier];
    ++r.removed_blocks;
    if (any_copy(it->second.copies)) {
      count(h, it->second, +1);
    } else {
      h.records.erase(it);
    }
  }
}

void ReferenceIndexer::clear(Holder& h) {
  for (const auto& [eh, rec] : h.records) count(h, rec, -1);
  h.records.clear();
}

void ReferenceIndexer::count(Holder& h, const Record& rec, int sign) {
  if (!any_copy(rec.copies)) return;
  if (sign > 0) {
    auto [it, inserted] = h.held.try_emplace(rec.seq);
    if (inserted) ++resident_[rec.seq];
    for (size_t t = 0; t < kTierCount; ++t) {
      if (rec.copies[t] > 0) ++it->second[t];
    }
    return;
  }
  auto it = h.held.find(rec.seq);
  for (size_t t = 0; t < kTierCount; ++t) {
    if (rec.copies[t] > 0) --it->second[t];
  }
  if (!any_copy(it->second)) {
    h.held.erase(it);
    auto res = resident_.find(rec.seq);
    if (--res->second == 0) resident_.erase(res);
  }
}

void ReferenceIndexer::lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const {
  out.clear();
  for (const auto& [id, h] : holders_) {
    HolderMatch m{id, 0, 0};
    bool device_run = true;
    for (SeqHash s : chain) {
      auto it = h.held.find(s);
      if (it == h.held.end()) break;
      ++m.any_depth;
      device_run = device_run && it->second[static_cast<size_t>(Tier::kDevice)] > 0;
      if (device_run) ++m.device_depth;
    }
    if (m.any_depth > 0) out.push_back(m);
  }
}

void ReferenceIndexer::remove_holder(HolderId holder) {
  auto it = holders_.find(holder);
  if (it == holders_.end()) return;
  clear(it->second);
  holders_.erase(it);
}

IndexStats ReferenceIndexer::stats() const {
  IndexStats s;
  s.holders = holders_.size();
  s.resident_blocks = resident_.size();
  uint64_t records = 0;
  for (const auto& [id, h] : holders_) {
    s.memberships += h.held.size();
    records += h.records.size();
  }
  using Records = std::map<EngineHash, Record>;
  using Held = std::map<SeqHash, TierCounts>;
  s.bytes = sizeof(*this) + holders_.size() * node_bytes<decltype(holders_)>() +
            records * node_bytes<Records>() + s.memberships * node_bytes<Held>() +
            resident_.size() * node_bytes<decltype(resident_)>();
  return s;
}

void ReferenceIndexer::append(HolderId id, const Holder& h, std::vector<Membership>& out) {
  for (const auto& [seq, counts] : h.held) out.push_back({id, seq, mask_of(counts)});
}

Status ReferenceIndexer::memberships(std::vector<Membership>& out) const {
  out.clear();
  for (const auto& [id, h] : holders_) append(id, h, out);
  return absl::OkStatus();
}

Status ReferenceIndexer::holder_memberships(HolderId holder, std::vector<Membership>& out) const {
  out.clear();
  auto it = holders_.find(holder);
  if (it != holders_.end()) append(holder, it->second, out);
  return absl::OkStatus();
}

}  // namespace kvgate::index
