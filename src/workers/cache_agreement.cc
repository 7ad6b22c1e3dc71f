#include "kvgate/workers/cache_agreement.h"

#include <algorithm>

namespace kvgate::workers {

double CacheAgreement::agreement(uint64_t predicted, uint64_t reported) {
  const uint64_t most = std::max(predicted, reported);
  if (most == 0) return 1.0;
  const uint64_t gap = predicted > reported ? predicted - reported : reported - predicted;
  return 1.0 - static_cast<double>(gap) / static_cast<double>(most);
}

CacheAgreement::Change CacheAgreement::note(uint64_t predicted, uint64_t reported) {
  predicted_total_.fetch_add(predicted, std::memory_order_relaxed);
  reported_total_.fetch_add(reported, std::memory_order_relaxed);
  MutexLock lock(&mu_);
  window_predicted_ += predicted;
  window_reported_ += reported;
  if (std::max(window_predicted_, window_reported_) < kWindowTokens) return Change::kNone;
  const double r = agreement(window_predicted_, window_reported_);
  window_predicted_ = window_reported_ = 0;
  ratio_.store(r, std::memory_order_relaxed);
  const bool now = warn_below_ > 0 && r < warn_below_;
  if (now == disagreeing_.load(std::memory_order_relaxed)) return Change::kNone;
  disagreeing_.store(now, std::memory_order_relaxed);
  return now ? Change::kBecameDisagreeing : Change::kBecameAgreeing;
}

}  // namespace kvgate::workers
