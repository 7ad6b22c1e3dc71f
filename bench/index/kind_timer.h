// KindTimer: sums the time a replay spends on each event, apart by event kind, and gives the
// cost per stored and per removed block. One clock pair per event (about 30 ns here, beside the
// ~90 blocks of a typical event of the default corpus).
#pragma once

#include <chrono>
#include <cstdint>

#include "kvgate/index/indexer.h"
#include "replay.h"

namespace kvgate::bench {

class KindTimer {
 public:
  using Clock = std::chrono::steady_clock;

  template <class F>
  void time(const index::Event& e, F&& apply) {
    const auto t0 = Clock::now();
    apply();
    const auto spent = Clock::now() - t0;
    if (e.kind == index::EventKind::kStored) {
      stored_ += spent;
      stored_blocks_ += e.engine_hashes.size();
    } else if (e.kind == index::EventKind::kRemoved) {
      removed_ += spent;
      removed_blocks_ += e.engine_hashes.size();
    }
  }
  ApplyByKind by_kind() const {
    return {per_block(stored_, stored_blocks_), per_block(removed_, removed_blocks_)};
  }
  double ns_per_block() const {
    return per_block(stored_ + removed_, stored_blocks_ + removed_blocks_);
  }

 private:
  static double per_block(Clock::duration d, uint64_t blocks) {
    return blocks ? std::chrono::duration<double, std::nano>(d).count() / blocks : 0.0;
  }

  Clock::duration stored_{0}, removed_{0};
  uint64_t stored_blocks_ = 0, removed_blocks_ = 0;
};

}  // namespace kvgate::bench
