// The chain index's writers: stored, removed and cleared events, and holder removal.
#include <algorithm>
#include <thread>
#include <tuple>
#include <vector>

#include "index/chain/chain_index.h"
#include "index/chain/detail/child_table.h"
#include "index/chain/detail/run_session.h"

namespace kvgate::index::chain {

using detail::ChildTable;
using detail::HolderEntry;
using detail::kNoRun;
using detail::kRootRun;
using detail::Record;
using detail::Run;
using detail::RunGuard;
using detail::RunId;
using detail::RunSession;
using detail::TierCopies;
using detail::Word;
using detail::WordSlab;

namespace {

constexpr size_t kDeviceTier = static_cast<size_t>(Tier::kDevice);

// Moves `s` to the place of `seq` right after (qrun, qoff) (qoff -1 with the root starts a chain):
// the next position of the same run, an append at its end, or a child (found or created). Returns
// the offset in the session's run, or -1 when the place cannot be reached (qrun died under us;
// callers hold a membership in it, so this does not happen).
int64_t advance(detail::IndexCore& core, RunSession& s, RunId qrun, int64_t qoff, SeqHash seq,
                size_t capacity) {
  const uint32_t next = static_cast<uint32_t>(qoff + 1);
  // A child found dead (being killed by another lane, not yet unlinked from its parent) is waited
  // out: the killer holds no lock while we retry, so it gets there. Spin briefly, then yield (on
  // two cores the killer may need this thread's core).
  for (uint64_t attempt = 0;; ++attempt) {
    if (attempt > 64) std::this_thread::yield();
    if (s.is_open() && s.run() == qrun) {
      if (qrun != kRootRun) {
        if (next < s.length()) {
          if (s.hash_at(next) == seq) return next;
        } else if (next == s.length() && s.can_append() && !s.has_child(next, seq)) {
          // (A child may already hang at the end: a run truncated back to where a chain left it.)
          s.append(seq);
          return next;
        }
      }
      const RunId c = s.child(next, seq, capacity);
      s.close();  // q keeps a membership or a child: never dead here
      if (s.open(c) && s.parent() == qrun && s.parent_offset() == next && s.length() > 0 &&
          s.hash_at(0) == seq) {
        return 0;
      }
      s.close();  // a child being killed: look again once it is unlinked
      detail::cpu_pause();
      continue;
    }
    if (RunId dead = s.close(); dead != kNoRun) core.kill(dead);
    if (qrun == kRootRun) {
      // Chain starts: find an existing root child without taking the root's lock.
      const RunId c = ChildTable::find(core.arena.at(kRootRun), 0, seq);
      if (c != kNoRun) {
        if (s.open(c) && s.parent() == kRootRun && s.parent_offset() == 0 && s.length() > 0 &&
            s.hash_at(0) == seq) {
          return 0;
        }
        s.close();
      }
    }
    if (!s.open(qrun, next)) return -1;
  }
}

}  // namespace

void ChainIndex::store(HolderState& hs, uint32_t holder, const Event& e, ApplyResult& r) {
  const size_t n = e.engine_hashes.size();
  RunId qrun = kRootRun;
  int64_t qoff = -1;
  SeqHash prev = 0;
  if (e.has_parent) hs.records.prefetch(e.parent);
  detail::prefetch_array(e.local_hashes, detail::PrefetchWindow::kArrayLines);
  const detail::PrefetchWindow window(hs.records, e.engine_hashes);
  if (e.has_parent) {
    const Record* parent = hs.records.find(e.parent);
    if (parent == nullptr) {
      ++r.orphan_events;
      r.orphan_blocks += static_cast<uint32_t>(n);
      return;
    }
    qrun = parent->run;
    qoff = parent->offset;
    prev = core_.seq_at(qrun, parent->offset);
  }
  const size_t tier = static_cast<size_t>(e.tier);
  const int device_delta = tier == kDeviceTier ? 1 : 0;
  TierCopies one_copy;  // a block newly placed by this event: one copy, on its tier
  one_copy.set(tier, 1);
  // Old places of engine hashes re-stored elsewhere: released after the event's new places are
  // held (a new place may hang below an old one).
  std::vector<std::tuple<RunId, uint32_t, int>> moved_from;
  RunSession s(core_, hs, holder);
  for (size_t i = 0; i < n; ++i) {
    const SeqHash seq =
        (i == 0 && !e.has_parent) ? e.local_hashes[0] : hasher_.chain(prev, e.local_hashes[i]);
    const EngineHash engine = e.engine_hashes[i];
    window.reached(i);
    Record* rec = hs.records.find(engine);
    bool moved = false;
    if (rec != nullptr) {
      const SeqHash held = (s.is_open() && s.run() == rec->run)
                               ? s.hash_at(rec->offset)
                               : core_.seq_at(rec->run, rec->offset);
      moved = held != seq;
    }
    if (rec == nullptr && s.is_open() && s.run() == qrun && qoff + 1 == s.length() &&
        s.append_held(seq, device_delta != 0)) {
      // The common case, a new block continuing the holder's prefix at the run's end.
      const auto offset = static_cast<uint16_t>(s.length() - 1);
      hs.records.insert(engine, s.run(), offset, one_copy);
      ++r.stored_blocks;
      qoff = offset;
      prev = seq;
      continue;
    }
    if (moved) {
      // Latest store wins: the engine hash now names a block at another place.
      moved_from.emplace_back(rec->run, rec->offset, hs.copies(*rec, kDeviceTier) > 0 ? -1 : 0);
      hs.drop_overflow(*rec);
      ++r.moved_blocks;
    }
    const int64_t off = advance(core_, s, qrun, qoff, seq, n - i);
    if (off < 0) {
      r.orphan_blocks += static_cast<uint32_t>(n - i);
      break;
    }
    const auto offset = static_cast<uint32_t>(off);
    if (rec == nullptr) {
      hs.records.insert(engine, s.run(), static_cast<uint16_t>(offset), one_copy);
      s.adjust(offset, +1, device_delta);
    } else if (moved) {
      rec->run = s.run();
      rec->offset = static_cast<uint16_t>(offset);
      rec->copies = one_copy;
      s.adjust(offset, +1, device_delta);
    } else {
      const bool first_on_tier = hs.copies(*rec, tier) == 0;
      hs.add_copy(*rec, tier);
      if (first_on_tier && device_delta) s.adjust(offset, 0, 1);
    }
    ++r.stored_blocks;
    qrun = s.run();
    qoff = offset;
    prev = seq;
  }
  if (RunId dead = s.close(); dead != kNoRun) core_.kill(dead);
  for (const auto& [run, offset, d_device] : moved_from) {
    if (!s.open(run, offset)) continue;
    s.adjust(offset, -1, d_device);
    if (RunId dead = s.close(); dead != kNoRun) core_.kill(dead);
  }
}

void ChainIndex::remove(HolderState& hs, uint32_t holder, const Event& e, ApplyResult& r) {
  const size_t tier = static_cast<size_t>(e.tier);
  const detail::PrefetchWindow window(hs.records, e.engine_hashes);
  RunSession s(core_, hs, holder);
  for (size_t i = 0; i < e.engine_hashes.size(); ++i) {
    window.reached(i);
    Record* rec = hs.records.find(e.engine_hashes[i]);
    if (rec == nullptr || hs.copies(*rec, tier) == 0) {
      ++r.unknown_removals;
      continue;
    }
    if (!s.is_open() || s.run() != rec->run) {
      if (RunId dead = s.close(); dead != kNoRun) core_.kill(dead);
      if (!s.open(rec->run, rec->offset))
        continue;  // cannot happen: the record holds a membership there
    }
    hs.drop_copy(*rec, tier);
    const bool any_left = rec->copies.any();
    const int d_device = (tier == kDeviceTier && hs.copies(*rec, kDeviceTier) == 0) ? -1 : 0;
    if (any_left || !s.release_held(rec->offset, d_device != 0)) {
      s.adjust(rec->offset, any_left ? 0 : -1, d_device);
    }
    if (!any_left) hs.records.erase(rec);
    ++r.removed_blocks;
  }
  if (RunId dead = s.close(); dead != kNoRun) core_.kill(dead);
}

void ChainIndex::clear_holder(HolderState& hs, uint32_t holder) {
  // Group the holder's places by run, then drop its entry and counts run by run.
  absl::flat_hash_map<RunId, std::vector<uint32_t>> places;
  hs.records.for_each([&](const Record& rec) { places[rec.run].push_back(rec.offset); });
  for (auto& [run, offsets] : places) {
    std::sort(offsets.begin(), offsets.end());
    offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    Run& rr = core_.arena.at(run);
    bool dead = false;
    {
      RunGuard g(core_.arena, run);
      Word* entries = rr.entries.load(std::memory_order_relaxed);
      const uint32_t n = rr.entry_count.load(std::memory_order_relaxed);
      for (uint32_t i = 0; i < n; ++i) {
        if (HolderEntry::unpack(WordSlab::data(entries)[i].load(std::memory_order_relaxed))
                .holder != holder)
          continue;
        rr.begin_write();
        for (uint32_t j = i; j + 1 < n; ++j) {
          WordSlab::data(entries)[j].store(
              WordSlab::data(entries)[j + 1].load(std::memory_order_relaxed),
              std::memory_order_relaxed);
        }
        rr.entry_count.store(n - 1, std::memory_order_relaxed);
        rr.end_write();
        break;
      }
      for (uint32_t off : offsets) {
        const uint32_t c = detail::count_at(rr.holder_counts, off) - 1;
        detail::set_count(rr.holder_counts, off, c);
        if (c == 0) core_.resident.fetch_sub(1, std::memory_order_relaxed);
      }
      rr.memberships -= static_cast<uint32_t>(offsets.size());
      core_.memberships.fetch_sub(offsets.size(), std::memory_order_relaxed);
      if (rr.memberships > 0 || rr.children.load(std::memory_order_relaxed) != nullptr)
        core_.truncate_locked(rr);
      dead = core_.dead_candidate_locked(run, rr);
    }
    if (dead) core_.kill(run);
  }
  if (hs.memberships > 0) core_.holders.fetch_sub(1, std::memory_order_relaxed);
  hs.memberships = 0;
  hs.records.clear();
  hs.extras.clear();
  hs.multi.clear();
  hs.overflow.clear();
}

void ChainIndex::remove_holder(HolderId holder) {
  HolderState* hs = find_state(holder.value());
  if (hs == nullptr) return;
  clear_holder(*hs, holder.value());
  hs->records.reserve(0);  // the id may go to another engine, with another pool
  hs->extras = {};
  hs->multi = {};
  hs->overflow = {};
  account(*hs);
}

void ChainIndex::expect_capacity(HolderId holder, uint64_t blocks) {
  if (!holder.valid() || holder.value() >= kMaxHolders) return;
  HolderState& hs = state(holder.value());
  hs.records.reserve(blocks <= kMaxCapacityHint ? blocks : 0);
  account(hs);
}

void ChainIndex::account(HolderState& hs) {
  const uint64_t now = hs.bytes();
  if (now >= hs.accounted_bytes) {
    holder_bytes_.fetch_add(now - hs.accounted_bytes, std::memory_order_relaxed);
  } else {
    holder_bytes_.fetch_sub(hs.accounted_bytes - now, std::memory_order_relaxed);
  }
  hs.accounted_bytes = now;
}

ApplyResult ChainIndex::apply(HolderId holder, std::span<const Event> events) {
  ApplyResult r;
  if (!holder.valid() || holder.value() >= kMaxHolders) {
    r.malformed_events = static_cast<uint32_t>(events.size());
    return r;
  }
  HolderState& hs = state(holder.value());
  for (const Event& e : events) {
    if (malformed_event(e)) {
      ++r.malformed_events;
      continue;
    }
    switch (e.kind) {
      case EventKind::kStored:
        store(hs, holder.value(), e, r);
        break;
      case EventKind::kRemoved:
        remove(hs, holder.value(), e, r);
        break;
      case EventKind::kCleared:
        clear_holder(hs, holder.value());
        ++r.clears;
        break;
    }
  }
  account(hs);
  return r;
}

}  // namespace kvgate::index::chain
