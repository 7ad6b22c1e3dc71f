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
      liveness_(options.liveness, clock),
      ranks_(std::make_unique<LiveLoad[]>(kMaxDpRanks)) {
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

EngineLoad Worker::LiveLoad::load() const {
  EngineLoad l;
  l.running = running.load(std::memory_order_relaxed);
  l.waiting = waiting.load(std::memory_order_relaxed);
  l.kv_usage = kv_usage_ppm.load(std::memory_order_relaxed) / 1e6;
  l.queued_prefill_tokens = queued_prefill_tokens.load(std::memory_order_relaxed);
  return l;
}

void Worker::LiveLoad::set(const EngineLoad& l) {
  running.store(l.running, std::memory_order_relaxed);
  waiting.store(l.waiting, std::memory_order_relaxed);
  const double clamped = std::clamp(l.kv_usage, 0.0, 1.0);
  kv_usage_ppm.store(static_cast<uint32_t>(std::lround(clamped * 1e6)), std::memory_order_relaxed);
  queued_prefill_tokens.store(l.queued_prefill_tokens, std::memory_order_relaxed);
}

EngineLoad Worker::engine_load() const { return total_.load(); }

void Worker::set_engine_load(const EngineLoad& load, MonoTime at) {
  total_.set(load);
  load_at_ns_.store(at.time_since_epoch().count(), std::memory_order_relaxed);
}

EngineLoad Worker::engine_load(DpRank rank) const { return ranks_[slot(rank)].load(); }

void Worker::set_rank_load(DpRank rank, const EngineLoad& load) { ranks_[slot(rank)].set(load); }

}  // namespace kvgate::workers
