#include "kvgate/workers/worker.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

namespace kvgate::workers {

const char* worker_role_name(WorkerRole r) {
  switch (r) {
    case WorkerRole::kRegular:
      return "regular";
    case WorkerRole::kPrefill:
      return "prefill";
    case WorkerRole::kDecode:
      return "decode";
  }
  return "regular";
}

std::optional<WorkerRole> parse_worker_role(std::string_view s) {
  for (const WorkerRole r : {WorkerRole::kRegular, WorkerRole::kPrefill, WorkerRole::kDecode}) {
    if (s == worker_role_name(r)) return r;
  }
  return std::nullopt;
}

const char* worker_source_name(WorkerSource s) {
  switch (s) {
    case WorkerSource::kFlags:
      return "flags";
    case WorkerSource::kApi:
      return "api";
    case WorkerSource::kPeer:
      return "peer";
    case WorkerSource::kKubernetes:
      return "kubernetes";
  }
  return "flags";
}

Worker::Worker(WorkerId id, std::string url, WorkerOptions options, const Clock& clock,
               std::string authorization)
    : health_(options.health, &line_.health_state),
      breaker_(options.breaker, clock, &line_.breaker_state),
      liveness_(options.liveness, clock, &line_.liveness_state),
      cache_agreement_(options.cache_agreement_warn_below),
      id_(id),
      url_(std::move(url)),
      authorization_(std::move(authorization)),
      info_(std::make_shared<const WorkerInfo>()),
      ranks_(std::make_unique<RankFigures[]>(kMaxDpRanks)),
      clock_(clock),
      prefill_meter_(options.prefill_rate) {
  std::string_view rest(url_);
  if (rest.rfind("http://", 0) == 0) rest.remove_prefix(7);
  if (rest.rfind("https://", 0) == 0) {
    rest.remove_prefix(8);
    tls_ = true;
  }
  const auto colon = rest.rfind(':');
  host_ = std::string(rest.substr(0, colon));
  if (colon != std::string_view::npos) {
    int port = 0;
    std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port);
    port_ = static_cast<uint16_t>(port);
  }
}

void Worker::EngineFigures::set(const EngineLoad& l) {
  running.store(l.running, std::memory_order_relaxed);
  waiting.store(l.waiting, std::memory_order_relaxed);
  const double clamped = std::clamp(l.kv_usage, 0.0, 1.0);
  kv_usage_ppm.store(static_cast<uint32_t>(std::lround(clamped * 1e6)), std::memory_order_relaxed);
  queued_prefill_tokens.store(l.queued_prefill_tokens, std::memory_order_relaxed);
}

void Worker::set_engine_load(const EngineLoad& load, MonoTime at) {
  line_.total.set(load);
  load_at_ns_.store(at.time_since_epoch().count(), std::memory_order_relaxed);
}

void Worker::set_rank_load(DpRank rank, const EngineLoad& load) {
  ranks_[slot(rank)].engine.set(load);
}

void Worker::note_prefill(uint64_t tokens, Duration took) {
  if (const std::optional<double> rate = prefill_meter_.observe(tokens, took, clock_.now())) {
    line_.prefill_rate.store(static_cast<float>(*rate), std::memory_order_relaxed);
  }
}

void Worker::set_index_blocks(DpRank rank, uint64_t blocks) {
  RankFigures& r = ranks_[slot(rank)];
  const uint64_t before = r.index_blocks.exchange(blocks, std::memory_order_relaxed);
  // One control thread writes: the total follows each rank's change.
  line_.index_blocks.fetch_add(blocks - before, std::memory_order_relaxed);
}

void Worker::set_peer_load(int32_t in_flight, const std::vector<std::pair<DpRank, int32_t>>& ranks,
                           uint64_t queued_prompt_tokens) {
  std::array<int32_t, kMaxDpRanks> per_rank{};
  for (const auto& [rank, n] : ranks) per_rank[slot(rank)] += n;
  for (uint32_t r = 0; r < kMaxDpRanks; ++r)
    ranks_[r].peer_in_flight.store(per_rank[r], std::memory_order_relaxed);
  line_.peer_in_flight.store(in_flight, std::memory_order_relaxed);
  line_.peer_queued_prompt_tokens.store(queued_prompt_tokens, std::memory_order_relaxed);
}

void Worker::set_pushed_load(DpRank rank, const EngineLoad& load, MonoTime at) {
  const int64_t now = at.time_since_epoch().count();
  MutexLock lock(&pushed_mu_);
  ranks_[slot(rank)].engine.set(load);
  ranks_[slot(rank)].pushed_at_ns.store(now, std::memory_order_relaxed);
  // The total: every rank whose record is fresh (a rank that stopped pushing drops out).
  EngineLoad total;
  double usage = 0;
  int fresh = 0;
  for (uint32_t r = 0; r < kMaxDpRanks; ++r) {
    const int64_t t = ranks_[r].pushed_at_ns.load(std::memory_order_relaxed);
    if (t == 0 || now - t > kPushedLoadFresh.count()) continue;
    const EngineLoad l = ranks_[r].engine.load();
    total.running += l.running;
    total.waiting += l.waiting;
    total.queued_prefill_tokens += l.queued_prefill_tokens;
    usage += l.kv_usage;
    ++fresh;
  }
  total.kv_usage = fresh > 0 ? usage / fresh : 0;
  line_.total.set(total);
  load_at_ns_.store(now, std::memory_order_relaxed);
  pushed_at_ns_.store(now, std::memory_order_relaxed);
}

}  // namespace kvgate::workers
