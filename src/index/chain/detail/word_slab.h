// WordSlab: type-stable memory for the chain index's arrays (hash arrays, holder-entry tables,
// child tables, position counts).
//
// Every block is an array of std::atomic<uint64_t> words whose word 0 holds the block's data
// capacity (and, in its top byte, its size class); data starts at word 1. Blocks come in size
// classes of 2, 3, 4, 6, 8, 12, ... words (powers of two and halfway steps, so a block wastes at
// most a third of itself) carved from chunks
// that are never returned to the system while the slab lives, and freed blocks go back to a
// lock-free free list of their class. So a reader that followed a pointer to a block which a
// writer has since replaced and freed (or even reused) still reads valid atomic words of a block
// of that class: it may read stale or foreign data, never unmapped memory, and the seqlock it
// read the pointer under tells it to retry. Readers clamp every index by the capacity in word 0.
//
// Threading: allocate() and free() from any thread (lock-free pops and pushes; a class's chunk
// refill takes that class's mutex).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvgate/core/thread_annotations.h"

namespace kvgate::index::chain::detail {

using Word = std::atomic<uint64_t>;

class WordSlab {
 public:
  // Class c holds (2 + (c & 1)) << (c / 2) words including the header word.
  static constexpr int kClasses = 50;
  static constexpr size_t kChunkBytes = size_t{1} << 20;

  // `numa_node` >= 0 places chunks on that node (libnuma), -1 leaves placement to the OS.
  explicit WordSlab(int numa_node = -1);
  ~WordSlab();
  WordSlab(const WordSlab&) = delete;
  WordSlab& operator=(const WordSlab&) = delete;

  // A block with room for at least `data_words` data words (word 0 = its capacity), or nullptr
  // when the request exceeds the largest class. The data words are not cleared.
  Word* allocate(size_t data_words);
  void free(Word* block);

  static size_t capacity(const Word* block) {
    return static_cast<size_t>(block[0].load(std::memory_order_relaxed) &
                               ((uint64_t{1} << 56) - 1));
  }
  static size_t class_words(int cls) { return size_t{2u + (cls & 1u)} << (cls / 2); }
  static Word* data(Word* block) { return block + 1; }
  static const Word* data(const Word* block) { return block + 1; }

  // Bytes reserved from the system (chunks), and bytes in blocks currently allocated.
  uint64_t reserved_bytes() const { return reserved_.load(std::memory_order_relaxed); }
  uint64_t live_bytes() const { return live_.load(std::memory_order_relaxed); }
  // Bytes sitting in each class's free list (walks the lists: for benchmarks, writers quiet).
  std::vector<std::pair<size_t, uint64_t>> free_bytes_by_class() const;

 private:
  struct Class {
    std::atomic<uint64_t> free_head{
        0};  // tagged pointer: low 48 bits address, high 16 bits ABA tag
    mutable Mutex refill_mu;
    Word* bump KVGATE_GUARDED_BY(refill_mu) = nullptr;  // next uncarved block of the chunk
    Word* bump_end KVGATE_GUARDED_BY(refill_mu) = nullptr;
  };
  static int class_of(size_t words);
  Word* pop(Class& c);
  void push(Class& c, Word* block);
  Word* carve(int cls);
  Word* split_larger(int cls);

  const int numa_node_;
  Class classes_[kClasses];
  Mutex chunks_mu_;
  std::vector<std::pair<void*, size_t>> chunks_ KVGATE_GUARDED_BY(chunks_mu_);
  std::atomic<uint64_t> reserved_{0};
  std::atomic<uint64_t> live_{0};
};

}  // namespace kvgate::index::chain::detail
