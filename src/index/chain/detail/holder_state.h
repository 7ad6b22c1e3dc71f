// HolderState: everything the chain index keeps for one holder beyond the runs' entries, owned by
// the lane that applies the holder's events (never read by lookups).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "index/chain/detail/record_map.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index::chain::detail {

inline constexpr uint8_t kAnyBit = 1;
inline constexpr uint8_t kDeviceBit = 2;

struct HolderState {
  RecordMap records;
  // Positions held beyond a gap in the holder's prefix of a run (run -> sorted offset << 2 | bits):
  // the runs' entries only carry the contiguous prefixes lookups need.
  absl::flat_hash_map<RunId, std::vector<uint32_t>> extras;
  // Places where two or more records sit (two engine hashes for one block): place -> records
  // holding it on any tier, on the device tier.
  absl::flat_hash_map<uint64_t, std::pair<uint32_t, uint32_t>> multi;
  // Copy counts above 15: (engine hash, tier) -> copies beyond 15.
  absl::flat_hash_map<std::pair<uint64_t, uint8_t>, uint32_t> overflow;
  uint64_t memberships = 0;
  uint64_t accounted_bytes = 0;

  uint32_t copies(const Record& r, size_t tier) const {
    const uint32_t n = r.copies.get(tier);
    if (n < 15) return n;
    auto it = overflow.find({r.engine, static_cast<uint8_t>(tier)});
    return n + (it == overflow.end() ? 0 : it->second);
  }
  void add_copy(Record& r, size_t tier) {
    const uint32_t n = r.copies.get(tier);
    if (n < 15) {
      r.copies.set(tier, n + 1);
    } else {
      ++overflow[{r.engine, static_cast<uint8_t>(tier)}];
    }
  }
  void drop_copy(Record& r, size_t tier) {
    if (!overflow.empty()) {
      auto it = overflow.find({r.engine, static_cast<uint8_t>(tier)});
      if (it != overflow.end()) {
        if (--it->second == 0) overflow.erase(it);
        return;
      }
    }
    r.copies.set(tier, r.copies.get(tier) - 1);
  }
  void drop_overflow(const Record& r) {
    if (overflow.empty()) return;
    for (uint8_t t = 0; t < kTierCount; ++t) overflow.erase({r.engine, t});
  }

  uint8_t extra_bits(RunId run, uint32_t offset) const {
    if (extras.empty()) return 0;
    auto it = extras.find(run);
    if (it == extras.end()) return 0;
    const auto& v = it->second;
    auto p = std::lower_bound(v.begin(), v.end(), offset << 2);
    return (p != v.end() && (*p >> 2) == offset) ? static_cast<uint8_t>(*p & 3) : 0;
  }
  void set_extra(RunId run, uint32_t offset, uint8_t bit) {
    auto& v = extras[run];
    auto p = std::lower_bound(v.begin(), v.end(), offset << 2);
    if (p != v.end() && (*p >> 2) == offset) {
      *p |= bit;
    } else {
      v.insert(p, (offset << 2) | bit);
    }
  }
  void clear_extra(RunId run, uint32_t offset, uint8_t bit) {
    if (extras.empty()) return;
    auto it = extras.find(run);
    if (it == extras.end()) return;
    auto& v = it->second;
    auto p = std::lower_bound(v.begin(), v.end(), offset << 2);
    if (p == v.end() || (*p >> 2) != offset) return;
    *p &= ~static_cast<uint32_t>(bit);
    if ((*p & 3) == 0) v.erase(p);
    if (v.empty()) extras.erase(it);
  }
  uint64_t bytes() const {
    // Hash-map slots as abseil lays them out (value + one control byte), vectors by capacity.
    uint64_t b = sizeof(HolderState) + records.bytes();
    b += extras.capacity() * (sizeof(std::pair<RunId, std::vector<uint32_t>>) + 1);
    for (const auto& [run, v] : extras) b += v.capacity() * sizeof(uint32_t);
    b += multi.capacity() * (sizeof(std::pair<uint64_t, std::pair<uint32_t, uint32_t>>) + 1);
    b += overflow.capacity() * (sizeof(std::pair<std::pair<uint64_t, uint8_t>, uint32_t>) + 1);
    return b;
  }
};

}  // namespace kvgate::index::chain::detail
