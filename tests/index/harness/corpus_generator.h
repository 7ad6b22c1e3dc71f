// A seeded random generator of index workloads for the exactness harness.
//
// It keeps a tree of block contents shared by every holder (so holders share prefixes and
// diverge into siblings) and, per holder, its own belief of what the holder holds, and draws a
// stream of steps: a holder's event batch, or the removal of a holder from the fleet. The
// batches mix the traffic an engine sends (chains extended from held blocks, evictions of random
// and thus often middle blocks, heals of evicted blocks, duplicate and host-tier copies, clears)
// with what a faulty or racing feed sends (orphans, unknown removals, engine hashes re-stored at
// another place, two engine hashes for one block, malformed events). Its belief may drift from
// the truth, which only makes the stream more varied: the reference defines the answers.
//
// Every step also carries the chains to replay as lookups after it: each stored chain from the
// root in full, its first half, with its middle block replaced (later blocks unchanged, so an
// index that looks past a miss over-counts), and with its tail replaced and extended; plus one
// chain of the shared tree chosen at random.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "harness/rng.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index::harness {

struct GeneratorOptions {
  uint64_t seed = 1;
  uint32_t holders = 12;
  uint32_t holder_capacity = 384;  // blocks a holder keeps before it evicts
  uint32_t max_depth = 160;        // chains deeper than this restart at a root
  uint64_t hash_seed = kDefaultHashSeed;
};

struct Step {
  enum class Kind { kBatch, kRemoveHolder };
  Kind kind = Kind::kBatch;
  HolderId holder;
  std::vector<Event> events;  // views into the buffers below
  std::vector<std::vector<SeqHash>> lookups;

  void clear();
  Event& stored(std::vector<EngineHash> engine, std::vector<LocalHash> local, bool has_parent,
                EngineHash parent, Tier tier);
  Event& removed(std::vector<EngineHash> engine, Tier tier);
  void cleared();
  // "stored x3 [parent] device, removed x1 host, ..." for failure messages.
  std::string describe() const;

 private:
  std::deque<std::vector<EngineHash>> engine_buf_;
  std::deque<std::vector<LocalHash>> local_buf_;
};

class CorpusGenerator {
 public:
  explicit CorpusGenerator(const GeneratorOptions& options);

  // Fills `step` (cleared first) with the next step.
  void next(Step& step);
  uint64_t events() const { return events_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    uint32_t parent;
    uint32_t depth;
    LocalHash local;
    SeqHash seq;
    EngineHash engine[2];  // two engine hash schemes for one content ("twins")
    std::vector<uint32_t> children;
  };
  // A held block as the generator believes it: node and engine-hash variant, with its copies.
  using Key = uint64_t;  // node * 2 + variant
  struct Copies {
    uint32_t slot;  // position in Shadow::keys
    uint32_t device = 0;
    uint32_t host = 0;
  };
  struct Shadow {
    std::vector<Key> keys;
    absl::flat_hash_map<Key, Copies> copies;
    std::vector<Key> evicted;  // recently evicted, heal candidates
    void add(Key k, Tier t);
    // Removes one copy on `t`; false when there was none.
    bool remove(Key k, Tier t);
    void reset();
  };

  uint32_t new_node(uint32_t parent);
  uint32_t pick_root();
  uint32_t pick_child(uint32_t node);
  EngineHash engine_of(Key k) const { return nodes_[k / 2].engine[k % 2]; }
  uint32_t node_of(Key k) const { return static_cast<uint32_t>(k / 2); }
  Key random_key(const Shadow& s) { return s.keys[rng_.below(s.keys.size())]; }
  void path(uint32_t node, std::vector<SeqHash>& out) const;
  void add_lookups(Step& step, uint32_t last_node);

  void extend(Step& step, Shadow& s, bool long_chain);
  void evict(Step& step, Shadow& s, size_t count, Key keep);
  void remove_some(Step& step, Shadow& s);
  void heal(Step& step, Shadow& s);
  void duplicate(Step& step, Shadow& s);
  void orphan(Step& step, Shadow& s);
  void unknown_removal(Step& step, Shadow& s);
  void move(Step& step, Shadow& s);
  void malformed(Step& step);

  GeneratorOptions options_;
  Rng rng_;
  BlockHasher hasher_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> roots_;
  std::vector<Shadow> shadows_;
  uint64_t events_ = 0;
};

}  // namespace kvgate::index::harness
