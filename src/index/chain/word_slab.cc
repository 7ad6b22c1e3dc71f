#include "index/chain/detail/word_slab.h"

#include <numa.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>

namespace kvgate::index::chain::detail {
namespace {

constexpr uint64_t kAddressMask = (uint64_t{1} << 48) - 1;

uint64_t pack(Word* p, uint64_t tag) {
  return (reinterpret_cast<uint64_t>(p) & kAddressMask) | (tag << 48);
}
Word* address(uint64_t v) { return reinterpret_cast<Word*>(v & kAddressMask); }
uint64_t tag(uint64_t v) { return v >> 48; }

}  // namespace

WordSlab::WordSlab(int numa_node)
    : numa_node_(numa_node >= 0 && numa_available() >= 0 ? numa_node : -1) {}

WordSlab::~WordSlab() {
  for (auto& [p, bytes] : chunks_) {
    if (numa_node_ >= 0) {
      numa_free(p, bytes);
    } else {
      ::operator delete(p, std::align_val_t(64));
    }
  }
}

int WordSlab::class_of(size_t words) {
  if (words <= 2) return 0;
  const int k = std::bit_width(words - 1);  // 2^k >= words > 2^(k-1)
  // 3 * 2^(k-2) lies between 2^(k-1) and 2^k: take it when it is enough.
  if ((size_t{3} << (k - 2)) >= words) return 2 * (k - 2) + 1;
  return 2 * (k - 1);
}

Word* WordSlab::allocate(size_t data_words) {
  const int cls = class_of(data_words + 1);
  if (cls >= kClasses) return nullptr;
  Class& c = classes_[cls];
  Word* block = pop(c);
  if (block == nullptr) block = split_larger(cls);
  if (block == nullptr) block = carve(cls);
  block[0].store((class_words(cls) - 1) | (uint64_t(cls) << 56), std::memory_order_relaxed);
  live_.fetch_add(sizeof(Word) * class_words(cls), std::memory_order_relaxed);
  return block;
}

void WordSlab::free(Word* block) {
  if (block == nullptr) return;
  const int cls = static_cast<int>(block[0].load(std::memory_order_relaxed) >> 56);
  live_.fetch_sub(sizeof(Word) * class_words(cls), std::memory_order_relaxed);
  push(classes_[cls], block);
}

// Treiber stack: the link lives in data word 0 (block[1]); the 16-bit tag in the head makes a
// pop that raced a pop-push of the same block fail its CAS.
Word* WordSlab::pop(Class& c) {
  uint64_t head = c.free_head.load(std::memory_order_acquire);
  while (address(head) != nullptr) {
    Word* top = address(head);
    const uint64_t next = top[1].load(std::memory_order_relaxed);
    if (c.free_head.compare_exchange_weak(head, pack(address(next), tag(head) + 1),
                                          std::memory_order_acq_rel, std::memory_order_acquire)) {
      return top;
    }
  }
  return nullptr;
}

void WordSlab::push(Class& c, Word* block) {
  uint64_t head = c.free_head.load(std::memory_order_relaxed);
  do {
    block[1].store(reinterpret_cast<uint64_t>(address(head)), std::memory_order_relaxed);
  } while (!c.free_head.compare_exchange_weak(
      head, pack(block, tag(head) + 1), std::memory_order_release, std::memory_order_relaxed));
}

// A free block of a larger class, cut into one block of `cls` and pieces of smaller classes for
// the rest (every remainder of two or more words is a sum of class sizes; a single word is left
// unused). Lets demand that moved between classes reuse memory instead of reserving more.
Word* WordSlab::split_larger(int cls) {
  for (int bigger = cls + 1; bigger < std::min(kClasses, cls + 8); ++bigger) {
    Word* b = pop(classes_[bigger]);
    if (b == nullptr) continue;
    size_t offset = class_words(cls);
    size_t rest = class_words(bigger) - offset;
    for (int piece = bigger - 1; piece >= 0 && rest >= 2; --piece) {
      while (rest >= class_words(piece)) {
        Word* p = b + offset;
        p[0].store((class_words(piece) - 1) | (uint64_t(piece) << 56), std::memory_order_relaxed);
        push(classes_[piece], p);
        offset += class_words(piece);
        rest -= class_words(piece);
      }
    }
    return b;
  }
  return nullptr;
}

std::vector<std::pair<size_t, uint64_t>> WordSlab::free_bytes_by_class() const {
  std::vector<std::pair<size_t, uint64_t>> out;
  for (int cls = 0; cls < kClasses; ++cls) {
    uint64_t n = 0;
    for (Word* b = address(classes_[cls].free_head.load(std::memory_order_acquire)); b != nullptr;
         b = address(b[1].load(std::memory_order_relaxed))) {
      ++n;
    }
    const Class& c = classes_[cls];
    MutexLock lock(&c.refill_mu);
    const uint64_t tail = c.bump ? (c.bump_end - c.bump) * sizeof(Word) : 0;
    if (n > 0 || tail > 0)
      out.emplace_back(class_words(cls), n * class_words(cls) * sizeof(Word) + tail);
  }
  return out;
}

Word* WordSlab::carve(int cls) {
  Class& c = classes_[cls];
  const size_t block_words = class_words(cls);
  MutexLock lock(&c.refill_mu);
  if (c.bump == nullptr || c.bump + block_words > c.bump_end) {
    // Chunks of a few blocks for large classes: a class's last chunk is only partly carved, and
    // with fifty classes those tails add up.
    const size_t block_bytes = block_words * sizeof(Word);
    const size_t bytes =
        std::max(block_bytes, std::clamp<size_t>(block_bytes * 4, 16 << 10, 256 << 10));
    void* p = numa_node_ >= 0 ? numa_alloc_onnode(bytes, numa_node_)
                              : ::operator new(bytes, std::align_val_t(64));
    if (p == nullptr) throw std::bad_alloc();
    // The words are atomics for their whole life: construct them once, here.
    Word* words = static_cast<Word*>(p);
    for (size_t i = 0; i < bytes / sizeof(Word); ++i) new (&words[i]) Word(0);
    {
      MutexLock chunks_lock(&chunks_mu_);
      chunks_.emplace_back(p, bytes);
    }
    reserved_.fetch_add(bytes, std::memory_order_relaxed);
    c.bump = words;
    c.bump_end = words + bytes / sizeof(Word);
  }
  Word* block = c.bump;
  c.bump += block_words;
  return block;
}

}  // namespace kvgate::index::chain::detail
