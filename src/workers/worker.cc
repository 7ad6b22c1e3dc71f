#include "kvgate/workers/worker.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace kvgate::workers {

Worker::Worker(WorkerId id, std::string url, WorkerOptions options, const Clock& clock,
               std::string authorization)
    : id_(id),
      url_(std::move(url)),
      authorization_(std::move(authorization)),
      info_(std::make_shared<const WorkerInfo>()),
      health_(options.health),
      breaker_(options.breaker, clock),
      liveness_(options.liveness, clock) {
  std::string_view rest(url_);
  if (rest.rfind("http://", 0) == 0) rest.remove_prefix(7);
  const auto colon = rest.rfind(':');
  host_ = std::string(rest.substr(0, colon));
  if (colon != std::string_view::npos) {
    int port = 0;
    std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port);
    port_ = static_cast<uint16_t>(port);
  }
}

EngineLoad Worker::engine_load() const {
  EngineLoad l;
  l.running = running_.load(std::memory_order_relaxed);
  l.waiting = waiting_.load(std::memory_order_relaxed);
  l.kv_usage = kv_usage_ppm_.load(std::memory_order_relaxed) / 1e6;
  l.queued_prefill_tokens = queued_prefill_tokens_.load(std::memory_order_relaxed);
  return l;
}

void Worker::set_engine_load(const EngineLoad& load, MonoTime at) {
  running_.store(load.running, std::memory_order_relaxed);
  waiting_.store(load.waiting, std::memory_order_relaxed);
  const double clamped = std::clamp(load.kv_usage, 0.0, 1.0);
  kv_usage_ppm_.store(static_cast<uint32_t>(std::lround(clamped * 1e6)), std::memory_order_relaxed);
  queued_prefill_tokens_.store(load.queued_prefill_tokens, std::memory_order_relaxed);
  load_at_ns_.store(at.time_since_epoch().count(), std::memory_order_relaxed);
}

}  // namespace kvgate::workers
