// The gateway's stats table: every family is built once here, every per-request series is created
// up front (routes x status classes, policy branches) so the request path never looks a series up
// by name. Per-worker series live from the worker's registration to its removal and are filled at
// scrape time from the Worker's own atomics (sync_worker), so requests never touch them.
//
// The request path's series (requests, durations, errors, decisions, prompt tokens, first tokens,
// index lookups) are sharded per thread (kvgate/metrics/sharded.h) and folded into their
// Prometheus series by publish(), which every scrape runs first.
//
// Threading: counters and histograms from any thread; add_worker()/remove_worker() on the control
// path.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "app/admission_gate.h"
#include "app/answer_memory.h"
#include "app/model_series.h"
#include "app/request_model.h"
#include "app/upstream_pool.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/server.h"
#include "kvgate/metrics/metrics.h"
#include "kvgate/metrics/sharded.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/worker.h"

namespace kvgate::app {

enum class StatusClass : uint8_t { k2xx, k4xx, k5xx, kCount };
StatusClass status_class(unsigned status);

// Why a request ended without a worker's answer (kvgate_request_errors_total{reason}).
enum class ErrorReason : uint8_t {
  kBadRequest,         // invalid JSON / types (400)
  kUnknownModel,       // 404
  kNoWorker,           // no routable worker (503)
  kShed,               // every worker overloaded, shedding on (503)
  kUpstreamConnect,    // could not reach a worker
  kUpstreamTimeout,    // a worker did not answer in time (504)
  kUpstreamMidStream,  // a worker failed after the stream started
  kClientAbort,        // the client went away
  kWorkerVetoed,       // a stream underway on a worker the liveness tracker vetoed as wedged
  kLoop,               // the request had passed this gateway already (508)
  kPromptTooLong,      // longer than any worker's context (400)
  kDraining,           // the gateway is shutting down: refused, or cut at the grace period (503)
  kQueueFull,          // --max-concurrent-requests running and --queue-size waiting (429)
  kQueueTimeout,       // waited --queue-timeout-secs for a slot (429)
  kNotEventStream,     // a worker answered a stream with another content type (retried)
  kStreamSilent,       // a stream sent no event for --stream-idle-timeout-secs
  kStreamDeadline,     // a stream ran past --request-timeout-secs
  kAnswerTooLarge,     // a stream grew past --max-answer-bytes
  kRateLimited,        // its key's requests or tokens per minute ran out (429)
  kModelNotAllowed,    // its key may not use the model (404, as OpenAI answers)
  kCount,
};
const char* error_reason_name(ErrorReason r);

// A worker's series. Its state is one series whose labels name the role, health, liveness and
// breaker now (replaced when one changes), not a gauge per state machine; series that stay at zero
// in most fleets (other replicas' requests, retryable failures) are made at their first non-zero
// value.
struct WorkerSeries {
  std::string role;
  metrics::Gauge* state = nullptr;  // kvgate_worker_state{worker, role, health, liveness, breaker}
  workers::Health health = workers::Health::kUnknown;  // what `state`'s labels say
  workers::Liveness liveness = workers::Liveness::kLive;
  workers::BreakerState breaker = workers::BreakerState::kClosed;
  metrics::Gauge* in_flight = nullptr;
  metrics::Gauge* peer_in_flight = nullptr;  // null until another replica reports one
  metrics::Gauge* kv_usage = nullptr;
  metrics::Gauge* waiting = nullptr;
  metrics::Counter* requests = nullptr;
  metrics::Counter* retries = nullptr;  // null until the first
  metrics::Counter* cached_predicted = nullptr;
  metrics::Counter* cached_reported = nullptr;
  metrics::Gauge* cache_agreement = nullptr;
  metrics::Gauge* prefill_rate = nullptr;
  uint64_t requests_seen = 0;  // the worker's totals at the last scrape
  uint64_t retries_seen = 0;
  uint64_t cached_predicted_seen = 0;
  uint64_t cached_reported_seen = 0;
};

class GatewayMetrics {
 public:
  // `model_series_limit`: models with request series of their own (app/model_series.h).
  GatewayMetrics(metrics::Registry& registry, std::string_view policy_name,
                 size_t model_series_limit = 16);

  // The series slot of a request for `model` (ModelSeries::slot_of).
  size_t model_slot(std::string_view model, const workers::FleetSnapshot* fleet) {
    return models_->slot_of(model, fleet);
  }
  void request_done(ApiRoute route, unsigned status, double seconds, size_t model_slot);
  void error(ErrorReason reason) { errors_[static_cast<size_t>(reason)]->add(); }
  void ttft(double seconds) { ttft_->observe(seconds); }
  // An admitted request's wait in the admission queue.
  void admission_wait(Priority p, double seconds) {
    admission_wait_[static_cast<size_t>(p)]->observe(seconds);
  }
  // A pair's prefill exchange, from its request to the end of its answer.
  void pd_prefill_seconds(double seconds) { pd_prefill_seconds_->observe(seconds); }
  // A streamed pair's hand-over (the prefill's end to the decode's first token) and its decode
  // (the first token to the end).
  void pd_streamed(double transfer_seconds, double decode_seconds) {
    pd_transfer_seconds_->observe(transfer_seconds);
    pd_decode_seconds_->observe(decode_seconds);
  }
  // A decision; `pending`: its worker's depth counted blocks in flight there.
  void decision(policy::Branch b, double seconds, bool pending = false);
  // A prompt routed to a worker (its first decision), and the tokens of it the chosen worker was
  // predicted to hold: the fleet's prefix hit ratio is matched / prompt.
  void prompt_routed(uint64_t prompt_tokens, uint64_t matched_tokens) {
    prompt_tokens_->add(prompt_tokens);
    matched_tokens_->add(matched_tokens);
  }
  // An answered generation's output tokens, as its engine's usage counted them.
  void completion_tokens(size_t model_slot, uint64_t n) {
    models_->completion_tokens(model_slot, n);
  }
  // A relayed stream's bytes: those written to the client, and those the gateway copied on the
  // way (held, rebuilt, kept: each byte at most once).
  void stream_bytes(uint64_t relayed, uint64_t copied) {
    stream_relayed_->add(relayed);
    stream_copied_->add(copied);
  }
  void retry() { retries_->Increment(); }
  void stale_connection_retry() { stale_retries_->Increment(); }
  void vetoed_attempt() { vetoed_attempts_->Increment(); }
  // Prefill/decode disaggregation: a prefill and decode pair sent a request; a prefill that
  // failed (its decode cut, or, once the client had its answer, only counted).
  void pd_pair() { pd_pairs_->Increment(); }
  void pd_prefill_failed() { pd_prefill_failures_->Increment(); }
  // The decider sent a request to its decode worker alone: a KV transfer saved.
  // `sooner`: for the wait (--pd-local-prefill-wait-ratio), else for the cache it holds.
  void pd_local_prefill(bool sooner) {
    (sooner ? pd_local_prefills_sooner_ : pd_local_prefills_held_)->Increment();
  }
  // A worker's liveness changed (control path).
  void liveness_transition(const workers::LivenessTransition& t);
  // At scrape time, first: brings the request path's series up to date.
  void publish();
  // At scrape time: the upstream pool's totals.
  void sync_upstream(const UpstreamPoolStats& s);
  void sync_admission(const AdmissionStats& s);
  // At scrape time: the routing policy's blocks-in-flight credits.
  void sync_pending(const policy::Policy::PendingStats& s);
  // At scrape time: the client-facing listener's connections and refusals.
  void sync_front_end(const http::ServerStats& s);
  // From AnswerMemory's totals (kvgate_tokenizer_answers_total, ..._answer_seconds_total).
  void sync_answers(const AnswerMemoryStats& s);

  // `role`: the worker's in a prefill/decode fleet ("regular" otherwise).
  void add_worker(const std::string& url, std::string_view role = "regular");
  void remove_worker(const std::string& url);
  // At scrape time: copies a worker's live state and totals into its series.
  void sync_worker(const workers::Worker& w);
  // At scrape time: each role's load, summed over its workers.
  void sync_roles(const workers::FleetSnapshot& fleet);

  // Index gauges, refreshed when /metrics is scraped.
  void set_index(uint64_t holders, uint64_t blocks, uint64_t memberships, uint64_t bytes);
  metrics::ShardedCounter& lookups() { return *lookups_; }
  metrics::ShardedHistogram& lookup_seconds() { return *lookup_seconds_; }

 private:
  // The constructor's steps, one group of families each.
  void add_request_series(metrics::Registry& reg, std::string_view policy_name,
                          size_t model_series_limit);
  void add_pd_series(metrics::Registry& reg);
  void add_admission_series(metrics::Registry& reg);
  void add_pending_series(metrics::Registry& reg);
  void add_upstream_series(metrics::Registry& reg);
  void add_answer_series(metrics::Registry& reg);
  void add_front_end_series(metrics::Registry& reg);
  void add_index_series(metrics::Registry& reg);
  void add_worker_families(metrics::Registry& reg);
  // sync_worker's parts.
  void set_worker_state(const std::string& url, WorkerSeries& s, const workers::Worker& w)
      KVGATE_REQUIRES(mu_);
  void add_worker_totals(const std::string& url, WorkerSeries& s, const workers::Worker& w)
      KVGATE_REQUIRES(mu_);

  static constexpr size_t kRoutes = kApiRouteCount;
  using ShardedCounterPtr = std::unique_ptr<metrics::ShardedCounter>;
  using ShardedHistogramPtr = std::unique_ptr<metrics::ShardedHistogram>;
  std::unique_ptr<ModelSeries> models_;  // requests and output tokens, by model
  std::array<ShardedHistogramPtr, kRoutes> duration_;
  std::array<ShardedCounterPtr, static_cast<size_t>(ErrorReason::kCount)> errors_;
  std::array<ShardedCounterPtr, static_cast<size_t>(policy::Branch::kCount)> decisions_;
  ShardedHistogramPtr decision_seconds_;
  ShardedCounterPtr prompt_tokens_;
  ShardedCounterPtr matched_tokens_;
  ShardedCounterPtr stream_relayed_;
  ShardedCounterPtr stream_copied_;
  ShardedHistogramPtr ttft_;
  ShardedHistogramPtr pd_prefill_seconds_;
  ShardedHistogramPtr pd_transfer_seconds_;
  ShardedHistogramPtr pd_decode_seconds_;
  std::array<metrics::Gauge*, workers::kWorkerRoleCount> role_in_flight_{};
  std::array<metrics::Gauge*, workers::kWorkerRoleCount> role_waiting_{};
  metrics::Gauge* admission_running_ = nullptr;
  metrics::Gauge* admission_prefilling_ = nullptr;
  metrics::Gauge* admission_queued_ = nullptr;
  std::array<metrics::Gauge*, 3> admission_by_class_{};  // by Priority
  std::array<ShardedHistogramPtr, 3> admission_wait_;    // by Priority
  metrics::Counter* admission_waited_ = nullptr;
  metrics::Counter* admission_shed_ = nullptr;
  metrics::Counter* admission_promoted_ = nullptr;
  ShardedCounterPtr pending_decisions_;
  metrics::Gauge* pending_requests_ = nullptr;
  metrics::Gauge* pending_blocks_ = nullptr;
  std::array<metrics::Counter*, 3> pending_credits_{};  // credited, withdrawn, evicted
  metrics::Counter* retries_ = nullptr;
  metrics::Counter* stale_retries_ = nullptr;
  metrics::Counter* vetoed_attempts_ = nullptr;
  metrics::Counter* pd_pairs_ = nullptr;
  metrics::Counter* pd_prefill_failures_ = nullptr;
  metrics::Counter* pd_local_prefills_held_ = nullptr;
  metrics::Counter* pd_local_prefills_sooner_ = nullptr;
  std::array<metrics::Counter*, 4> upstream_{};  // connect, reuse, expired, closed_by_peer
  ShardedCounterPtr lookups_;
  ShardedHistogramPtr lookup_seconds_;
  metrics::Gauge* index_holders_ = nullptr;
  metrics::Gauge* index_blocks_ = nullptr;
  metrics::Gauge* index_memberships_ = nullptr;
  metrics::Gauge* index_bytes_ = nullptr;
  metrics::Family<metrics::Gauge>* worker_state_;
  metrics::Family<metrics::Gauge>* worker_in_flight_;
  metrics::Family<metrics::Gauge>* worker_peer_in_flight_;
  metrics::Family<metrics::Counter>* liveness_transitions_;
  metrics::Family<metrics::Gauge>* worker_kv_usage_;
  metrics::Family<metrics::Gauge>* worker_waiting_;
  metrics::Family<metrics::Counter>* worker_requests_;
  metrics::Family<metrics::Counter>* worker_retries_;
  metrics::Family<metrics::Counter>* worker_cached_predicted_;
  metrics::Family<metrics::Counter>* worker_cached_reported_;
  metrics::Family<metrics::Gauge>* worker_cache_agreement_;
  metrics::Family<metrics::Gauge>* worker_prefill_rate_;
  Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<WorkerSeries>> workers_ KVGATE_GUARDED_BY(mu_);
  UpstreamPoolStats upstream_seen_ KVGATE_GUARDED_BY(mu_);  // the pool's totals at the last scrape
  metrics::Gauge* front_connections_ = nullptr;
  // accepted, idle_shed, refused, tls_handshake_failed, idle_timeout; then bad_request,
  // connection_limit, body_budget, framing, read_timeout (kvgate_http_connections_total,
  // kvgate_http_refusals_total).
  std::array<metrics::Counter*, 10> front_{};
  http::ServerStats front_seen_ KVGATE_GUARDED_BY(mu_);
  std::array<metrics::Counter*, 4> answers_{};  // encoded, no_answer, failed, dropped
  metrics::Counter* answer_seconds_ = nullptr;
  AnswerMemoryStats answers_seen_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace kvgate::app
