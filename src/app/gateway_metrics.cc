#include "app/gateway_metrics.h"

namespace kvgate::app {
namespace {

// A counter family with one series per value of `label`, in the values' order.
template <size_t N>
std::array<metrics::Counter*, N> labelled_counters(metrics::Registry& reg, const std::string& name,
                                                   const std::string& help, const char* label,
                                                   const std::array<const char*, N>& values) {
  auto& family = metrics::counter_family(reg, name, help);
  std::array<metrics::Counter*, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = &family.Add({{label, values[i]}});
  return out;
}

std::unique_ptr<metrics::ShardedCounter> sharded(metrics::Counter& series) {
  return std::make_unique<metrics::ShardedCounter>(series);
}

std::unique_ptr<metrics::ShardedHistogram> sharded(
    metrics::Family<metrics::Histogram>& family, const metrics::Labels& labels,
    const metrics::Histogram::BucketBoundaries& bounds) {
  return std::make_unique<metrics::ShardedHistogram>(family.Add(labels, bounds), bounds);
}

}  // namespace

StatusClass status_class(unsigned status) {
  if (status >= 500) return StatusClass::k5xx;
  if (status >= 400) return StatusClass::k4xx;
  return StatusClass::k2xx;
}

const char* error_reason_name(ErrorReason r) {
  switch (r) {
    case ErrorReason::kBadRequest:
      return "bad_request";
    case ErrorReason::kUnknownModel:
      return "unknown_model";
    case ErrorReason::kNoWorker:
      return "no_worker";
    case ErrorReason::kShed:
      return "shed";
    case ErrorReason::kUpstreamConnect:
      return "upstream_connect";
    case ErrorReason::kUpstreamTimeout:
      return "upstream_timeout";
    case ErrorReason::kUpstreamMidStream:
      return "upstream_mid_stream";
    case ErrorReason::kClientAbort:
      return "client_abort";
    case ErrorReason::kWorkerVetoed:
      return "worker_vetoed";
    case ErrorReason::kLoop:
      return "loop";
    case ErrorReason::kPromptTooLong:
      return "prompt_too_long";
    case ErrorReason::kDraining:
      return "draining";
    case ErrorReason::kQueueFull:
      return "queue_full";
    case ErrorReason::kQueueTimeout:
      return "queue_timeout";
    case ErrorReason::kNotEventStream:
      return "not_event_stream";
    case ErrorReason::kStreamSilent:
      return "stream_silent";
    case ErrorReason::kStreamDeadline:
      return "stream_deadline";
    case ErrorReason::kAnswerTooLarge:
      return "answer_too_large";
    case ErrorReason::kRateLimited:
      return "rate_limited";
    case ErrorReason::kModelNotAllowed:
      return "model_not_allowed";
    case ErrorReason::kCount:
      break;
  }
  return "unknown";
}

GatewayMetrics::GatewayMetrics(metrics::Registry& reg, std::string_view policy_name,
                               size_t model_series_limit) {
  // Each kind of family is exposed in the order it was registered: keep these in order.
  add_request_series(reg, policy_name, model_series_limit);
  add_pd_series(reg);
  add_admission_series(reg);
  add_pending_series(reg);
  add_upstream_series(reg);
  add_answer_series(reg);
  add_front_end_series(reg);
  add_index_series(reg);
  add_worker_families(reg);
}

void GatewayMetrics::add_request_series(metrics::Registry& reg, std::string_view policy_name,
                                        size_t model_series_limit) {
  auto& requests = metrics::counter_family(
      reg, "kvgate_requests_total",
      "Requests answered, by model (a model some worker serves, up to --model-series-limit; "
      "otherwise \"other\"), route and status class.");
  auto& duration = metrics::histogram_family(
      reg, "kvgate_request_duration_seconds",
      "Time from a request's arrival to the end of its answer, by route.");
  for (size_t r = 0; r < kRoutes; ++r) {
    const char* route = api_route_name(static_cast<ApiRoute>(r));
    duration_[r] = sharded(duration, {{"route", route}}, metrics::request_buckets_seconds());
  }
  auto& errors =
      metrics::counter_family(reg, "kvgate_request_errors_total",
                              "Requests that ended without a worker's answer, by reason.");
  for (size_t i = 0; i < errors_.size(); ++i) {
    errors_[i] = sharded(errors.Add({{"reason", error_reason_name(static_cast<ErrorReason>(i))}}));
  }
  auto& decisions =
      metrics::counter_family(reg, "kvgate_router_decisions_total",
                              "Routing decisions, by policy and the branch that decided.");
  for (size_t i = 0; i < decisions_.size(); ++i) {
    decisions_[i] =
        sharded(decisions.Add({{"policy", std::string(policy_name)},
                               {"branch", policy::branch_name(static_cast<policy::Branch>(i))}}));
  }
  decision_seconds_ =
      sharded(metrics::histogram_family(reg, "kvgate_router_decision_seconds",
                                        "Time to choose a worker (index lookup included)."),
              {}, metrics::fast_op_buckets_seconds());
  prompt_tokens_ = sharded(metrics::counter_family(reg, "kvgate_router_prompt_tokens_total",
                                                   "Prompt tokens of requests routed to a worker.")
                               .Add({}));
  matched_tokens_ =
      sharded(metrics::counter_family(
                  reg, "kvgate_router_matched_tokens_total",
                  "Prompt tokens the chosen worker was predicted to hold cached (the "
                  "fleet's prefix hit ratio is this over kvgate_router_prompt_tokens_total).")
                  .Add({}));
  auto& completion_tokens = metrics::counter_family(
      reg, "kvgate_completion_tokens_total",
      "Output tokens of answered generations by model (as kvgate_requests_total), as the "
      "engines' usage counted them (streams too: kvgate asks the engine for usage).");
  models_ = std::make_unique<ModelSeries>(requests, completion_tokens, model_series_limit);
  ttft_ = sharded(metrics::histogram_family(
                      reg, "kvgate_ttft_seconds",
                      "Time from a streamed request's arrival to its first byte from the worker."),
                  {}, metrics::request_buckets_seconds());
}

void GatewayMetrics::add_pd_series(metrics::Registry& reg) {
  const auto seconds = [&](const char* name, const char* help) {
    return sharded(metrics::histogram_family(reg, name, help), {},
                   metrics::request_buckets_seconds());
  };
  pd_prefill_seconds_ = seconds("kvgate_pd_prefill_seconds",
                                "A prefill/decode pair's prefill exchange, from its request to the "
                                "end of the prefill worker's answer (--pd-disaggregation).");
  pd_transfer_seconds_ = seconds(
      "kvgate_pd_transfer_seconds",
      "A streamed pair's hand-over: from the end of the prefill's answer to the decode's first "
      "token (the KV transfer, and the decode's wait and first step).");
  pd_decode_seconds_ =
      seconds("kvgate_pd_decode_seconds",
              "A streamed pair's decode: from the decode's first token to the end of its answer.");
  pd_pairs_ = &metrics::counter_family(
                   reg, "kvgate_pd_pairs_total",
                   "Requests sent to a prefill and a decode worker at once (--pd-disaggregation).")
                   .Add({});
  pd_prefill_failures_ =
      &metrics::counter_family(
           reg, "kvgate_pd_prefill_failures_total",
           "Prefill answers that failed (--pd-disaggregation): the decode was cut and the pair "
           "retried, or, when the client already had the decode's answer, only counted.")
           .Add({});
  auto& local = metrics::counter_family(
      reg, "kvgate_pd_local_prefills_total",
      "Requests sent to their decode worker alone, no KV transferred, by reason: held (it "
      "already held most of the prompt: --pd-local-prefill-tokens, --pd-local-prefill-share) or "
      "sooner (it would start the answer sooner than a pair: --pd-local-prefill-wait-ratio).");
  pd_local_prefills_held_ = &local.Add({{"reason", "held"}});
  pd_local_prefills_sooner_ = &local.Add({{"reason", "sooner"}});
  auto& in_flight = metrics::gauge_family(
      reg, "kvgate_role_in_flight",
      "Requests in flight on the workers of each role (regular, prefill, decode): the load each "
      "side of a disaggregated fleet carries.");
  auto& waiting = metrics::gauge_family(
      reg, "kvgate_role_waiting_requests",
      "Requests waiting in the engines' queues, summed over the workers of each role.");
  for (size_t r = 0; r < workers::kWorkerRoleCount; ++r) {
    const char* role = workers::worker_role_name(static_cast<workers::WorkerRole>(r));
    role_in_flight_[r] = &in_flight.Add({{"role", role}});
    role_waiting_[r] = &waiting.Add({{"role", role}});
  }
}

void GatewayMetrics::sync_roles(const workers::FleetSnapshot& fleet) {
  std::array<double, workers::kWorkerRoleCount> in_flight{}, waiting{};
  for (const auto& w : fleet.workers) {
    const size_t r = static_cast<size_t>(w->info()->role);
    in_flight[r] += w->in_flight();
    waiting[r] += w->engine_load().waiting;
  }
  for (size_t r = 0; r < workers::kWorkerRoleCount; ++r) {
    role_in_flight_[r]->Set(in_flight[r]);
    role_waiting_[r]->Set(waiting[r]);
  }
}

void GatewayMetrics::add_admission_series(metrics::Registry& reg) {
  admission_running_ = &metrics::gauge_family(
                            reg, "kvgate_admission_running",
                            "Generation requests admitted and running (--max-concurrent-requests).")
                            .Add({});
  admission_prefilling_ =
      &metrics::gauge_family(reg, "kvgate_admission_prefilling",
                             "Admitted generation requests waiting for their first token "
                             "(--worker-max-prefilling bounds them)")
           .Add({});
  admission_queued_ =
      &metrics::gauge_family(reg, "kvgate_admission_queued",
                             "Generation requests waiting for a slot (--queue-size).")
           .Add({});
  auto& by_class = metrics::gauge_family(
      reg, "kvgate_admission_queued_by_class",
      "Generation requests waiting for a slot, by class (critical, standard, sheddable).");
  for (size_t c = 0; c < admission_by_class_.size(); ++c) {
    admission_by_class_[c] = &by_class.Add({{"class", priority_name(static_cast<Priority>(c))}});
  }
  auto& outcomes = metrics::counter_family(
      reg, "kvgate_admission_events_total",
      "What the admission queue did besides admitting: queued (found no free slot and waited), "
      "shed (a waiter whose place a better class took), promoted (admitted ahead of its class "
      "after --priority-starvation-secs).");
  auto& waits = metrics::histogram_family(
      reg, "kvgate_admission_wait_seconds",
      "Time an admitted generation request spent in the admission queue, by class (0 for one "
      "admitted at once; --max-concurrent-requests, --worker-max-prefilling).");
  for (size_t c = 0; c < admission_wait_.size(); ++c) {
    admission_wait_[c] = sharded(waits, {{"class", priority_name(static_cast<Priority>(c))}},
                                 metrics::request_buckets_seconds());
  }
  admission_waited_ = &outcomes.Add({{"event", "queued"}});
  admission_shed_ = &outcomes.Add({{"event", "shed"}});
  admission_promoted_ = &outcomes.Add({{"event", "promoted"}});
}

void GatewayMetrics::add_pending_series(metrics::Registry& reg) {
  pending_decisions_ =
      sharded(metrics::counter_family(
                  reg, "kvgate_router_pending_decisions_total",
                  "Decisions whose chosen worker's depth counted blocks in flight there (credited "
                  "to requests its KV events have not confirmed yet).")
                  .Add({}));
  pending_requests_ =
      &metrics::gauge_family(
           reg, "kvgate_router_pending_requests",
           "Requests whose prompts are credited to their worker as blocks in flight "
           "(--pending-blocks-max-requests).")
           .Add({});
  pending_blocks_ = &metrics::gauge_family(reg, "kvgate_router_pending_blocks",
                                           "Blocks credited as in flight, in all "
                                           "(--pending-blocks-capacity).")
                         .Add({});
  auto& credits = metrics::counter_family(
      reg, "kvgate_router_pending_credits_total",
      "Blocks-in-flight credits: credited (a dispatch), withdrawn (its request failed or was "
      "cancelled), evicted (ended early for room).");
  pending_credits_ = {&credits.Add({{"event", "credited"}}), &credits.Add({{"event", "withdrawn"}}),
                      &credits.Add({{"event", "evicted"}})};
}

void GatewayMetrics::add_upstream_series(metrics::Registry& reg) {
  auto& stream_bytes = metrics::counter_family(
      reg, "kvgate_stream_bytes_total",
      "Streamed answers' bytes: relayed (written to clients) and copied (held, rebuilt or kept by "
      "the gateway on the way; at most once each).");
  stream_relayed_ = sharded(stream_bytes.Add({{"kind", "relayed"}}));
  stream_copied_ = sharded(stream_bytes.Add({{"kind", "copied"}}));
  retries_ =
      &metrics::counter_family(reg, "kvgate_upstream_retries_total",
                               "Requests sent again to another worker after a retryable failure.")
           .Add({});
  stale_retries_ =
      &metrics::counter_family(
           reg, "kvgate_upstream_stale_retries_total",
           "Requests sent again on a fresh connection because the worker had closed the pooled one "
           "just as they went out (not counted against the worker).")
           .Add({});
  vetoed_attempts_ =
      &metrics::counter_family(
           reg, "kvgate_upstream_vetoed_attempts_total",
           "Requests taken off a worker the liveness tracker vetoed before anything reached their "
           "client, and sent to another worker at once.")
           .Add({});
  upstream_ = labelled_counters<4>(
      reg, "kvgate_upstream_connections_total",
      "Upstream connections by event: connect (opened), reuse (taken from the pool), expired "
      "(idle past --upstream-idle-timeout-secs, closed), closed_by_peer (found closed by the "
      "worker before reuse).",
      "event", {"connect", "reuse", "expired", "closed_by_peer"});
}

void GatewayMetrics::add_answer_series(metrics::Registry& reg) {
  answers_ = labelled_counters<4>(
      reg, "kvgate_tokenizer_answers_total",
      "Chat answers encoded ahead of the client's next turn, by outcome: encoded (in the encode "
      "cache now), no_answer (no one text to keep: tool calls, several choices), failed (the next "
      "turn did not render), dropped (the backlog was full).",
      "outcome", {"encoded", "no_answer", "failed", "dropped"});
  answer_seconds_ = &metrics::counter_family(
                         reg, "kvgate_tokenizer_answer_seconds_total",
                         "Time the answer thread spent rendering and encoding answers ahead of "
                         "the next turn (off the request path).")
                         .Add({});
}

void GatewayMetrics::add_front_end_series(metrics::Registry& reg) {
  front_connections_ = &metrics::gauge_family(reg, "kvgate_http_open_connections",
                                              "Client connections open now (--max-connections).")
                            .Add({});
  auto& front_events = metrics::counter_family(
      reg, "kvgate_http_connections_total",
      "Client connections by event: accepted, idle_shed (closed to make room at "
      "--max-connections), refused (closed at once past the reserve), tls_handshake_failed, "
      "idle_timeout (no next request within --client-idle-timeout-secs).");
  auto& refusals = metrics::counter_family(
      reg, "kvgate_http_refusals_total",
      "Requests refused before a handler saw them: bad_request (malformed, 413/414/431), "
      "connection_limit (503 on a reserved connection), body_budget (429/413 at "
      "--max-inflight-body-bytes), framing (400/501: a head whose end could be read two ways, "
      "as smuggled requests are), read_timeout (not whole within --client-read-timeout-secs, "
      "closed unanswered).");
  static constexpr const char* kFront[] = {"accepted", "idle_shed", "refused",
                                           "tls_handshake_failed", "idle_timeout"};
  static constexpr const char* kRefusals[] = {"bad_request", "connection_limit", "body_budget",
                                              "framing", "read_timeout"};
  for (size_t i = 0; i < 5; ++i) front_[i] = &front_events.Add({{"event", kFront[i]}});
  for (size_t i = 0; i < 5; ++i) front_[5 + i] = &refusals.Add({{"reason", kRefusals[i]}});
}

void GatewayMetrics::add_index_series(metrics::Registry& reg) {
  lookups_ = sharded(
      metrics::counter_family(reg, "kvgate_index_lookups_total", "KV index lookups.").Add({}));
  lookup_seconds_ = sharded(
      metrics::histogram_family(reg, "kvgate_index_lookup_seconds", "KV index lookup time."), {},
      metrics::fast_op_buckets_seconds());
  index_holders_ =
      &metrics::gauge_family(reg, "kvgate_index_holders", "Holders (worker, dp rank) with blocks.")
           .Add({});
  index_blocks_ =
      &metrics::gauge_family(reg, "kvgate_index_blocks", "Distinct blocks held by some holder.")
           .Add({});
  index_memberships_ =
      &metrics::gauge_family(reg, "kvgate_index_memberships", "(holder, block) pairs in the index.")
           .Add({});
  index_bytes_ =
      &metrics::gauge_family(reg, "kvgate_index_bytes", "Bytes the index's structures hold.")
           .Add({});
}

void GatewayMetrics::add_worker_families(metrics::Registry& reg) {
  worker_state_ = &metrics::gauge_family(
      reg, "kvgate_worker_state",
      "1 per worker; its labels say what it is now: role (regular, prefill, decode), health "
      "(unknown, healthy, unhealthy), liveness (live; unreachable: connections fail or it is "
      "silent; wedged: streams without a token) and breaker (closed, open, half_open). A vetoed "
      "worker is avoided while others can serve.");
  worker_in_flight_ =
      &metrics::gauge_family(reg, "kvgate_worker_in_flight", "Requests in flight per worker.");
  worker_peer_in_flight_ = &metrics::gauge_family(
      reg, "kvgate_worker_peer_in_flight",
      "Requests the other gateway replicas have in flight per worker (--state-sync; made when a "
      "replica first reports one).");
  liveness_transitions_ =
      &metrics::counter_family(reg, "kvgate_worker_liveness_transitions_total",
                               "Liveness changes of any worker, by the state entered and why.");
  worker_kv_usage_ = &metrics::gauge_family(reg, "kvgate_worker_kv_usage_ratio",
                                            "The worker's reported KV cache usage.");
  worker_waiting_ =
      &metrics::gauge_family(reg, "kvgate_worker_waiting_requests",
                             "Requests waiting in the worker's queue, as it reports.");
  worker_requests_ =
      &metrics::counter_family(reg, "kvgate_worker_requests_total", "Requests sent to the worker.");
  worker_retries_ =
      &metrics::counter_family(reg, "kvgate_worker_retryable_failures_total",
                               "Retryable failures (connection, 408, 429, 5xx) per worker (made "
                               "at the worker's first).");
  worker_cached_predicted_ = &metrics::counter_family(
      reg, "kvgate_cached_tokens_predicted_total",
      "Prompt tokens the index predicted the worker had cached, over the answers its engine "
      "reported cached tokens for (cache_aware).");
  worker_cached_reported_ = &metrics::counter_family(
      reg, "kvgate_cached_tokens_reported_total",
      "Prompt tokens the worker's engine reported cached over the same answers.");
  worker_prefill_rate_ = &metrics::gauge_family(
      reg, "kvgate_worker_prefill_tokens_per_second",
      "Prompt tokens per second the worker prefills, learned from streamed requests' first "
      "tokens (0 until it has one: the cost model's --prefill-tokens-per-second holds).");
  worker_cache_agreement_ = &metrics::gauge_family(
      reg, "kvgate_cache_agreement_ratio",
      "1 - |reported - predicted| / the larger, over the last window of 8,192 cached tokens "
      "(1 until one completes): low means the index and the engine disagree about its cache "
      "(block size, hash seed, tokenizer); --cache-agreement-warn-below names it in a warning.");
}

void GatewayMetrics::request_done(ApiRoute route, unsigned status, double seconds,
                                  size_t model_slot) {
  models_->request_done(model_slot, route, static_cast<size_t>(status_class(status)));
  duration_[static_cast<size_t>(route)]->observe(seconds);
}

void GatewayMetrics::decision(policy::Branch b, double seconds, bool pending) {
  decisions_[static_cast<size_t>(b)]->add();
  decision_seconds_->observe(seconds);
  if (pending) pending_decisions_->add();
}

void GatewayMetrics::publish() {
  models_->publish();
  for (ShardedHistogramPtr& h : duration_) h->publish();
  for (ShardedCounterPtr& c : errors_) c->publish();
  for (ShardedCounterPtr& c : decisions_) c->publish();
  for (ShardedCounterPtr* c : {&prompt_tokens_, &matched_tokens_, &lookups_, &stream_relayed_,
                               &stream_copied_, &pending_decisions_}) {
    (*c)->publish();
  }
  for (ShardedHistogramPtr* h : {&decision_seconds_, &ttft_, &lookup_seconds_, &pd_prefill_seconds_,
                                 &pd_transfer_seconds_, &pd_decode_seconds_}) {
    (*h)->publish();
  }
  for (ShardedHistogramPtr& h : admission_wait_) h->publish();
}

namespace {
metrics::Labels worker_state_labels(const std::string& url, const WorkerSeries& s) {
  return {{"worker", url},
          {"role", s.role},
          {"health", workers::health_name(s.health)},
          {"liveness", workers::liveness_name(s.liveness)},
          {"breaker", workers::breaker_state_name(s.breaker)}};
}
}  // namespace

void GatewayMetrics::add_worker(const std::string& url, std::string_view role) {
  MutexLock lock(&mu_);
  auto& s = workers_[url];
  if (!s) {
    s = std::make_unique<WorkerSeries>();
    const metrics::Labels l{{"worker", url}};
    s->role = std::string(role);
    s->state = &worker_state_->Add(worker_state_labels(url, *s));
    s->state->Set(1);
    s->in_flight = &worker_in_flight_->Add(l);
    s->kv_usage = &worker_kv_usage_->Add(l);
    s->waiting = &worker_waiting_->Add(l);
    s->requests = &worker_requests_->Add(l);
    s->cached_predicted = &worker_cached_predicted_->Add(l);
    s->cached_reported = &worker_cached_reported_->Add(l);
    s->cache_agreement = &worker_cache_agreement_->Add(l);
    s->prefill_rate = &worker_prefill_rate_->Add(l);
  }
}

void GatewayMetrics::remove_worker(const std::string& url) {
  MutexLock lock(&mu_);
  auto it = workers_.find(url);
  if (it == workers_.end()) return;
  WorkerSeries& s = *it->second;
  worker_state_->Remove(s.state);
  worker_in_flight_->Remove(s.in_flight);
  if (s.peer_in_flight != nullptr) worker_peer_in_flight_->Remove(s.peer_in_flight);
  worker_kv_usage_->Remove(s.kv_usage);
  worker_waiting_->Remove(s.waiting);
  worker_requests_->Remove(s.requests);
  if (s.retries != nullptr) worker_retries_->Remove(s.retries);
  worker_cached_predicted_->Remove(s.cached_predicted);
  worker_cached_reported_->Remove(s.cached_reported);
  worker_cache_agreement_->Remove(s.cache_agreement);
  worker_prefill_rate_->Remove(s.prefill_rate);
  workers_.erase(it);
}

void GatewayMetrics::sync_worker(const workers::Worker& w) {
  MutexLock lock(&mu_);
  auto it = workers_.find(w.url());
  if (it == workers_.end()) return;
  WorkerSeries& s = *it->second;
  set_worker_state(it->first, s, w);
  const auto load = w.engine_load();
  s.in_flight->Set(w.in_flight());
  if (s.peer_in_flight == nullptr && w.peer_in_flight() != 0) {
    s.peer_in_flight = &worker_peer_in_flight_->Add({{"worker", it->first}});
  }
  if (s.peer_in_flight != nullptr) s.peer_in_flight->Set(w.peer_in_flight());
  s.kv_usage->Set(load.kv_usage);
  s.waiting->Set(load.waiting);
  add_worker_totals(it->first, s, w);
  s.cache_agreement->Set(w.cache_agreement().ratio());
  s.prefill_rate->Set(w.prefill_rate());
}

void GatewayMetrics::set_worker_state(const std::string& url, WorkerSeries& s,
                                      const workers::Worker& w) {
  const workers::Health health = w.health().state();
  const workers::Liveness liveness = w.liveness().state();
  const workers::BreakerState breaker = w.breaker().state();
  if (health == s.health && liveness == s.liveness && breaker == s.breaker) return;
  worker_state_->Remove(s.state);
  s.health = health;
  s.liveness = liveness;
  s.breaker = breaker;
  s.state = &worker_state_->Add(worker_state_labels(url, s));
  s.state->Set(1);
}

void GatewayMetrics::add_worker_totals(const std::string& url, WorkerSeries& s,
                                       const workers::Worker& w) {
  const uint64_t req = w.dispatched(), ret = w.retryable_failures();
  if (req > s.requests_seen) s.requests->Increment(static_cast<double>(req - s.requests_seen));
  if (ret > s.retries_seen) {
    if (s.retries == nullptr) s.retries = &worker_retries_->Add({{"worker", url}});
    s.retries->Increment(static_cast<double>(ret - s.retries_seen));
  }
  s.requests_seen = req;
  s.retries_seen = ret;
  const workers::CacheAgreement& agreement = w.cache_agreement();
  const uint64_t predicted = agreement.predicted_total(), reported = agreement.reported_total();
  s.cached_predicted->Increment(static_cast<double>(predicted - s.cached_predicted_seen));
  s.cached_reported->Increment(static_cast<double>(reported - s.cached_reported_seen));
  s.cached_predicted_seen = predicted;
  s.cached_reported_seen = reported;
}

void GatewayMetrics::liveness_transition(const workers::LivenessTransition& t) {
  liveness_transitions_
      ->Add({{"to", workers::liveness_name(t.to)},
             {"reason", workers::liveness_reason_name(t.reason)}})
      .Increment();
}

void GatewayMetrics::sync_pending(const policy::Policy::PendingStats& s) {
  pending_requests_->Set(static_cast<double>(s.live_requests));
  pending_blocks_->Set(static_cast<double>(s.live_blocks));
  MutexLock lock(&mu_);
  metrics::advance(*pending_credits_[0], s.credited);
  metrics::advance(*pending_credits_[1], s.withdrawn);
  metrics::advance(*pending_credits_[2], s.evicted);
}

void GatewayMetrics::sync_admission(const AdmissionStats& s) {
  admission_running_->Set(static_cast<double>(s.running));
  admission_prefilling_->Set(static_cast<double>(s.prefilling));
  admission_queued_->Set(static_cast<double>(s.queued));
  for (size_t c = 0; c < admission_by_class_.size(); ++c) {
    admission_by_class_[c]->Set(static_cast<double>(s.queued_by_class[c]));
  }
  MutexLock lock(&mu_);  // scrapes of both listeners take turns at the counters
  metrics::advance(*admission_waited_, s.waited);
  metrics::advance(*admission_shed_, s.shed);
  metrics::advance(*admission_promoted_, s.promoted);
}

namespace {
// Counters fed from a component's running totals: each scrape adds what grew since the last.
template <size_t N>
void add_growth(const std::array<metrics::Counter*, N>& counters,
                const std::array<uint64_t, N>& now, const std::array<uint64_t, N>& seen) {
  for (size_t i = 0; i < N; ++i) {
    if (now[i] > seen[i]) counters[i]->Increment(static_cast<double>(now[i] - seen[i]));
  }
}
}  // namespace

void GatewayMetrics::sync_upstream(const UpstreamPoolStats& s) {
  MutexLock lock(&mu_);
  const auto totals = [](const UpstreamPoolStats& t) {
    return std::array<uint64_t, 4>{t.connects, t.reuses, t.expired, t.closed_by_peer};
  };
  add_growth(upstream_, totals(s), totals(upstream_seen_));
  upstream_seen_ = s;
}

void GatewayMetrics::sync_answers(const AnswerMemoryStats& s) {
  MutexLock lock(&mu_);
  const auto totals = [](const AnswerMemoryStats& t) {
    return std::array<uint64_t, 4>{t.encoded, t.no_answer, t.failed, t.dropped};
  };
  add_growth(answers_, totals(s), totals(answers_seen_));
  if (s.seconds > answers_seen_.seconds)
    answer_seconds_->Increment(s.seconds - answers_seen_.seconds);
  answers_seen_ = s;
}

void GatewayMetrics::sync_front_end(const http::ServerStats& s) {
  MutexLock lock(&mu_);
  front_connections_->Set(static_cast<double>(s.open_connections));
  const auto totals = [](const http::ServerStats& t) {
    return std::array<uint64_t, 10>{
        t.connections_accepted, t.idle_shed,    t.refused_connections, t.tls_handshake_failures,
        t.idle_timeouts,        t.bad_requests, t.restricted_refusals, t.body_budget_refusals,
        t.framing_refusals,     t.read_timeouts};
  };
  add_growth(front_, totals(s), totals(front_seen_));
  front_seen_ = s;
}

void GatewayMetrics::set_index(uint64_t holders, uint64_t blocks, uint64_t memberships,
                               uint64_t bytes) {
  index_holders_->Set(static_cast<double>(holders));
  index_blocks_->Set(static_cast<double>(blocks));
  index_memberships_->Set(static_cast<double>(memberships));
  index_bytes_->Set(static_cast<double>(bytes));
}

}  // namespace kvgate::app
