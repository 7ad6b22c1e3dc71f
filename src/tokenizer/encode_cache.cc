#include "tokenizer/encode_cache.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include "xxhash.h"

namespace kvgate::tokenizer {

EncodeCache::EncodeCache(size_t budget_bytes) : shard_budget_(budget_bytes / kShards) {}

EncodeCache::Key EncodeCache::key_of(std::string_view stretch, bool first) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(stretch.data(), stretch.size(), first ? 1 : 0);
  return {h.low64, h.high64};
}

EncodeCache::Key EncodeCache::key_of_span(std::string_view bytes, std::span<const uint64_t> cuts) {
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, 2);  // stretches use seeds 0 and 1
  XXH3_128bits_update(&state, bytes.data(), bytes.size());
  XXH3_128bits_update(&state, cuts.data(), cuts.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return {h.low64, h.high64};
}

void EncodeCache::keys_of_prefixes(std::string_view text, std::span<const size_t> ends,
                                   std::vector<Key>* out) {
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, 3);  // stretches use seeds 0 and 1, spans 2
  size_t hashed = 0;
  for (const size_t end : ends) {
    XXH3_128bits_update(&state, text.data() + hashed, end - hashed);
    hashed = end;
    const XXH128_hash_t h = XXH3_128bits_digest(&state);  // the state goes on
    out->push_back({h.low64, h.high64});
  }
}

bool EncodeCache::find(const Key& key, std::vector<TokenId>* out, bool count_miss) {
  Shard& s = shard_of(key);
  {
    MutexLock lock(&s.mu);
    auto it = s.by_key.find(key);
    if (it != s.by_key.end()) {
      s.lru.splice(s.lru.begin(), s.lru, it->second);
      const std::vector<TokenId>& ids = it->second->ids;
      out->insert(out->end(), ids.begin(), ids.end());
      hits_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  if (count_miss) misses_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void EncodeCache::insert(const Key& key, std::span<const TokenId> ids) {
  const size_t c = cost(ids.size());
  if (c > shard_budget_) return;
  Entry e{key, std::vector<TokenId>(ids.begin(), ids.end())};
  std::list<Entry> evicted;  // freed after the lock is let go
  Shard& s = shard_of(key);
  MutexLock lock(&s.mu);
  if (s.by_key.contains(key)) return;  // another thread encoded the same stretch
  s.lru.push_front(std::move(e));
  s.by_key.emplace(key, s.lru.begin());
  s.bytes += c;
  while (s.bytes > shard_budget_ && !s.lru.empty()) {
    auto last = std::prev(s.lru.end());
    s.bytes -= cost(last->ids.size());
    s.by_key.erase(last->key);
    evicted.splice(evicted.begin(), s.lru, last);
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

EncodeCacheStats EncodeCache::stats() const {
  EncodeCacheStats out;
  out.hits = hits_.load(std::memory_order_relaxed);
  out.misses = misses_.load(std::memory_order_relaxed);
  out.evictions = evictions_.load(std::memory_order_relaxed);
  out.prefix_hits = prefix_hits_.load(std::memory_order_relaxed);
  for (const Shard& s : shards_) {
    MutexLock lock(&s.mu);
    out.entries += s.by_key.size();
    out.bytes += s.bytes;
  }
  return out;
}

}  // namespace kvgate::tokenizer
