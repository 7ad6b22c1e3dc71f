// Router-side block hashing: how kvgate names the content of a KV block.
//
// A prompt is cut into blocks of block_size tokens (a partial last block is not cached by the
// engines and is not hashed). Each block gets a position-independent *local* hash of its tokens,
// and a *sequence* hash that names the block together with everything before it:
//
//   local[i] = XXH3_64(tokens of block i as u32 little-endian, seed = salted seed)
//   seq[0]   = local[0]
//   seq[i]   = XXH3_64(seq[i-1] as u64 LE || local[i] as u64 LE, seed)
//
// The salted seed is the seed itself for an empty salt, else XXH3_64(salt bytes, seed): requests
// under different LoRA adapters or cache namespaces never share blocks. Tests pin known values
// (tests/core/block_hash_test.cc); changing the scheme breaks cross-replica agreement.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kvgate {

using TokenId = uint32_t;
using LocalHash = uint64_t;
using SeqHash = uint64_t;

inline constexpr uint64_t kDefaultHashSeed = 1337;

class BlockHasher {
 public:
  explicit BlockHasher(uint64_t seed = kDefaultHashSeed) : seed_(seed), salted_seed_(seed) {}

  // The same hasher for a LoRA name or cache namespace; an empty salt returns an unsalted copy.
  BlockHasher salted(std::string_view salt) const;

  uint64_t seed() const { return seed_; }
  LocalHash local(std::span<const TokenId> block) const;
  SeqHash chain(SeqHash parent, LocalHash local) const;

  // Hashes every full block of `tokens`, appending to `local` and `seq` (either may be null).
  // `parent` continues an existing chain (nullptr starts at the root). Returns the block count.
  size_t hash_blocks(std::span<const TokenId> tokens, uint32_t block_size,
                     std::vector<LocalHash>* local, std::vector<SeqHash>* seq,
                     const SeqHash* parent = nullptr) const;

 private:
  BlockHasher(uint64_t seed, uint64_t salted_seed) : seed_(seed), salted_seed_(salted_seed) {}
  uint64_t seed_;
  uint64_t salted_seed_;
};

}  // namespace kvgate
