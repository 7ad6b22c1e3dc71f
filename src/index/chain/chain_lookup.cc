// Lookups: the chain walked from the root through runs and children, each run's window read under
// its seqlock (see chain_index.h for the threading contract).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "index/chain/chain_index.h"
#include "index/chain/detail/child_table.h"
#include "index/chain/detail/holder_copy.h"
#include "index/chain/detail/prefetch.h"

namespace kvgate::index::chain {

using detail::ChildTable;
using detail::HolderEntry;
using detail::kNoRun;
using detail::kRootRun;
using detail::Run;
using detail::Word;
using detail::WordSlab;

namespace {

// Per-thread scratch: a later run's entries matched by the holders still in the race (copied out
// under the seqlock), and the race itself. Filled through raw pointers (grown, never shrunk): the
// per-entry bookkeeping of push_back on a thread_local vector was a fifth of a lookup's time with
// a hundred holders per run.
struct Hit {
  uint32_t k;  // index into the lookup's output
  HolderEntry e;
};
thread_local std::vector<uint32_t> tl_alive;
thread_local std::vector<Hit> tl_hits;

// A run's reader-visible fields span up to two cache lines (runs are packed, not line-aligned).
void prefetch_run(const Run& r) {
  detail::prefetch_line(&r);
  detail::prefetch_line(reinterpret_cast<const char*>(&r) + offsetof(Run, latest_child));
}

// Whether a chain leaving `r` most likely goes on in the child `r` made last: a run with a few
// children (a conversation's turn, its next turn) yes; a popular prefix with thousands (each
// conversation that starts with it) no, and loading its latest child's lines only cost the
// lookup. Judged by the child table's slot count (a hint, read without the seqlock).
bool latest_child_likely(const Run& r) {
  return r.children_slots.load(std::memory_order_relaxed) <= detail::kLatestChildMaxSlots;
}

template <class T>
T* room(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(std::max<size_t>(n, 2 * v.size()));
  return v.data();
}

// How many leading positions of the run's hashes `h` equal `chain`, up to `limit`. Eight positions
// (a cache line of hashes) per step with one branch, and the lines ahead prefetched: a long run's
// compare is bound by how many lines are in flight, not by one branch per position (a
// 300-position run took most of a microsecond).
size_t common_prefix(const Word* h, std::span<const SeqHash> chain, size_t limit) {
  size_t m = 0;
  while (m + 8 <= limit) {
    detail::prefetch_line(h + m + 64);
    uint64_t diff = 0;
    for (size_t k = 0; k < 8; ++k) diff |= h[m + k].load(std::memory_order_relaxed) ^ chain[m + k];
    if (diff != 0) break;
    m += 8;
  }
  while (m < limit && h[m].load(std::memory_order_relaxed) == chain[m]) ++m;
  return m;
}

// Where the chain leaves run `r` (`matched` positions into it) is known once it is compared: start
// loading the child slot the walk probes next, so it arrives while the holders are settled. (The
// early prefetch on entering the run guesses the run's end, but a chain most often leaves a popular
// run inside it: 240,321 of 240,600 first runs on the default corpus.)
void prefetch_next_child(const Run& r, size_t matched, std::span<const SeqHash> chain, size_t pos) {
  if (pos + matched < chain.size())
    ChildTable::prefetch(r, static_cast<uint32_t>(matched), chain[pos + matched]);
}

// The holders still in the race, in holder order, at positions 0..end(), each naming an index
// into `out`. Listed: the positions are a list's, all in the race. Unlisted: the positions are
// all of `out`, and those at depth `depth` are in the race (right after the first run, whose race
// is most of a hundred holders: listing it is a pass over them that most lookups, ending in their
// first run, never use).
struct ListedRace {
  const std::vector<HolderMatch>& out;
  const uint32_t* list;
  size_t n;
  size_t count() const { return n; }
  size_t end() const { return n; }
  uint32_t index(size_t p) const { return list[p]; }
  uint32_t holder(size_t p) const { return out[list[p]].holder.value(); }
  bool in(size_t) const { return true; }
};
struct UnlistedRace {
  const std::vector<HolderMatch>& out;
  size_t depth;
  size_t n;  // how many are at `depth`
  size_t count() const { return n; }
  size_t end() const { return out.size(); }
  uint32_t index(size_t p) const { return static_cast<uint32_t>(p); }
  uint32_t holder(size_t p) const { return out[p].holder.value(); }
  bool in(size_t p) const { return out[p].any_depth == depth; }
};

// The run's entries of the holders still in the race, as hits; returns how many. Three ways, by
// which side is much the smaller.
template <class Entry, class Race>
size_t match_alive(const Entry& entry, size_t n, const Race& race, Hit* hits) {
  size_t hits_n = 0;
  const size_t end = race.end();
  if (race.count() * 8 < n) {
    // Few holders left: find each by binary search instead of reading the whole table.
    for (size_t p = 0; p < end; ++p) {
      if (!race.in(p)) continue;
      const uint32_t holder = race.holder(p);
      const size_t lo =
          detail::first_not_before(0, n, [&](size_t i) { return entry(i).holder < holder; });
      if (lo < n) {
        const HolderEntry e = entry(lo);
        if (e.holder == holder) hits[hits_n++] = {race.index(p), e};
      }
    }
  } else if (n * 8 < race.count()) {
    // Few entries (a run below a popular prefix, held by one or two of its holders): find each
    // among the holders still in the race instead of walking them all.
    size_t lo_bound = 0;
    for (size_t i = 0; i < n; ++i) {
      const HolderEntry e = entry(i);
      const size_t lo = detail::first_not_before(
          lo_bound, end, [&](size_t p) { return race.holder(p) < e.holder; });
      lo_bound = lo;
      if (lo < end && race.holder(lo) == e.holder && race.in(lo))
        hits[hits_n++] = {race.index(lo), e};
    }
  } else {
    size_t p = 0;
    for (size_t i = 0; i < n && p < end; ++i) {
      const HolderEntry e = entry(i);
      while (p < end && race.holder(p) < e.holder) ++p;
      if (p < end && race.holder(p) == e.holder && race.in(p)) hits[hits_n++] = {race.index(p), e};
    }
  }
  return hits_n;
}

}  // namespace

void ChainIndex::lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const {
  lookup_traced(chain, out, nullptr);
}

void ChainIndex::lookup_traced(std::span<const SeqHash> chain, std::vector<HolderMatch>& out,
                               uint32_t* runs_walked) const {
  if (runs_walked) *runs_walked = 0;
  if (chain.empty()) {
    out.clear();
    return;
  }
  // The holders still in the race (their any-tier depth reached the current run's start): how
  // many, and, once listed (below the second run), as indices into `out` (ascending, so in holder
  // order); and the run's entries they matched.
  uint32_t* alive = nullptr;
  size_t alive_n = 0;
  bool race_listed = false;
  RunId rid = ChildTable::find(core_.arena.at(kRootRun), 0, chain[0]);
  size_t pos = 0;  // chain position of the current run's offset 0
  bool first = true;
  Hit* hits = nullptr;
  size_t hits_n = 0;
  while (rid != kNoRun && core_.arena.valid(rid)) {
    const Run& r = core_.arena.at(rid);
    // Start loading the child slot the walk most likely probes next (the chain going on past the
    // run's end), alongside the run's hashes and entries: one memory round trip per run saved.
    if (const size_t end = pos + r.length.load(std::memory_order_relaxed); end < chain.size())
      ChildTable::prefetch(r, static_cast<uint32_t>(end - pos), chain[end]);
    // And the header of the child made last, most often the next run of a conversation's chain:
    // it then arrives with this run's blocks instead of after them.
    const bool guess_latest = latest_child_likely(r);
    if (const RunId next = r.latest_child.load(std::memory_order_relaxed);
        guess_latest && core_.arena.valid(next))
      prefetch_run(core_.arena.at(next));
    uint32_t matched = 0;
    bool continues_inside = false;
    for (;;) {
      const uint32_t v1 = r.version.load(std::memory_order_acquire);
      if (v1 & 1) {
        detail::cpu_pause();
        continue;
      }
      const Word* hashes = r.hashes.load(std::memory_order_acquire);
      const Word* ents = r.entries.load(std::memory_order_acquire);
      size_t len = r.length.load(std::memory_order_relaxed);
      size_t n = r.entry_count.load(std::memory_order_relaxed);
      len = hashes ? std::min(len, WordSlab::capacity(hashes)) : 0;
      n = ents ? std::min(n, WordSlab::capacity(ents)) : 0;
      const Word* ent = ents ? WordSlab::data(ents) : nullptr;
      const auto entry = [&](size_t i) {
        return HolderEntry::unpack(ent[i].load(std::memory_order_relaxed));
      };
      const Word* h = hashes ? WordSlab::data(hashes) : nullptr;
      const size_t reach = std::min(len, chain.size() - pos);
      // How far any holder still in the race reaches in this run.
      size_t alive_bound = 0;
      if (first) {
        // The first run is most often a popular prefix with a hundred holders, so it is compared
        // first and its holders are copied once, straight into `out`, clamped to the match.
        // Clamping to the match unbounded by alive_bound is exact: when alive_bound is the
        // smaller, every depth is at most alive_bound already, and the chain goes on inside the
        // run, so the walk ends here and the race is not used.
        const size_t m = common_prefix(h, chain.subspan(pos), reach);
        prefetch_next_child(r, m, chain, pos);
        // `out` keeps the previous answer's size, so resizing it to n zero-fills only the
        // difference, not a hundred holders about to be overwritten.
        out.resize(n);
        const detail::ClampedCopy copied =
            detail::copy_clamped(ent, n, static_cast<uint32_t>(m), out.data());
        if (copied.zeros != 0)
          std::erase_if(out, [](const HolderMatch& x) { return x.any_depth == 0; });
        alive_bound = copied.max_any;
        // The race is the holders of `out` that reach the match, unlisted.
        alive_n = copied.full;
        matched = static_cast<uint32_t>(std::min(m, alive_bound));
        continues_inside = alive_bound < reach && m > alive_bound;
      } else {
        // Both arrays are asked for before either is read: a run that is not its parent's latest
        // child (the run below a popular prefix, always) was not prefetched, and matching the
        // race first and comparing after made its two misses one after the other.
        detail::prefetch_line(h);
        detail::prefetch_line(ent);
        hits = room(tl_hits, n);
        hits_n = race_listed ? match_alive(entry, n, ListedRace{out, alive, alive_n}, hits)
                             : match_alive(entry, n, UnlistedRace{out, pos, alive_n}, hits);
        for (size_t i = 0; i < hits_n; ++i)
          alive_bound = std::max<size_t>(alive_bound, hits[i].e.any);
        // The reach of the holders still in the race bounds the comparison.
        const size_t limit = std::min(reach, alive_bound);
        matched = static_cast<uint32_t>(common_prefix(h, chain.subspan(pos), limit));
        prefetch_next_child(r, matched, chain, pos);
        continues_inside = matched == limit && limit < len && pos + limit < chain.size() &&
                           h[limit].load(std::memory_order_relaxed) == chain[pos + limit];
      }
      const bool valid_start = len > 0 && h[0].load(std::memory_order_relaxed) == chain[pos];
      std::atomic_thread_fence(std::memory_order_acquire);
      if (r.version.load(std::memory_order_relaxed) != v1) continue;
      if (!valid_start)
        matched = 0;  // a run being killed, or a recycled slot: the chain ends before it
      break;
    }
    if (runs_walked) ++*runs_walked;
    if (matched == 0) break;
    const size_t frontier = pos + matched;
    // The next run is most often the child this run made last, whose header was prefetched on
    // entering this run and has arrived by now: start loading its blocks while this run's holders
    // are settled, so entering it costs no round trip of its own.
    if (const RunId next = r.latest_child.load(std::memory_order_relaxed);
        guess_latest && frontier < chain.size() && core_.arena.valid(next)) {
      const Run& n = core_.arena.at(next);
      detail::prefetch_line(n.hashes.load(std::memory_order_relaxed));
      detail::prefetch_line(n.entries.load(std::memory_order_relaxed));
      if (const RunId after = n.latest_child.load(std::memory_order_relaxed);
          core_.arena.valid(after))
        prefetch_run(core_.arena.at(after));
    }
    if (first) {
      first = false;  // its holders went into `out` above
    } else {
      // The holders that cover everything matched here stay in the race (at most one per hit).
      alive = room(tl_alive, hits_n);
      alive_n = 0;
      race_listed = true;
      for (size_t i = 0; i < hits_n; ++i) {
        const HolderEntry& e = hits[i].e;
        HolderMatch& m = out[hits[i].k];
        if (m.device_depth == pos) m.device_depth += std::min<uint32_t>(e.device, matched);
        m.any_depth += std::min<uint32_t>(e.any, matched);
        if (m.any_depth == frontier) alive[alive_n++] = hits[i].k;
      }
    }
    // Continue below this run only if some holder covered everything matched here.
    if (alive_n == 0 || continues_inside || frontier >= chain.size()) break;
    rid = ChildTable::find(r, matched, chain[frontier]);
    pos = frontier;
  }
  // No first run finished (the chain's first block is in none, or it was being killed): no holder.
  if (first) out.clear();
}

}  // namespace kvgate::index::chain
