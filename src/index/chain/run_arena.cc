#include "index/chain/detail/run.h"

namespace kvgate::index::chain::detail {

RunArena::RunArena() : chunks_(new std::atomic<Chunk*>[kMaxChunks]) {
  for (uint32_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

RunArena::~RunArena() {
  for (uint32_t i = 0; i < kMaxChunks; ++i) delete chunks_[i].load(std::memory_order_relaxed);
}

// Treiber stack of free ids; the link lives in the slot's atomic free_next, the head carries a
// 32-bit ABA tag.
RunId RunArena::allocate() {
  uint64_t head = free_head_.load(std::memory_order_acquire);
  while (static_cast<uint32_t>(head) != 0) {
    const RunId top = static_cast<uint32_t>(head) - 1;
    const uint32_t next = at(top).free_next.load(std::memory_order_relaxed);
    const uint64_t tagged = (((head >> 32) + 1) << 32) | next;
    if (free_head_.compare_exchange_weak(head, tagged, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      live_.fetch_add(1, std::memory_order_relaxed);
      return top;
    }
  }
  std::lock_guard<std::mutex> lock(grow_mu_);
  const RunId id = high_water_.load(std::memory_order_relaxed);
  const uint32_t chunk = id >> kChunkShift;
  if (chunk >= kMaxChunks) return kNoRun;
  if (chunks_[chunk].load(std::memory_order_relaxed) == nullptr) {
    chunks_[chunk].store(new Chunk, std::memory_order_release);
    chunk_count_.fetch_add(1, std::memory_order_relaxed);
  }
  high_water_.store(id + 1, std::memory_order_release);
  live_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void RunArena::free(RunId id) {
  Run& r = at(id);
  uint64_t head = free_head_.load(std::memory_order_relaxed);
  uint64_t tagged;
  do {
    r.free_next.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
    tagged = (((head >> 32) + 1) << 32) | (id + 1);
  } while (!free_head_.compare_exchange_weak(head, tagged, std::memory_order_release,
                                             std::memory_order_relaxed));
  live_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace kvgate::index::chain::detail
