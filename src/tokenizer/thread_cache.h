// Per-thread memo of short texts' token ids: no lock, no sharing, exact by construction (a
// text's ids depend only on its bytes and on the owner that encoded them).
//
// Each owner (a BPE model's words, a tokenizer's short stretches) takes an id from
// new_thread_cache_owner() that is never reused, so an owner created where a destroyed one lived
// never meets that one's entries. A thread keeps the caches of its last few owners.
//
// Threading: every function touches only the calling thread's storage.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/block_hash.h"
#include "tokenizer/unicode.h"

namespace kvgate::tokenizer {

class ThreadTokenCache {
 public:
  // Entries a cache keeps before it starts over (a cache that fills is cleared, not evicted: the
  // texts that matter come back at once).
  static constexpr size_t kMaxEntries = 1 << 16;

  // Appends the ids of `key` to `out`: remembered ones, or those `encode(out)` appends (then
  // remembered).
  template <class Encode>
  void append_ids(std::string_view key, std::vector<TokenId>* out, Encode&& encode) {
    if (auto it = map_.find(key_of(key)); it != map_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
    const size_t before = out->size();
    encode(out);
    if (map_.size() >= kMaxEntries) map_.clear();
    map_.emplace(std::string(key), std::vector<TokenId>(out->begin() + before, out->end()));
  }

 private:
  absl::flat_hash_map<std::string, std::vector<TokenId>> map_;
};

inline uint64_t new_thread_cache_owner() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// This thread's cache of `owner`. `Tag` keeps the kinds of owner apart, so a thread alternating
// between a tokenizer's stretches and its model's words finds each cache without a lookup.
template <class Tag>
ThreadTokenCache& thread_token_cache(uint64_t owner) {
  thread_local absl::flat_hash_map<uint64_t, std::unique_ptr<ThreadTokenCache>> caches;
  thread_local uint64_t last_owner = 0;  // owners start at 1
  thread_local ThreadTokenCache* last = nullptr;
  if (owner == last_owner) return *last;
  if (caches.size() > 8 && !caches.contains(owner)) caches.clear();  // owners come and go (tests)
  std::unique_ptr<ThreadTokenCache>& cache = caches[owner];
  if (!cache) cache = std::make_unique<ThreadTokenCache>();
  last_owner = owner;
  last = cache.get();
  return *last;
}

}  // namespace kvgate::tokenizer
