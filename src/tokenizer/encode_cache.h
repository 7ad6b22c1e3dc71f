// EncodeCache: the ids of long stretches of text the tokenizer encoded recently, by content.
//
// Why it is exact: a tokenizer cuts the raw text at its added tokens (<|im_start|>, <|eot_id|>,
// ...) before anything else sees it, and normalizes and encodes each stretch between them on its
// own; a stretch's ids depend only on its bytes and on whether it begins the input. A chat client
// resends its whole conversation every turn, and a rendered chat template puts special tokens
// between the messages, so turn k+1's stretches are turn k's plus the new ones: with this cache
// only the new ones are encoded. Keys are 128-bit hashes of (bytes, first); no stretch is ever cut
// at a seam the tokenizer would not cut at itself.
//
// A whole text's prefix is kept too, up to its last boundary (AddedVocabulary::boundaries(): a
// special token no other token can reach across, such as a template's marker between messages):
// the cuts before a boundary depend on the bytes before it alone, so a text that begins with
// those bytes takes their ids at once and only the rest is cut and encoded. A conversation's
// next turn begins with its previous turn's prompt up to the generation marker.
//
// Bounded by `budget_bytes` (ids and bookkeeping), least recently used first out, in shards so
// that executor threads rarely meet on one lock.
//
// Threading: every method may run on any number of threads at once.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/tokenizer/tokenizer.h"

namespace kvgate::tokenizer {

class EncodeCache {
 public:
  explicit EncodeCache(size_t budget_bytes);

  struct Key {
    uint64_t lo = 0, hi = 0;
    bool operator==(const Key&) const = default;
    template <class H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.lo);
    }
  };
  static Key key_of(std::string_view stretch, bool first);
  // A span of several cuts: its bytes and how it was cut (`cuts`: a word per cut, the caller's
  // encoding of each token or stretch end). Never equal to a stretch's key.
  static Key key_of_span(std::string_view bytes, std::span<const uint64_t> cuts);

  // The keys of `text`'s prefixes ending at each of `ends` (ascending), in one pass over the
  // bytes. Never equal to a stretch's or a span's key.
  static void keys_of_prefixes(std::string_view text, std::span<const size_t> ends,
                               std::vector<Key>* out);

  // Appends the ids cached under `key` to `out`; false (nothing appended) if none are. A probe
  // (`count_miss` false) that finds nothing is not counted as a miss.
  bool find(const Key& key, std::vector<TokenId>* out, bool count_miss = true);
  // A text resumed from a cached prefix (EncodeCacheStats::prefix_hits).
  void note_prefix_hit() { prefix_hits_.fetch_add(1, std::memory_order_relaxed); }
  void insert(const Key& key, std::span<const TokenId> ids);

  EncodeCacheStats stats() const;

 private:
  static constexpr size_t kShards = 16;
  struct Entry {
    Key key;
    std::vector<TokenId> ids;
  };
  struct Shard {
    mutable Mutex mu;
    std::list<Entry> lru KVGATE_GUARDED_BY(mu);  // most recently used first
    absl::flat_hash_map<Key, std::list<Entry>::iterator> by_key KVGATE_GUARDED_BY(mu);
    size_t bytes KVGATE_GUARDED_BY(mu) = 0;
  };
  static size_t cost(size_t ids) { return ids * sizeof(TokenId) + 96; }
  Shard& shard_of(const Key& k) { return shards_[k.hi % kShards]; }

  const size_t shard_budget_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> hits_{0}, misses_{0}, evictions_{0}, prefix_hits_{0};
};

}  // namespace kvgate::tokenizer
