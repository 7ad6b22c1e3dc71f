// CacheAgreement: does the gateway's picture of a worker's cache match what the worker says it
// found? Each answer the engine reported on adds the prompt tokens the index predicted cached
// there (the chosen worker's matched blocks times the block size, at most the prompt less its
// last token, which engines always compute) and the tokens the engine reported cached (vLLM's
// usage.prompt_tokens_details.cached_tokens, SGLang's meta_info.cached_tokens).
//
// Totals only grow. The agreement ratio is measured over windows of at least kWindowTokens
// predicted-or-reported tokens: 1 - |reported - predicted| / max(reported, predicted). A window
// below `warn_below` makes the worker "disagreeing" (a wrong block size, hash seed or tokenizer
// shows up here first: the index matches nothing the engine finds, or the other way round); a
// window at or above it makes it agree again. note() returns the change so the caller can say it
// once. warn_below 0: never disagreeing.
//
// Threading: note() from any thread (a short lock per answer); the readers from any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "kvgate/core/thread_annotations.h"

namespace kvgate::workers {

class CacheAgreement {
 public:
  static constexpr uint64_t kWindowTokens = 8'192;
  enum class Change : uint8_t { kNone, kBecameDisagreeing, kBecameAgreeing };

  explicit CacheAgreement(double warn_below = 0.9) : warn_below_(warn_below) {}

  Change note(uint64_t predicted, uint64_t reported);

  uint64_t predicted_total() const { return predicted_total_.load(std::memory_order_relaxed); }
  uint64_t reported_total() const { return reported_total_.load(std::memory_order_relaxed); }
  // The last full window's ratio (1 until a window completes).
  double ratio() const { return ratio_.load(std::memory_order_relaxed); }
  bool disagreeing() const { return disagreeing_.load(std::memory_order_relaxed); }

  // 1 - |a - b| / max(a, b); 1 when both are 0.
  static double agreement(uint64_t predicted, uint64_t reported);

 private:
  const double warn_below_;
  std::atomic<uint64_t> predicted_total_{0};
  std::atomic<uint64_t> reported_total_{0};
  std::atomic<double> ratio_{1.0};
  std::atomic<bool> disagreeing_{false};
  Mutex mu_;
  uint64_t window_predicted_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t window_reported_ KVGATE_GUARDED_BY(mu_) = 0;
};

}  // namespace kvgate::workers
