// Lookups: the chain walked from the root through runs and children, each run's window read under
// its seqlock (see chain_index.h for the threading contract).
#include <algorithm>
#include <vector>

#include "index/chain/chain_index.h"
#include "index/chain/detail/child_table.h"

namespace kvgate::index::chain {

using detail::ChildTable;
using detail::HolderEntry;
using detail::kNoRun;
using detail::kRootRun;
using detail::Run;
using detail::Word;
using detail::WordSlab;

namespace {

// Per-thread scratch for a run's holder entries: lookups copy them out under the seqlock.
thread_local std::vector<uint64_t> tl_entries;

}  // namespace

void ChainIndex::lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const {
  lookup_traced(chain, out, nullptr);
}

void ChainIndex::lookup_traced(std::span<const SeqHash> chain, std::vector<HolderMatch>& out,
                               uint32_t* runs_walked) const {
  out.clear();
  if (runs_walked) *runs_walked = 0;
  if (chain.empty()) return;
  std::vector<uint64_t>& entries = tl_entries;
  RunId rid = ChildTable::find(core_.arena.at(kRootRun), 0, chain[0]);
  size_t pos = 0;  // chain position of the current run's offset 0
  bool first = true;
  while (rid != kNoRun && core_.arena.valid(rid)) {
    const Run& r = core_.arena.at(rid);
    uint32_t matched = 0;
    bool continues_inside = false;
    size_t alive_bound = 0;
    for (;;) {
      const uint64_t v1 = r.version.load(std::memory_order_acquire);
      if (v1 & 1) {
        detail::cpu_pause();
        continue;
      }
      const Word* hashes = r.hashes.load(std::memory_order_relaxed);
      const Word* ents = r.entries.load(std::memory_order_relaxed);
      size_t len = r.length.load(std::memory_order_relaxed);
      size_t n = r.entry_count.load(std::memory_order_relaxed);
      len = hashes ? std::min(len, WordSlab::capacity(hashes)) : 0;
      n = ents ? std::min(n, WordSlab::capacity(ents)) : 0;
      entries.resize(n);
      for (size_t i = 0; i < n; ++i)
        entries[i] = WordSlab::data(ents)[i].load(std::memory_order_relaxed);
      // How far any holder still in the race could reach in this run bounds the comparison.
      alive_bound = 0;
      if (first) {
        for (size_t i = 0; i < n; ++i)
          alive_bound = std::max<size_t>(alive_bound, HolderEntry::unpack(entries[i]).any);
      } else {
        size_t j = 0;
        for (size_t i = 0; i < n && j < out.size(); ++i) {
          const HolderEntry e = HolderEntry::unpack(entries[i]);
          while (j < out.size() && out[j].holder.value() < e.holder) ++j;
          if (j < out.size() && out[j].holder.value() == e.holder && out[j].any_depth == pos) {
            alive_bound = std::max<size_t>(alive_bound, e.any);
          }
        }
      }
      const size_t limit = std::min({len, chain.size() - pos, alive_bound});
      matched = 0;
      const Word* h = hashes ? WordSlab::data(hashes) : nullptr;
      while (matched < limit && h[matched].load(std::memory_order_relaxed) == chain[pos + matched])
        ++matched;
      continues_inside = matched == limit && limit < len && pos + limit < chain.size() &&
                         h[limit].load(std::memory_order_relaxed) == chain[pos + limit];
      const bool valid_start = len > 0 && h[0].load(std::memory_order_relaxed) == chain[pos];
      std::atomic_thread_fence(std::memory_order_acquire);
      if (r.version.load(std::memory_order_relaxed) != v1) continue;
      if (!valid_start) {
        matched = 0;  // a run being killed, or a recycled slot: the chain ends before it
        alive_bound = 0;
      }
      break;
    }
    if (runs_walked) ++*runs_walked;
    if (matched == 0) break;
    if (first) {
      for (uint64_t w : entries) {
        const HolderEntry e = HolderEntry::unpack(w);
        const uint32_t any = std::min<uint32_t>(e.any, matched);
        if (any == 0) continue;
        out.push_back({HolderId(e.holder), std::min<uint32_t>(e.device, matched), any});
      }
      first = false;
    } else {
      size_t j = 0;
      for (uint64_t w : entries) {
        const HolderEntry e = HolderEntry::unpack(w);
        while (j < out.size() && out[j].holder.value() < e.holder) ++j;
        if (j == out.size()) break;
        HolderMatch& m = out[j];
        if (m.holder.value() != e.holder) continue;
        if (m.device_depth == pos && m.any_depth == pos)
          m.device_depth += std::min<uint32_t>(e.device, matched);
        if (m.any_depth == pos) m.any_depth += std::min<uint32_t>(e.any, matched);
      }
    }
    // Continue below this run only if some holder covered everything matched here.
    const size_t frontier = pos + matched;
    bool alive = false;
    for (const HolderMatch& m : out) alive = alive || m.any_depth == frontier;
    if (!alive || continues_inside || frontier >= chain.size()) break;
    rid = ChildTable::find(r, matched, chain[frontier]);
    pos = frontier;
  }
}

}  // namespace kvgate::index::chain
