// Worker: one engine process behind one URL, as the gateway sees it.
//
// A Worker object lives as long as any snapshot references it. Its *live* state (in-flight count,
// engine load, health, circuit breaker) is atomics shared by every snapshot; its *description*
// (models, KV endpoints, holders, block size) is an immutable WorkerInfo swapped by the control
// path, which then republishes the fleet snapshot (registry.h).
//
// Threading: live counters and load from any thread (relaxed atomics: a decision may see a value
// a moment old, never a torn one); info() from any thread; set_info() from the control path. The
// trackers' states live in the Worker's first cache line (RoutingLine), written by the trackers
// alone with release and read by routable()/vetoed() with acquire.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/clock.h"
#include "kvgate/core/ids.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/workers/cache_agreement.h"
#include "kvgate/workers/circuit_breaker.h"
#include "kvgate/workers/health.h"
#include "kvgate/workers/inflight.h"
#include "kvgate/workers/liveness.h"
#include "kvgate/workers/load.h"
#include "kvgate/workers/prefill_rate.h"
#include "kvgate/workers/shared_cell.h"

namespace kvgate::workers {

// Where one data-parallel rank publishes its KV events.
struct KvEndpoint {
  DpRank rank = 0;
  std::string publisher;  // tcp://host:port of the PUB socket
  std::string replay;     // tcp://host:port of the replay ROUTER socket ("" if none)
  std::string topic;      // subscription prefix ("" = everything)
  friend bool operator==(const KvEndpoint&, const KvEndpoint&) = default;
};

// The most data-parallel ranks a worker's live state tracks one by one (larger ranks share the
// last slot's figures).
inline constexpr uint32_t kMaxDpRanks = 64;

// What a worker does in a prefill/decode disaggregated fleet: everything (regular), a prompt's
// prefill only (its KV cache then goes to a decode worker), or the decode only.
enum class WorkerRole : uint8_t { kRegular, kPrefill, kDecode };
inline constexpr size_t kWorkerRoleCount = 3;
const char* worker_role_name(WorkerRole r);
// "regular", "prefill" or "decode"; nullopt for anything else.
std::optional<WorkerRole> parse_worker_role(std::string_view s);
// Where a worker came from: the command line, POST /workers, a peer replica (Redis fleet sync), or
// Kubernetes pod discovery.
enum class WorkerSource : uint8_t { kFlags, kApi, kPeer, kKubernetes };
const char* worker_source_name(WorkerSource s);  // "flags", "api", "peer", "kubernetes"

// The prefill/decode protocol an engine says it speaks: SGLang's bootstrap rooms, or vLLM's
// NixlConnector (kv_transfer_params); unknown when it says neither.
enum class PdWire : uint8_t { kUnknown, kSglang, kVllm };

struct WorkerInfo {
  std::vector<std::string> models;         // from the worker's /v1/models
  std::vector<std::string> lora_adapters;  // those of the models that are LoRA adapters
  std::vector<KvEndpoint> kv_endpoints;    // empty: the worker publishes no KV events
  std::vector<HolderId> holders;           // one per rank with a subscription, rank order
  std::vector<DpRank> holder_ranks;        // the rank of each of `holders`
  uint32_t dp_size = 1;                    // data-parallel ranks, each with its own KV cache
  uint32_t block_size = 0;                 // learned from its events (0: not yet known)
  uint64_t kv_blocks = 0;                  // its KV pool per rank, in blocks (0: not said)
  uint32_t max_model_len = 0;              // longest context of its models (0: not reported)
  bool discovered = false;                 // /server_info and /v1/models answered at least once
  WorkerRole role = WorkerRole::kRegular;
  // A prefill worker's bootstrap port (SGLang): where decode workers fetch the KV of a request's
  // room (0: none given; the gateway then names none).
  uint16_t bootstrap_port = 0;
  // What its /server_info says it speaks (unknown: the fleet's --pd-protocol holds).
  PdWire pd_wire = PdWire::kUnknown;
  WorkerSource source = WorkerSource::kFlags;
};

struct WorkerOptions {
  HealthConfig health;
  BreakerConfig breaker;
  LivenessConfig liveness;
  // CacheAgreement's warning threshold (0: never warn).
  double cache_agreement_warn_below = 0.9;
  PrefillRateConfig prefill_rate;
};

class Worker {
 public:
  // `authorization`: the header value the gateway's own requests to the worker carry ("" for
  // none), from credentials in the URL the operator gave.
  Worker(WorkerId id, std::string url, WorkerOptions options, const Clock& clock,
         std::string authorization = {});

  WorkerId id() const { return id_; }
  const std::string& url() const { return url_; }
  // Parsed from url() ("http[s]://host:port").
  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  // https: connections to it are TLS, its certificate verified.
  bool tls() const { return tls_; }
  const std::string& authorization() const { return authorization_; }

  std::shared_ptr<const WorkerInfo> info() const { return info_.load(); }
  void set_info(std::shared_ptr<const WorkerInfo> info) { info_.store(std::move(info)); }

  // --- Live load -------------------------------------------------------------------------
  // Requests this gateway has sent to the worker that have not ended (every path ends them), in
  // all, and per data-parallel rank for those pinned to one.
  int32_t in_flight() const { return line_.in_flight.load(std::memory_order_relaxed); }
  int32_t in_flight(DpRank rank) const {
    return ranks_[slot(rank)].in_flight.load(std::memory_order_relaxed);
  }
  // `prompt_tokens`: the request's prompt, waiting for its prefill until prefilled() or the end.
  void begin_request(std::optional<DpRank> rank = std::nullopt, uint32_t prompt_tokens = 0) {
    line_.in_flight.fetch_add(1, std::memory_order_relaxed);
    if (rank) ranks_[slot(*rank)].in_flight.fetch_add(1, std::memory_order_relaxed);
    line_.queued_prompt_tokens.fetch_add(prompt_tokens, std::memory_order_relaxed);
    line_.prefilling.fetch_add(1, std::memory_order_relaxed);
  }
  // The request's first token (or whole answer) came back: its prompt is no longer queued.
  // Called once per begin_request().
  void prefilled(uint32_t prompt_tokens) {
    line_.queued_prompt_tokens.fetch_sub(prompt_tokens, std::memory_order_relaxed);
    line_.prefilling.fetch_sub(1, std::memory_order_relaxed);
  }
  void end_request(std::optional<DpRank> rank = std::nullopt) {
    line_.in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (rank) ranks_[slot(*rank)].in_flight.fetch_sub(1, std::memory_order_relaxed);
  }
  // Prompt tokens of this gateway's requests here that have not had their first token yet.
  uint64_t queued_prompt_tokens() const {
    return line_.queued_prompt_tokens.load(std::memory_order_relaxed);
  }
  // This gateway's requests here that have not had their first token yet (in all ranks).
  int32_t prefilling() const { return line_.prefilling.load(std::memory_order_relaxed); }

  // --- Peers' load (state sync between gateway replicas) ---------------------------------
  // What the other replicas have in flight here (in all and per pinned rank) and the prompt
  // tokens they have queued here, as of their last records (0 without state sync).
  int32_t peer_in_flight() const { return line_.peer_in_flight.load(std::memory_order_relaxed); }
  int32_t peer_in_flight(DpRank rank) const {
    return ranks_[slot(rank)].peer_in_flight.load(std::memory_order_relaxed);
  }
  uint64_t peer_queued_prompt_tokens() const {
    return line_.peer_queued_prompt_tokens.load(std::memory_order_relaxed);
  }
  // Replaces the peers' figures (`ranks`: in flight per rank; ranks not listed have none).
  void set_peer_load(int32_t in_flight, const std::vector<std::pair<DpRank, int32_t>>& ranks,
                     uint64_t queued_prompt_tokens);
  // This replica's and its peers' together: what routing weighs.
  int32_t fleet_in_flight() const { return in_flight() + peer_in_flight(); }
  int32_t fleet_in_flight(DpRank rank) const { return in_flight(rank) + peer_in_flight(rank); }
  uint64_t fleet_queued_prompt_tokens() const {
    return queued_prompt_tokens() + peer_queued_prompt_tokens();
  }
  // Totals for the metrics scrape (kept here so the request path touches no metrics registry).
  void count_dispatch() { dispatched_.fetch_add(1, std::memory_order_relaxed); }
  void count_retryable_failure() { retryable_failures_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t dispatched() const { return dispatched_.load(std::memory_order_relaxed); }
  uint64_t retryable_failures() const {
    return retryable_failures_.load(std::memory_order_relaxed);
  }

  // Everything a routing decision reads of the worker's load, or of one rank's, in one call
  // (relaxed reads, each figure as of its own moment). The KV usage stays in parts per million so
  // that a pass over a whole fleet compares integers (OverloadRule).
  struct RoutingFigures {
    uint32_t running = 0;
    uint32_t waiting = 0;
    uint32_t kv_usage_ppm = 0;
    uint64_t queued_prefill_tokens = 0;
    int32_t fleet_in_flight = 0;
    uint64_t fleet_queued_prompt_tokens = 0;  // the whole worker's (0 for a rank: not kept)
    int32_t prefilling = 0;                   // this replica's, the whole worker's (prefilling())
    uint64_t index_blocks = 0;
    uint8_t offload_tiers = 0;  // index::tier_bit of each tier but the device it keeps blocks on
    float prefill_rate = 0;     // prompt tokens per second, learned (prefill_rate())

    // The prompt tokens a new request queues behind: the engine's count or this gateway fleet's,
    // whichever is more (the engine's lags by a load report, the fleet's misses other clients).
    uint64_t queued_ahead() const {
      return std::max(queued_prefill_tokens, fleet_queued_prompt_tokens);
    }
    // The rate a prompt is priced at: the learned one when `measured` asks for it and one has
    // been learned, else `prior`.
    float priced_prefill_rate(bool measured, float prior) const {
      return measured && prefill_rate > 0 ? prefill_rate : prior;
    }
  };
  RoutingFigures routing_figures() const {
    return {
        .running = line_.total.running.load(std::memory_order_relaxed),
        .waiting = line_.total.waiting.load(std::memory_order_relaxed),
        .kv_usage_ppm = line_.total.kv_usage_ppm.load(std::memory_order_relaxed),
        .queued_prefill_tokens = line_.total.queued_prefill_tokens.load(std::memory_order_relaxed),
        .fleet_in_flight = fleet_in_flight(),
        .fleet_queued_prompt_tokens = fleet_queued_prompt_tokens(),
        .prefilling = prefilling(),
        .index_blocks = index_blocks(),
        .offload_tiers = offload_tiers(),
        .prefill_rate = prefill_rate()};
  }
  RoutingFigures routing_figures(DpRank rank) const {
    const RankFigures& r = ranks_[slot(rank)];
    return {.running = r.engine.running.load(std::memory_order_relaxed),
            .waiting = r.engine.waiting.load(std::memory_order_relaxed),
            .kv_usage_ppm = r.engine.kv_usage_ppm.load(std::memory_order_relaxed),
            .queued_prefill_tokens = r.engine.queued_prefill_tokens.load(std::memory_order_relaxed),
            .fleet_in_flight = fleet_in_flight(rank),
            .prefilling = prefilling(),
            .index_blocks = index_blocks(rank),
            .offload_tiers = offload_tiers(),
            .prefill_rate = prefill_rate()};
  }

  // The engine's load, summed over its ranks (as reported), and one rank's.
  EngineLoad engine_load() const { return line_.total.load(); }
  void set_engine_load(const EngineLoad& load, MonoTime at);
  EngineLoad engine_load(DpRank rank) const { return ranks_[slot(rank)].engine.load(); }
  void set_rank_load(DpRank rank, const EngineLoad& load);
  // A load record the engine pushed for one rank (on its KV-event stream). The worker's total
  // becomes the sum of its ranks' records from the last kPushedLoadFresh; while any is that fresh
  // the control path does not poll.
  static constexpr Duration kPushedLoadFresh = std::chrono::seconds(2);
  void set_pushed_load(DpRank rank, const EngineLoad& load, MonoTime at);
  // When the last pushed record arrived (epoch if never).
  MonoTime pushed_load_at() const {
    return MonoTime(Duration(pushed_at_ns_.load(std::memory_order_relaxed)));
  }
  // How many blocks the index holds for the worker (all ranks) and for one rank, as its event
  // lanes last counted (control path, every tick): what the warm-up rule compares.
  uint64_t index_blocks() const { return line_.index_blocks.load(std::memory_order_relaxed); }
  uint64_t index_blocks(DpRank rank) const {
    return ranks_[slot(rank)].index_blocks.load(std::memory_order_relaxed);
  }
  void set_index_blocks(DpRank rank, uint64_t blocks);
  // The tiers other than the device its KV events store blocks on (index::tier_bit each; all its
  // ranks'), as its event lanes last saw them (control path): what a match off the device costs
  // to load (CacheAwareConfig::tier_weights).
  uint8_t offload_tiers() const { return line_.offload_tiers.load(std::memory_order_relaxed); }
  // How fast it turns prompt tokens into a first token, learned from this gateway's streamed
  // requests (workers/prefill_rate.h; its ranks together): what the cost model divides by. 0
  // until the first sample (the cost model's own prior holds).
  float prefill_rate() const { return line_.prefill_rate.load(std::memory_order_relaxed); }
  // A streamed request here waited for `tokens` prompt tokens (the queue ahead at dispatch and
  // its own uncached ones) and had its first token `took` after dispatch.
  void note_prefill(uint64_t tokens, Duration took);
  const PrefillRate& prefill_meter() const { return prefill_meter_; }
  const Clock& clock() const { return clock_; }
  void set_offload_tiers(uint8_t tiers) {
    line_.offload_tiers.store(tiers, std::memory_order_relaxed);
  }
  // Requests the warm-up rule sent here since the worker last became thin (its growth cap).
  uint64_t warmup_diversions() const { return warmup_diversions_.load(std::memory_order_relaxed); }
  void count_warmup_diversion() { warmup_diversions_.fetch_add(1, std::memory_order_relaxed); }
  void reset_warmup_diversions() { warmup_diversions_.store(0, std::memory_order_relaxed); }

  // A rank whose KV-event stream lost events (its index is partial): routing prefers its siblings.
  bool rank_degraded(DpRank rank) const {
    return ranks_[slot(rank)].degraded.load(std::memory_order_relaxed);
  }
  void set_rank_degraded(DpRank rank, bool degraded) {
    ranks_[slot(rank)].degraded.store(degraded, std::memory_order_relaxed);
  }
  // When the last engine load report arrived (epoch if never).
  MonoTime engine_load_at() const {
    return MonoTime(Duration(load_at_ns_.load(std::memory_order_relaxed)));
  }

  // --- Health and failures ---------------------------------------------------------------
  HealthTracker& health() { return health_; }
  const HealthTracker& health() const { return health_; }
  CircuitBreaker& breaker() { return breaker_; }
  const CircuitBreaker& breaker() const { return breaker_; }
  LivenessTracker& liveness() { return liveness_; }
  const LivenessTracker& liveness() const { return liveness_; }
  // Predicted against reported cached tokens of its answers.
  CacheAgreement& cache_agreement() { return cache_agreement_; }
  const CacheAgreement& cache_agreement() const { return cache_agreement_; }
  // The requests in flight here, for a veto to reach them.
  InflightRequests& inflight() { return inflight_; }

  // Healthy (a passing probe since it was added, or health checks off) and the breaker lets
  // traffic through. A liveness veto does not make a worker unroutable: routing prefers workers
  // without one (vetoed()) but falls back to them rather than refuse.
  // (Read from the states kept here, in the first cache line, not through the trackers.)
  bool routable() const {
    return static_cast<Health>(line_.health_state.load(std::memory_order_acquire)) ==
               Health::kHealthy &&
           (static_cast<BreakerState>(line_.breaker_state.load(std::memory_order_acquire)) ==
                BreakerState::kClosed ||
            breaker_.allows());
  }
  bool vetoed() const {
    return static_cast<Liveness>(line_.liveness_state.load(std::memory_order_acquire)) !=
           Liveness::kLive;
  }

 private:
  // An engine's load as relaxed atomics (its usage in parts per million).
  struct EngineFigures {
    std::atomic<uint32_t> running{0};
    std::atomic<uint32_t> waiting{0};
    std::atomic<uint32_t> kv_usage_ppm{0};
    std::atomic<uint64_t> queued_prefill_tokens{0};
    EngineLoad load() const {
      return {.running = running.load(std::memory_order_relaxed),
              .waiting = waiting.load(std::memory_order_relaxed),
              .kv_usage = kv_usage_ppm.load(std::memory_order_relaxed) / 1e6,
              .queued_prefill_tokens = queued_prefill_tokens.load(std::memory_order_relaxed)};
    }
    void set(const EngineLoad& l);
  };
  // One data-parallel rank's live figures.
  struct RankFigures {
    EngineFigures engine;
    std::atomic<int32_t> in_flight{0};
    std::atomic<int32_t> peer_in_flight{0};
    std::atomic<bool> degraded{false};
    std::atomic<int64_t> pushed_at_ns{0};
    std::atomic<uint64_t> index_blocks{0};
  };
  static uint32_t slot(DpRank rank) { return rank < kMaxDpRanks ? rank : kMaxDpRanks - 1; }

  // What a routing decision reads of every worker, in one cache line at its front: the load
  // figures and the states of its three trackers (kept here for them), so a pass over a large
  // fleet touches one line per worker (kvgate-bench-decision measures it).
  struct alignas(64) RoutingLine {
    std::atomic<int32_t> in_flight{0};
    std::atomic<int32_t> peer_in_flight{0};
    // Prompt tokens of this gateway's requests here without a first token, and those requests:
    // 32 bits each (billions of tokens waiting at one worker is not a real queue), so both fit.
    std::atomic<uint32_t> queued_prompt_tokens{0};
    std::atomic<int32_t> prefilling{0};
    std::atomic<uint64_t> peer_queued_prompt_tokens{0};
    std::atomic<uint64_t> index_blocks{0};
    EngineFigures total;
    std::atomic<uint8_t> health_state{0};
    std::atomic<uint8_t> breaker_state{0};
    std::atomic<uint8_t> liveness_state{0};
    std::atomic<uint8_t> offload_tiers{0};
    std::atomic<float> prefill_rate{0};
  };
  static_assert(sizeof(RoutingLine) == 64, "a decision reads one cache line per worker");
  RoutingLine line_;

  HealthTracker health_;
  CircuitBreaker breaker_;
  LivenessTracker liveness_;
  CacheAgreement cache_agreement_;
  std::atomic<uint64_t> warmup_diversions_{0};

  const WorkerId id_;
  const std::string url_;
  std::string host_;
  uint16_t port_ = 0;
  bool tls_ = false;
  const std::string authorization_;
  SharedCell<WorkerInfo> info_;
  std::atomic<uint64_t> dispatched_{0};
  std::atomic<uint64_t> retryable_failures_{0};
  std::atomic<int64_t> load_at_ns_{0};
  std::atomic<int64_t> pushed_at_ns_{0};
  Mutex pushed_mu_;  // one pushed record at a time recomputes the total
  InflightRequests inflight_;
  std::unique_ptr<RankFigures[]> ranks_;  // kMaxDpRanks
  const Clock& clock_;
  PrefillRate prefill_meter_;
};

}  // namespace kvgate::workers
