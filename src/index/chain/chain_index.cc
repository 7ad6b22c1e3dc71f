// The chain index's lifecycle, holder states, statistics and content dumps (writers in
// chain_writes.cc, lookups in chain_lookup.cc, run-level operations in core.cc and
// run_session.cc).
#include "index/chain/chain_index.h"

#include <algorithm>
#include <vector>

namespace kvgate::index::chain {

using detail::kNoRun;
using detail::kRootRun;
using detail::Record;
using detail::Run;
using detail::RunGuard;
using detail::Word;
using detail::WordSlab;

ChainIndex::ChainIndex(const IndexerOptions& options, int numa_node)
    : hasher_(options.hash_seed), core_(numa_node) {
  const RunId root = core_.arena.allocate();
  Run& r = core_.arena.at(root);
  RunGuard g(core_.arena, root);
  r.live = true;
  r.parent = kNoRun;
}

ChainIndex::~ChainIndex() {
  for (auto& chunk : holder_chunks_) {
    std::atomic<HolderState*>* c = chunk.load(std::memory_order_relaxed);
    if (c == nullptr) continue;
    for (uint32_t i = 0; i < (1u << kHolderChunkShift); ++i)
      delete c[i].load(std::memory_order_relaxed);
    delete[] c;
  }
}

ChainIndex::HolderState* ChainIndex::find_state(uint32_t holder) const {
  const uint32_t chunk = holder >> kHolderChunkShift;
  if (chunk >= kHolderChunks) return nullptr;
  std::atomic<HolderState*>* c = holder_chunks_[chunk].load(std::memory_order_acquire);
  return c ? c[holder & ((1u << kHolderChunkShift) - 1)].load(std::memory_order_acquire) : nullptr;
}

ChainIndex::HolderState& ChainIndex::state(uint32_t holder) {
  if (HolderState* hs = find_state(holder)) return *hs;
  const uint32_t chunk = holder >> kHolderChunkShift;
  std::atomic<HolderState*>* c = holder_chunks_[chunk].load(std::memory_order_acquire);
  if (c == nullptr) {
    std::lock_guard<std::mutex> lock(holder_chunks_mu_);
    c = holder_chunks_[chunk].load(std::memory_order_acquire);
    if (c == nullptr) {
      c = new std::atomic<HolderState*>[1u << kHolderChunkShift];
      for (uint32_t i = 0; i < (1u << kHolderChunkShift); ++i)
        c[i].store(nullptr, std::memory_order_relaxed);
      holder_chunks_[chunk].store(c, std::memory_order_release);
    }
  }
  auto* hs = new HolderState();
  c[holder & ((1u << kHolderChunkShift) - 1)].store(hs, std::memory_order_release);
  return *hs;
}

// ---------------------------------------------------------------------------------------------
// Statistics and content

IndexStats ChainIndex::stats() const {
  IndexStats s;
  s.holders = core_.holders.load(std::memory_order_relaxed);
  s.resident_blocks = core_.resident.load(std::memory_order_relaxed);
  s.memberships = core_.memberships.load(std::memory_order_relaxed);
  s.bytes = sizeof(*this) + core_.slab.reserved_bytes() + core_.arena.reserved_bytes() +
            holder_bytes_.load(std::memory_order_relaxed);
  return s;
}

ChainIndex::MemoryBreakdown ChainIndex::memory_breakdown() const {
  MemoryBreakdown m;
  m.slab_reserved = core_.slab.reserved_bytes();
  m.slab_live = core_.slab.live_bytes();
  m.runs_reserved = core_.arena.reserved_bytes();
  m.holder_states = holder_bytes_.load(std::memory_order_relaxed);
  m.live_runs = live_runs();
  m.live_positions = live_positions();
  m.free_by_class = core_.slab.free_bytes_by_class();
  return m;
}

uint64_t ChainIndex::live_positions() const {
  uint64_t n = 0;
  // Not synchronized with writers: a statistic for benchmarks taken between phases.
  for (RunId id = 1; core_.arena.valid(id); ++id)
    n += core_.arena.at(id).length.load(std::memory_order_relaxed);
  return n;
}

void ChainIndex::collect_resident(absl::flat_hash_set<SeqHash>& out) const {
  for (RunId id = 1; core_.arena.valid(id); ++id) {
    Run& r = core_.arena.at(id);
    RunGuard g(core_.arena, id);
    if (!r.live) continue;
    const Word* h = r.hashes.load(std::memory_order_relaxed);
    const uint32_t len = r.length.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < len; ++i) {
      if (detail::count_at(r.holder_counts, i) > 0)
        out.insert(WordSlab::data(h)[i].load(std::memory_order_relaxed));
    }
  }
}

namespace {

void append_holder(uint32_t holder, const absl::flat_hash_map<SeqHash, uint8_t>& masks,
                   std::vector<Membership>& out) {
  const size_t start = out.size();
  for (const auto& [seq, mask] : masks) out.push_back({HolderId(holder), seq, mask});
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(),
            [](const Membership& a, const Membership& b) { return a.seq < b.seq; });
}

}  // namespace

Status ChainIndex::holder_memberships(HolderId holder, std::vector<Membership>& out) const {
  out.clear();
  const HolderState* hs = find_state(holder.value());
  if (hs == nullptr) return absl::OkStatus();
  absl::flat_hash_map<SeqHash, uint8_t> masks;
  hs->records.for_each([&](const Record& rec) {
    uint8_t mask = 0;
    for (size_t t = 0; t < kTierCount; ++t) {
      if (hs->copies(rec, t) > 0) mask |= tier_bit(static_cast<Tier>(t));
    }
    masks[core_.seq_at(rec.run, rec.offset)] |= mask;
  });
  append_holder(holder.value(), masks, out);
  return absl::OkStatus();
}

Status ChainIndex::memberships(std::vector<Membership>& out) const {
  out.clear();
  std::vector<Membership> one;
  for (uint32_t chunk = 0; chunk < kHolderChunks; ++chunk) {
    if (holder_chunks_[chunk].load(std::memory_order_acquire) == nullptr) continue;
    for (uint32_t i = 0; i < (1u << kHolderChunkShift); ++i) {
      const uint32_t holder = (chunk << kHolderChunkShift) | i;
      if (find_state(holder) == nullptr) continue;
      if (Status st = holder_memberships(HolderId(holder), one); !st.ok()) return st;
      out.insert(out.end(), one.begin(), one.end());
    }
  }
  return absl::OkStatus();
}

}  // namespace kvgate::index::chain
