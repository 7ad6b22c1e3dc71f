// PrefillRate: how fast one worker turns prompt tokens into a first token, learned from the
// requests this gateway sends it.
//
// A streamed request's sample is the prompt tokens it had to wait for (the worker's queue ahead
// of it at dispatch, plus its own tokens its cache did not hold) over the time to its first token.
// Samples add up as work over time, so long prompts weigh more than short ones (whose time is
// mostly the engine's step overhead), and the sums decay with a half-life: a worker that slows
// down (decode-heavy batches, a throttled accelerator) is seen within a few half-lives. The prior
// counts as prior_tokens of work done at the prior rate: a worker with few samples stays near it,
// and no single sample swings the estimate.
//
// Threading: observe() and tokens_per_second() from any thread (a mutex; once per request).
#pragma once

#include <cstdint>
#include <optional>

#include "kvgate/core/clock.h"
#include "kvgate/core/thread_annotations.h"

namespace kvgate::workers {

struct PrefillRateConfig {
  double prior_tokens_per_second = 10'000;
  double prior_tokens = 4'096;                    // the work the prior counts as
  Duration half_life = std::chrono::seconds(30);  // 0: learning off
};

class PrefillRate {
 public:
  explicit PrefillRate(PrefillRateConfig config) : config_(config) {}

  bool learning() const { return config_.half_life.count() > 0; }
  // A request that waited for `tokens` prompt tokens got its first token `took` after dispatch.
  // Returns the estimate with it; nothing when it took no sample (learning off, no time).
  std::optional<double> observe(uint64_t tokens, Duration took, MonoTime now) KVGATE_EXCLUDES(mu_);
  // The estimate: (prior work + the samples' work) over their time.
  double tokens_per_second() const KVGATE_EXCLUDES(mu_);
  // Samples taken (for tests and the metric's help).
  uint64_t samples() const KVGATE_EXCLUDES(mu_);

 private:
  double estimate() const KVGATE_REQUIRES(mu_);

  const PrefillRateConfig config_;
  mutable Mutex mu_;
  double tokens_ KVGATE_GUARDED_BY(mu_) = 0;  // decayed sums of the samples
  double seconds_ KVGATE_GUARDED_BY(mu_) = 0;
  MonoTime last_ KVGATE_GUARDED_BY(mu_){};
  uint64_t samples_ KVGATE_GUARDED_BY(mu_) = 0;
};

}  // namespace kvgate::workers
