#include "index/positional_indexer.h"

#include <algorithm>

#include "index/detail/tier_counts.h"

namespace kvgate::index {
namespace {

using detail::any_copy;
using detail::mask_of;

constexpr size_t kDevice = static_cast<size_t>(Tier::kDevice);

// Flat-hash-map storage as Abseil lays it out: one slot and one control byte per capacity unit.
template <class Map>
uint64_t table_bytes(const Map& m) {
  return m.capacity() * (sizeof(typename Map::value_type) + 1);
}

}  // namespace

PositionalIndexer::PositionalIndexer(const IndexerOptions& options) : hasher_(options.hash_seed) {}

ApplyResult PositionalIndexer::apply(HolderId holder, std::span<const Event> events) {
  ApplyResult r;
  const uint32_t id = holder.value();
  auto it = holders_.find(id);
  for (const Event& e : events) {
    if (malformed_event(e)) {
      ++r.malformed_events;
      continue;
    }
    if (e.kind == EventKind::kCleared) {
      ++r.clears;
      if (it != holders_.end()) {
        drop_all(id, it->second);
        holders_.erase(it);
        it = holders_.end();
      }
      continue;
    }
    if (it == holders_.end()) {
      if (e.kind == EventKind::kRemoved) {
        r.unknown_removals += e.engine_hashes.size();
        continue;
      }
      it = holders_.try_emplace(id).first;
    }
    if (e.kind == EventKind::kStored) {
      store(id, it->second, e, r);
    } else {
      remove(id, it->second, e, r);
    }
    if (it->second.empty()) {
      holders_.erase(it);
      it = holders_.end();
    }
  }
  return r;
}

void PositionalIndexer::store(uint32_t holder, Records& records, const Event& e, ApplyResult& r) {
  const size_t n = e.engine_hashes.size();
  SeqHash prev = 0;
  if (e.has_parent) {
    auto parent = records.find(e.parent);
    if (parent == records.end()) {
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
    auto [it, inserted] = records.try_emplace(e.engine_hashes[i]);
    Record& rec = it->second;
    if (inserted) {
      rec.seq = seq;
      rec.copies = {};
      rec.copies[tier] = 1;
      add_ref(seq, holder, tier);
    } else if (rec.seq == seq) {
      if (rec.copies[tier]++ == 0) add_ref(seq, holder, tier);
    } else {
      ++r.moved_blocks;
      drop_refs(rec.seq, holder, rec.copies);
      rec.seq = seq;
      rec.copies = {};
      rec.copies[tier] = 1;
      add_ref(seq, holder, tier);
    }
    ++r.stored_blocks;
    prev = seq;
  }
}

void PositionalIndexer::remove(uint32_t holder, Records& records, const Event& e, ApplyResult& r) {
  const size_t tier = static_cast<size_t>(e.tier);
  for (EngineHash eh : e.engine_hashes) {
    auto it = records.find(eh);
    if (it == records.end() || it->second.copies[tier] == 0) {
      ++r.unknown_removals;
      continue;
    }
    ++r.removed_blocks;
    Record& rec = it->second;
    if (--rec.copies[tier] == 0) {
      drop_ref(rec.seq, holder, tier);
      if (!any_copy(rec.copies)) records.erase(it);
    }
  }
}

void PositionalIndexer::drop_all(uint32_t holder, Records& records) {
  for (const auto& [eh, rec] : records) drop_refs(rec.seq, holder, rec.copies);
}

void PositionalIndexer::add_ref(SeqHash seq, uint32_t holder, size_t tier) {
  Holdings& hs = blocks_[seq];
  auto pos = std::lower_bound(hs.begin(), hs.end(), holder,
                              [](const Holding& h, uint32_t id) { return h.holder < id; });
  if (pos == hs.end() || pos->holder != holder) {
    const size_t before = heap_slots(hs);
    pos = hs.insert(pos, Holding{holder, {}});
    heap_holding_slots_ += heap_slots(hs) - before;
    ++memberships_;
  }
  ++pos->refs[tier];
}

void PositionalIndexer::drop_ref(SeqHash seq, uint32_t holder, size_t tier) {
  TierCounts one{};
  one[tier] = 1;
  drop_refs(seq, holder, one);
}

// Withdraws one reference on every tier where `copies` is non-zero.
void PositionalIndexer::drop_refs(SeqHash seq, uint32_t holder, const TierCounts& copies) {
  auto bit = blocks_.find(seq);
  Holdings& hs = bit->second;
  auto pos = std::lower_bound(hs.begin(), hs.end(), holder,
                              [](const Holding& h, uint32_t id) { return h.holder < id; });
  for (size_t t = 0; t < kTierCount; ++t) {
    if (copies[t] > 0) --pos->refs[t];
  }
  if (any_copy(pos->refs)) return;
  hs.erase(pos);
  --memberships_;
  if (hs.empty()) {
    heap_holding_slots_ -= heap_slots(hs);
    blocks_.erase(bit);
  }
}

void PositionalIndexer::lookup(std::span<const SeqHash> chain,
                               std::vector<HolderMatch>& out) const {
  out.clear();
  if (chain.empty()) return;
  auto first = blocks_.find(chain[0]);
  if (first == blocks_.end()) return;
  // Candidates still matching every block so far, as indexes into `out` (sorted by holder).
  thread_local std::vector<uint32_t> alive;
  alive.clear();
  for (const Holding& h : first->second) {
    alive.push_back(static_cast<uint32_t>(out.size()));
    out.push_back({HolderId(h.holder), h.refs[kDevice] > 0 ? 1u : 0u, 1});
  }
  for (size_t i = 1; i < chain.size() && !alive.empty(); ++i) {
    auto bit = blocks_.find(chain[i]);
    if (bit == blocks_.end()) break;
    const Holdings& hs = bit->second;
    const Holding* h = hs.data();
    const Holding* end = h + hs.size();
    size_t kept = 0;
    for (uint32_t k : alive) {
      HolderMatch& m = out[k];
      const uint32_t id = m.holder.value();
      while (h != end && h->holder < id) ++h;
      if (h == end) break;
      if (h->holder != id) continue;
      // The device run is unbroken while it is as long as the any-tier run.
      if (m.device_depth == m.any_depth && h->refs[kDevice] > 0) ++m.device_depth;
      ++m.any_depth;
      alive[kept++] = k;
    }
    alive.resize(kept);
  }
}

void PositionalIndexer::remove_holder(HolderId holder) {
  auto it = holders_.find(holder.value());
  if (it == holders_.end()) return;
  drop_all(holder.value(), it->second);
  holders_.erase(it);
}

IndexStats PositionalIndexer::stats() const {
  IndexStats s;
  s.holders = holders_.size();
  s.resident_blocks = blocks_.size();
  s.memberships = memberships_;
  s.bytes = sizeof(*this) + table_bytes(blocks_) + table_bytes(holders_) +
            heap_holding_slots_ * sizeof(Holding);
  for (const auto& [id, records] : holders_) s.bytes += table_bytes(records);
  return s;
}

Status PositionalIndexer::memberships(std::vector<Membership>& out) const {
  out.clear();
  out.reserve(memberships_);
  for (const auto& [seq, hs] : blocks_) {
    for (const Holding& h : hs) out.push_back({HolderId(h.holder), seq, mask_of(h.refs)});
  }
  std::sort(out.begin(), out.end(), [](const Membership& a, const Membership& b) {
    return a.holder != b.holder ? a.holder < b.holder : a.seq < b.seq;
  });
  return absl::OkStatus();
}

Status PositionalIndexer::holder_memberships(HolderId holder, std::vector<Membership>& out) const {
  out.clear();
  auto it = holders_.find(holder.value());
  if (it == holders_.end()) return absl::OkStatus();
  for (const auto& [eh, rec] : it->second) out.push_back({holder, rec.seq, 0});
  std::sort(out.begin(), out.end(),
            [](const Membership& a, const Membership& b) { return a.seq < b.seq; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Membership& a, const Membership& b) { return a.seq == b.seq; }),
            out.end());
  // Tiers as the lookup side sees them, so a record/holding disagreement shows.
  for (Membership& m : out) {
    auto bit = blocks_.find(m.seq);
    if (bit == blocks_.end()) continue;
    for (const Holding& h : bit->second) {
      if (h.holder == holder.value()) m.tier_mask = mask_of(h.refs);
    }
  }
  return absl::OkStatus();
}

}  // namespace kvgate::index
