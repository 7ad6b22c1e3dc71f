// Worker: one mock engine worker's set-up, shutdown and scheduler step loop (detail/worker.h; the
// routes are in worker_inference.cc, worker_info.cc and worker_admin.cc).
#include "mock/detail/worker.h"
#include "mock/detail/worker_parts.h"

#include "boost/asio/post.hpp"
#include "boost/asio/use_future.hpp"
#include "kvgate/core/log.h"
#include "kvgate/events/encode.h"
#include "kvgate/events/load_record.h"

namespace kvgate::mock::detail {
namespace net = boost::asio;
using http::Response;

namespace {

// The shortest gap between two pushed load records of one rank while it steps.
constexpr std::chrono::milliseconds kMinLoadGap{50};

const std::shared_ptr<spdlog::logger>& worker_log() {
  static const auto l = log::get("mock");
  return l;
}

const metrics::Histogram::BucketBoundaries& latency_buckets() {
  // vLLM's TTFT / e2e buckets, seconds.
  static const metrics::Histogram::BucketBoundaries b = {
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,  0.75,
      1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160., 640., 2560.};
  return b;
}

const metrics::Histogram::BucketBoundaries& itl_buckets() {
  static const metrics::Histogram::BucketBoundaries b = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025,
                                                         0.05,  0.075,  0.1,   0.15,   0.2,  0.3,
                                                         0.4,   0.5,    0.75,  1.0,    2.5,  5.0};
  return b;
}

}  // namespace

Worker::Worker(http::IoPool& pool, PublisherHub& hub, WorkerOptions options)
    : pool_(pool),
      ctx_(pool.context(options.http.pin_context.value_or(0))),
      hub_(hub),
      options_(std::move(options)),
      tokenizer_(options_.tokenizer ? options_.tokenizer
                                    : tokenizer::test_prompt_tokenizer(options_.engine.vocab)),
      pause_timer_(ctx_),
      rng_(options_.seed * 0x9E3779B97F4A7C15ull + options_.index),
      listener_timer_(ctx_),
      load_timer_(ctx_),
      registry_(std::make_shared<metrics::Registry>()) {
  options_.http.server_name = "kvgate-mock";
  server_ = std::make_unique<http::Server>(pool_, options_.http);

  auto& running = metrics::gauge_family(*registry_, "vllm:num_requests_running",
                                        "Number of requests in model execution batches.");
  auto& waiting = metrics::gauge_family(*registry_, "vllm:num_requests_waiting",
                                        "Number of requests waiting to be processed.");
  auto& kv = metrics::gauge_family(*registry_, "vllm:kv_cache_usage_perc",
                                   "KV-cache usage. 1 means 100 percent usage.");
  auto& gpu = metrics::gauge_family(
      *registry_, "vllm:gpu_cache_usage_perc",
      "GPU KV-cache usage. 1 means 100 percent usage (older name of kv_cache_usage_perc).");
  auto& queries =
      metrics::counter_family(*registry_, "vllm:prefix_cache_queries_total",
                              "Prefix cache queries, in terms of number of queried tokens.");
  auto& hits = metrics::counter_family(*registry_, "vllm:prefix_cache_hits_total",
                                       "Prefix cache hits, in terms of number of cached tokens.");
  auto& preempt = metrics::counter_family(*registry_, "vllm:num_preemptions_total",
                                          "Cumulative number of preemptions from the engine.");
  auto& prompt = metrics::counter_family(*registry_, "vllm:prompt_tokens_total",
                                         "Number of prefill tokens processed.");
  auto& gen = metrics::counter_family(*registry_, "vllm:generation_tokens_total",
                                      "Number of generation tokens processed.");
  auto& success = metrics::counter_family(*registry_, "vllm:request_success_total",
                                          "Count of successfully processed requests.");
  auto& ttft = metrics::histogram_family(*registry_, "vllm:time_to_first_token_seconds",
                                         "Histogram of time to first token in seconds.");
  auto& itl = metrics::histogram_family(*registry_, "vllm:inter_token_latency_seconds",
                                        "Histogram of inter-token latency in seconds.");
  auto& e2e = metrics::histogram_family(*registry_, "vllm:e2e_request_latency_seconds",
                                        "Histogram of e2e request latency in seconds.");
  auto& batches = metrics::counter_family(
      *registry_, "kvgate_mock_kv_batches_total",
      "KV-event batches published by the mock, by outcome (sent, or dropped by the fault hook).");

  for (uint32_t r = 0; r < options_.dp_size; ++r) {
    auto rank = std::make_unique<Rank>(ctx_, options_.engine);
    rank->index = r;
    rank->stream = options_.streams.at(r);
    metrics::Labels l = {{"model_name", options_.model}, {"engine", std::to_string(r)}};
    rank->running = &running.Add(l);
    rank->waiting = &waiting.Add(l);
    rank->kv_usage = &kv.Add(l);
    rank->gpu_usage = &gpu.Add(l);
    rank->queries = &queries.Add(l);
    rank->hits = &hits.Add(l);
    rank->preemptions = &preempt.Add(l);
    rank->prompt_tokens = &prompt.Add(l);
    rank->generation_tokens = &gen.Add(l);
    auto ls = l;
    ls["finished_reason"] = "length";
    rank->success = &success.Add(ls);
    rank->ttft = &ttft.Add(l, latency_buckets());
    rank->itl = &itl.Add(l, itl_buckets());
    rank->e2e = &e2e.Add(l, latency_buckets());
    auto lb = l;
    lb["outcome"] = "sent";
    rank->batches_sent = &batches.Add(lb);
    lb["outcome"] = "dropped";
    rank->batches_dropped = &batches.Add(lb);
    ranks_.push_back(std::move(rank));
  }

  using http::Verb;
  auto sync = [this](http::Response (Worker::*fn)() const) {
    return [this, fn](const http::Request&, http::Responder& res) -> net::awaitable<void> {
      Response reply = (this->*fn)();
      (void)co_await res.send(std::move(reply));
    };
  };
  server_->route(Verb::get, "/health", sync(&Worker::health));
  server_->route(Verb::get, "/load", sync(&Worker::load_report));
  server_->route(Verb::get, "/server_info", sync(&Worker::server_info));
  server_->route(Verb::get, "/get_server_info", sync(&Worker::server_info));
  server_->route(Verb::get, "/v1/models", sync(&Worker::models));
  server_->route(Verb::get, "/metrics",
                 [this](const http::Request&, http::Responder& res) -> net::awaitable<void> {
                   Response reply = metrics();
                   (void)co_await res.send(std::move(reply));
                 });
  auto infer = [this](ApiKind kind) {
    return [this, kind](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
      co_await serve_inference(kind, req, res);
    };
  };
  server_->route(Verb::post, "/v1/completions", infer(ApiKind::kCompletion));
  server_->route(Verb::post, "/v1/chat/completions", infer(ApiKind::kChat));
  server_->route(Verb::post, "/generate", infer(ApiKind::kGenerate));
  server_->route(Verb::post, "/v1/responses", infer(ApiKind::kResponses));
  auto pooling = [this](PoolingKind kind) {
    return [this, kind](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
      co_await serve_pooling(kind, req, res);
    };
  };
  server_->route(Verb::post, "/v1/embeddings", pooling(PoolingKind::kEmbeddings));
  server_->route(Verb::post, "/v1/rerank", pooling(PoolingKind::kRerank));
  server_->route(Verb::post, "/rerank", pooling(PoolingKind::kRerank));
  server_->route(Verb::post, "/v1/score", pooling(PoolingKind::kScore));
  server_->route(Verb::post, "/score", pooling(PoolingKind::kScore));
  auto tokenize = [this](bool detokenize) {
    return
        [this, detokenize](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
          auto body = detokenize ? render_detokenize(req.body(), json_)
                                 : render_tokenize(req.body(), *tokenizer_, json_,
                                                   options_.engine.max_model_len);
          Response reply = body.ok() ? Response::json(200, std::move(*body))
                                     : Response::error(400, std::string(body.status().message()));
          (void)co_await res.send(std::move(reply));
        };
  };
  server_->route(Verb::post, "/tokenize", tokenize(false));
  server_->route(Verb::post, "/detokenize", tokenize(true));
  server_->route(Verb::get, "/get_model_info", sync(&Worker::model_info));
  // SGLang's generation probe: a healthy engine answers it after running one token.
  server_->route(Verb::get, "/health_generate", sync(&Worker::health));
  auto admin = [this](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
    co_await serve_admin(req, res);
  };
  server_->route_prefix(Verb::get, "/admin/", admin);
  server_->route_prefix(Verb::post, "/admin/", admin);
  register_bootstrap();
}

Worker::~Worker() = default;

Status Worker::start() {
  if (Status s = server_->start(); !s.ok()) return s;
  if (bootstrap_) {
    if (Status s = bootstrap_->start(); !s.ok()) {
      return Status(s.code(), "bootstrap server: " + std::string(s.message()));
    }
  }
  if (options_.push_loads_interval.count() > 0) net::post(ctx_, [this] { arm_load_timer(); });
  return Status();
}

// While quiet, a load record every push_loads_interval (a step pushes its own, see publish()).
void Worker::arm_load_timer() {
  load_timer_.expires_after(options_.push_loads_interval);
  load_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    const MonoTime now = Clock::real().now();
    for (auto& r : ranks_) {
      if (now - r->load_pushed >= options_.push_loads_interval) push_load(*r, now);
    }
    arm_load_timer();
  });
}

void Worker::push_load(Rank& r, MonoTime now) {
  const EngineLoad l = rank_load(r);
  events::LoadRecord rec;
  rec.running = l.running;
  rec.waiting = l.waiting;
  rec.kv_usage = l.kv_usage();
  rec.queued_prefill_tokens = l.queued_prefill_tokens;
  rec.ts = to_unix_seconds(Clock::real().wall());
  rec.dp_rank = r.index;
  events::encode_load_record(rec, &r.load_payload);
  hub_.publish_load(r.stream, r.load_payload);
  r.load_pushed = now;
}

void Worker::shutdown() {
  auto done = net::post(ctx_, net::use_future([this] {
                          stopping_ = true;
                          pause_timer_.cancel();
                          listener_timer_.cancel();
                          load_timer_.cancel();
                          for (auto& r : ranks_) {
                            r->timer.cancel();
                            for (net::steady_timer* t : r->room_waiters) t->cancel();
                          }
                          for (auto& [key, p] : parts_) {
                            p->finished = true;
                            p->aborted = true;
                            p->registered = false;
                            p->owner->wake.cancel();
                          }
                          parts_.clear();
                          if (rooms_) rooms_->close();
                          if (transfers_) transfers_->close();
                          for (http::Connection* c : pulls_) c->close();
                        }));
  done.wait();
  if (bootstrap_ && !bootstrap_->stop(std::chrono::seconds(5))) {
    worker_log()->warn("worker {}: bootstrap connections still open after 5 s", options_.index);
  }
  if (!server_->stop(std::chrono::seconds(5))) {
    worker_log()->warn("worker {}: connections still open after 5 s", options_.index);
  }
}

// ---- the step loop ----

void Worker::kick(Rank& r) {
  if (r.stepping || stopping_) return;
  apply_deferred(r);
  if (paused_) return;
  const MonoTime now = Clock::real().now();
  auto d = r.engine.begin_step(now);
  if (!d) return;
  r.stepping = true;
  r.step_end = now + *d;
  r.timer.expires_at(r.step_end);
  r.timer.async_wait([this, &r](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    on_step_done(r);
  });
}

EngineLoad Worker::rank_load(const Rank& r) {
  EngineLoad l = r.engine.load();
  l.waiting += static_cast<uint32_t>(r.room_waiters.size());
  return l;
}

void Worker::on_step_done(Rank& r) {
  r.stepping = false;
  for (net::steady_timer* t : r.room_waiters) t->cancel();
  const StepOutput& out = r.engine.finish_step(r.step_end);
  for (const TokenOutput& t : out.tokens) {
    auto it = parts_.find(part_key(r.index, t.id));
    if (it == parts_.end()) continue;
    Part& p = *it->second;
    p.pending.push_back(t.token);
    p.all.push_back(t.token);
    p.cached = t.cached_tokens;
    p.preemptions = t.preemptions;
    if (t.first) {
      p.first_token = out.end;
      r.ttft->Observe(to_seconds(out.end - p.arrival));
    } else if (p.last_token) {
      r.itl->Observe(to_seconds(out.end - *p.last_token));
    }
    p.last_token = out.end;
    if (t.first && p.room) room_ready(p);
    if (t.finished) {
      p.finished = true;
      p.finish = out.end;
      p.registered = false;
      r.e2e->Observe(to_seconds(out.end - p.arrival));
      parts_.erase(it);
    }
    p.owner->wake.cancel();
  }
  r.engine.take_events(&r.scratch);
  if (options_.oracle != nullptr) options_.oracle->apply(holder_of(r), r.scratch);
  publish(r, r.scratch);
  // The load rides along after a step, at most every kMinLoadGap (steps take milliseconds).
  if (options_.push_loads_interval.count() > 0 && r.step_end - r.load_pushed >= kMinLoadGap) {
    push_load(r, r.step_end);
  }
  kick(r);
}

uint32_t Worker::holder_of(const Rank& r) const {
  return options_.index * options_.dp_size + r.index;
}

void Worker::publish(Rank& r, std::vector<events::WireEvent>& evs) {
  if (evs.empty()) return;
  events::WireBatch batch;
  batch.ts = to_unix_seconds(Clock::real().wall());
  batch.events = std::move(evs);
  evs.clear();
  // vLLM stamps its data-parallel rank; SGLang sends nil unless it runs data-parallel.
  const bool sglang = options_.wire == events::WireFormat::kSglangArray ||
                      options_.wire == events::WireFormat::kSglangMap;
  if (!sglang || options_.dp_size > 1) batch.dp_rank = r.index;
  r.payload.clear();
  events::encode_batch(batch, options_.wire, &r.payload);
  const bool drop = r.drop_next > 0;
  if (drop) --r.drop_next;
  hub_.publish(r.stream, r.next_seq++, r.payload, Clock::real().now() + r.publish_delay, drop);
}

void Worker::apply_deferred(Rank& r) {
  if (r.deferred_clear) {
    r.deferred_clear = false;
    if (r.engine.clear_cache(/*announce=*/true).ok()) {
      r.engine.take_events(&r.scratch);
      if (options_.oracle != nullptr) options_.oracle->apply(holder_of(r), r.scratch);
      publish(r, r.scratch);
    }
  }
  if (r.deferred_restart) {
    const bool clear = *r.deferred_restart;
    r.deferred_restart.reset();
    if (clear && r.engine.clear_cache(/*announce=*/false).ok()) {
      // A restarted engine comes back empty and says nothing about it.
      r.engine.take_events(&r.scratch);
      r.scratch.clear();
      if (options_.oracle != nullptr) options_.oracle->clear(holder_of(r));
    }
    r.next_seq = 0;
    ++r.restarts;
    hub_.restart(r.stream);
  }
}

void Worker::reopen_listener_after(Duration delay) {
  listener_timer_.expires_after(delay);
  listener_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    if (Status s = server_->reopen_listener(); !s.ok()) {
      KVGATE_LOG_EVERY_MS(worker_log(), spdlog::level::warn, 1000, "reopen listener: {}",
                          s.ToString());
      reopen_listener_after(std::chrono::milliseconds(50));
    }
  });
}

void Worker::set_paused(bool paused) {
  paused_ = paused;
  if (!paused_) {
    for (auto& r : ranks_) kick(*r);
  }
}

}  // namespace kvgate::mock::detail
