// Apply cost by event kind: where an indexer's per-block write cost goes, beside one hash-map
// operation per block. See replay.h.
#include <memory>
#include <vector>

#include "index/chain/detail/record_map.h"
#include "kind_timer.h"
#include "replay.h"

namespace kvgate::bench {

ApplyByKind run_apply_by_kind(const corpus::Corpus& c, index::Indexer& index,
                              bool announce_capacity) {
  if (announce_capacity) bench::announce_capacity(c, index);
  KindTimer timer;
  for (const corpus::Corpus::Op& op : c.ops()) {
    if (op.kind == corpus::Corpus::Op::Kind::kLookup) continue;
    const auto& b = c.batches()[op.index];
    for (const index::Event& e : c.events(b)) {
      timer.time(e, [&] { index.apply(b.holder, std::span<const index::Event>(&e, 1)); });
    }
  }
  return timer.by_kind();
}

ApplyByKind run_record_maps_alone(const corpus::Corpus& c, bool announce_capacity) {
  using index::chain::detail::PrefetchWindow;
  using index::chain::detail::Record;
  using index::chain::detail::RecordMap;
  std::vector<std::unique_ptr<RecordMap>> maps;
  uint64_t sink = 0;
  KindTimer timer;
  for (const corpus::Corpus::Op& op : c.ops()) {
    if (op.kind == corpus::Corpus::Op::Kind::kLookup) continue;
    const auto& b = c.batches()[op.index];
    const uint32_t holder = b.holder.value();
    if (holder >= maps.size()) maps.resize(holder + 1);
    if (!maps[holder]) {
      maps[holder] = std::make_unique<RecordMap>();
      if (announce_capacity) maps[holder]->reserve(c.header().params.pool_blocks);
    }
    RecordMap& map = *maps[holder];
    for (const index::Event& e : c.events(b)) {
      timer.time(e, [&] {
        // As the chain index's writers use the map: each block's buckets asked for a window ahead
        // of its find; a store finds the parent, then finds and inserts each block, a removal
        // finds and erases each block.
        if (e.kind == index::EventKind::kStored && e.has_parent) map.prefetch(e.parent);
        const PrefetchWindow window(map, e.engine_hashes);
        if (e.kind == index::EventKind::kStored) {
          if (e.has_parent) sink += map.find(e.parent) != nullptr;
          for (size_t i = 0; i < e.engine_hashes.size(); ++i) {
            window.reached(i);
            if (map.find(e.engine_hashes[i]) == nullptr) {
              map.insert(e.engine_hashes[i], 1, static_cast<uint16_t>(i), {});
            }
          }
        } else if (e.kind == index::EventKind::kRemoved) {
          for (size_t i = 0; i < e.engine_hashes.size(); ++i) {
            window.reached(i);
            if (Record* r = map.find(e.engine_hashes[i])) map.erase(r);
          }
        } else {
          map.clear();
        }
      });
    }
  }
  ApplyByKind r = timer.by_kind();
  r.sink = sink;
  return r;
}

}  // namespace kvgate::bench
