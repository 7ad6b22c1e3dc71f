// BlockSet: what one engine rank holds, kept by the relay from the rank's normalized events so
// that a subscriber whose stream cannot be continued gets the state as a snapshot.
//
// It holds exactly what a gateway's index holds for that rank after the same events (the
// reference indexer's rules): each engine hash names one block at one place (its sequence hash,
// fixed when it was stored, the latest store winning), with copies per tier; a stored event whose
// parent the rank does not hold is dropped whole; a block stays held when blocks before it are
// evicted. So it also keeps, as "ghosts", the blocks no longer held that still lead to held ones:
// a snapshot must rebuild each held block at its place, and a block's place is its chain.
//
// snapshot() writes the state as events that rebuild it in an emptied holder: every block
// stored under its parent, ghosts under names of their own, then one removal of the ghosts. Any
// indexer fed those events and then the rank's later batches holds what one fed the whole stream
// holds (tests/relay/block_set_test.cc checks it against the reference on the exactness corpus).
//
// Threading: none; the relay keeps one per rank under that rank's lock.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::relay {

using index::EngineHash;

class BlockSet {
 public:
  explicit BlockSet(uint64_t hash_seed = kDefaultHashSeed) : hasher_(hash_seed) {}

  // Applies one batch's events in order (what an indexer's apply() would do with them).
  index::ApplyResult apply(std::span<const index::Event> events);
  void clear();

  // Calls `emit` with events (views valid during the call) that rebuild this state in an empty
  // holder, `max_blocks_per_event` blocks at most each.
  void snapshot(absl::FunctionRef<void(const index::Event&)> emit,
                size_t max_blocks_per_event = 256) const;

  uint64_t copies() const { return copies_; }      // block copies held, over every tier
  size_t held() const { return records_.size(); }  // engine hashes held
  size_t ghosts() const;                           // places kept only for the blocks after them

 private:
  using Copies = std::array<uint32_t, index::kTierCount>;
  struct Record {
    SeqHash seq = 0;
    Copies copies{};
  };
  // A place in the chain tree that some record is at or leads through.
  struct Node {
    SeqHash parent = 0;
    bool root = false;
    LocalHash local = 0;
    uint32_t children = 0;  // nodes whose parent this is
    uint32_t names = 0;     // records at this place
  };

  void store(const index::Event& e, index::ApplyResult& r);
  void remove(const index::Event& e, index::ApplyResult& r);
  // The node at `seq` (created under `parent` if new) gains a record.
  void name(SeqHash seq, bool root, SeqHash parent, LocalHash local);
  // The node at `seq` loses a record; nodes nothing leads through any more go.
  void unname(SeqHash seq);

  BlockHasher hasher_;
  absl::flat_hash_map<EngineHash, Record> records_;
  absl::flat_hash_map<SeqHash, Node> nodes_;
  uint64_t copies_ = 0;
};

}  // namespace kvgate::relay
