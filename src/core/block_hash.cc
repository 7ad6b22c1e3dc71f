#include "kvgate/core/block_hash.h"

#include <bit>
#include <cstring>

// Inlined: chain() hashes a constant 16 bytes, and the inlined XXH3 takes its short-input path
// directly (the index computes one per stored block).
#define XXH_INLINE_ALL
#include "xxhash.h"

namespace kvgate {

static_assert(std::endian::native == std::endian::little,
              "block hashing reads token ids and chain words as little-endian bytes in place");

BlockHasher BlockHasher::salted(std::string_view salt) const {
  if (salt.empty()) return BlockHasher(seed_, seed_);
  return BlockHasher(seed_, XXH3_64bits_withSeed(salt.data(), salt.size(), seed_));
}

LocalHash BlockHasher::local(std::span<const TokenId> block) const {
  return XXH3_64bits_withSeed(block.data(), block.size_bytes(), salted_seed_);
}

SeqHash BlockHasher::chain(SeqHash parent, LocalHash local) const {
  uint64_t words[2] = {parent, local};
  return XXH3_64bits_withSeed(words, sizeof(words), seed_);
}

size_t BlockHasher::hash_blocks(std::span<const TokenId> tokens, uint32_t block_size,
                                std::vector<LocalHash>* local, std::vector<SeqHash>* seq,
                                const SeqHash* parent) const {
  if (block_size == 0) return 0;
  const size_t n = tokens.size() / block_size;
  if (local) local->reserve(local->size() + n);
  if (seq) seq->reserve(seq->size() + n);
  bool have_prev = parent != nullptr;
  SeqHash prev = have_prev ? *parent : 0;
  for (size_t i = 0; i < n; ++i) {
    const LocalHash l = this->local(tokens.subspan(i * block_size, block_size));
    const SeqHash s = have_prev ? chain(prev, l) : l;
    if (local) local->push_back(l);
    if (seq) seq->push_back(s);
    prev = s;
    have_prev = true;
  }
  return n;
}

}  // namespace kvgate
