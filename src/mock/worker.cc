#include "mock/detail/worker.h"

#include <algorithm>
#include <cmath>

#include "boost/asio/post.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/asio/use_future.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"
#include "kvgate/events/encode.h"

namespace kvgate::mock::detail {
namespace net = boost::asio;
using http::Response;

namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = log::get("mock");
  return l;
}

uint64_t part_key(uint32_t rank, RequestId id) { return (uint64_t{rank} << 48) | id; }

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

// Reads an optional object body for the admin endpoints ("" is an empty object).
bool admin_body(simdjson::dom::parser& parser, const std::string& body,
                simdjson::dom::object* out) {
  std::string_view b = body.empty() ? std::string_view("{}") : std::string_view(body);
  simdjson::dom::element doc;
  return parser.parse(b.data(), b.size()).get(doc) == simdjson::SUCCESS &&
         doc.get(*out) == simdjson::SUCCESS;
}

std::optional<int64_t> int_field(const simdjson::dom::object& o, std::string_view key) {
  int64_t v;
  if (o.at_key(key).get(v) == simdjson::SUCCESS) return v;
  return std::nullopt;
}

std::optional<double> num_field(const simdjson::dom::object& o, std::string_view key) {
  double v;
  if (o.at_key(key).get(v) == simdjson::SUCCESS) return v;
  return std::nullopt;
}

std::optional<bool> bool_field(const simdjson::dom::object& o, std::string_view key) {
  bool v;
  if (o.at_key(key).get(v) == simdjson::SUCCESS) return v;
  return std::nullopt;
}

Response ok_json() { return Response::json(200, "{\"ok\":true}"); }

}  // namespace

// One prompt of one HTTP request, as the handler and the step loop share it.
struct Worker::Part {
  struct Exchange* owner = nullptr;
  uint32_t rank = 0;
  RequestId engine_id = 0;
  bool registered = false;  // in parts_ (waiting for tokens)
  std::string rid;
  ApiKind kind = ApiKind::kCompletion;
  uint32_t prompt_tokens = 0;
  uint32_t oracle_tokens = 0;  // the fleet's best cached prefix at arrival
  uint32_t cached = 0;
  uint32_t preemptions = 0;
  std::vector<TokenId> pending;  // produced, not yet written to the client
  std::vector<TokenId> all;
  std::string text_so_far;  // /generate streams cumulative text
  bool finished = false;
  bool aborted = false;
  bool final_written = false;
  bool first_written = false;
  MonoTime arrival{};
  WallTime arrival_wall{};
  std::optional<MonoTime> first_token, last_token, finish;
};

struct Worker::Exchange {
  explicit Exchange(const net::any_io_executor& ex) : wake(ex) {}
  net::steady_timer wake;
  std::vector<std::unique_ptr<Part>> parts;
};

struct Worker::Rank {
  Rank(net::io_context& ctx, const EngineConfig& c) : engine(c), timer(ctx) {}
  uint32_t index = 0;
  Engine engine;
  net::steady_timer timer;
  bool stepping = false;
  MonoTime step_end{};
  size_t stream = 0;
  uint64_t next_seq = 0;
  uint64_t drop_next = 0;
  Duration publish_delay{0};
  bool deferred_clear = false;
  std::optional<bool> deferred_restart;  // value: clear the cache too
  uint64_t restarts = 0;
  std::vector<events::WireEvent> scratch;
  std::string payload;
  // Metric series (owned by the worker's registry).
  metrics::Gauge* running = nullptr;
  metrics::Gauge* waiting = nullptr;
  metrics::Gauge* kv_usage = nullptr;
  metrics::Gauge* gpu_usage = nullptr;
  metrics::Counter* queries = nullptr;
  metrics::Counter* hits = nullptr;
  metrics::Counter* preemptions = nullptr;
  metrics::Counter* prompt_tokens = nullptr;
  metrics::Counter* generation_tokens = nullptr;
  metrics::Counter* success = nullptr;
  metrics::Counter* batches_sent = nullptr;
  metrics::Counter* batches_dropped = nullptr;
  metrics::Histogram* ttft = nullptr;
  metrics::Histogram* itl = nullptr;
  metrics::Histogram* e2e = nullptr;
  EngineCounters exported;  // what the counters already show
  uint64_t exported_sent = 0, exported_dropped = 0;
};

struct Worker::Record {
  uint64_t seq = 0;
  std::string id;
  uint32_t rank = 0;
  std::string_view api;
  std::string_view status;
  double arrival = 0;
  double finish = 0;
  std::optional<double> ttft;
  double e2e = 0;
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;
  uint32_t oracle_tokens = 0;
  uint32_t output_tokens = 0;
  uint32_t preemptions = 0;
};

Worker::Worker(http::IoPool& pool, PublisherHub& hub, WorkerOptions options)
    : pool_(pool),
      ctx_(pool.context(options.http.pin_context.value_or(0))),
      hub_(hub),
      options_(std::move(options)),
      tokenizer_(options_.engine.vocab),
      pause_timer_(ctx_),
      rng_(options_.seed * 0x9E3779B97F4A7C15ull + options_.index),
      listener_timer_(ctx_),
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
  auto admin = [this](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
    co_await serve_admin(req, res);
  };
  server_->route_prefix(Verb::get, "/admin/", admin);
  server_->route_prefix(Verb::post, "/admin/", admin);
}

Worker::~Worker() = default;

Status Worker::start() { return server_->start(); }

void Worker::shutdown() {
  auto done = net::post(ctx_, net::use_future([this] {
                          stopping_ = true;
                          pause_timer_.cancel();
                          listener_timer_.cancel();
                          for (auto& r : ranks_) r->timer.cancel();
                          for (auto& [key, p] : parts_) {
                            p->finished = true;
                            p->aborted = true;
                            p->registered = false;
                            p->owner->wake.cancel();
                          }
                          parts_.clear();
                        }));
  done.wait();
  if (!server_->stop(std::chrono::seconds(5))) {
    logger()->warn("worker {}: connections still open after 5 s", options_.index);
  }
}

// ---- inference ----

uint32_t Worker::pick_rank(std::optional<uint32_t> wanted) const {
  if (wanted) return *wanted;
  // vLLM's data-parallel balancing: fewest waiting (x4) plus running.
  uint32_t best = 0;
  uint64_t best_score = UINT64_MAX;
  for (const auto& r : ranks_) {
    uint64_t score = uint64_t{r->engine.num_waiting()} * 4 + r->engine.num_running();
    if (score < best_score) {
      best = r->index;
      best_score = score;
    }
  }
  return best;
}

std::optional<unsigned> Worker::injected_failure() {
  bool fail = false;
  if (fail_next_ > 0) {
    --fail_next_;
    fail = true;
  } else if (fail_ratio_ > 0) {
    fail = std::uniform_real_distribution<double>(0, 1)(rng_) < fail_ratio_;
  }
  if (!fail) return std::nullopt;
  ++injected_failures_;
  return fail_status_;
}

void Worker::record(const Part& p, std::string_view status) {
  Record r;
  r.seq = next_record_seq_++;
  r.id = p.rid;
  r.rank = p.rank;
  r.api = p.kind == ApiKind::kChat       ? "chat"
          : p.kind == ApiKind::kGenerate ? "generate"
                                         : "completion";
  r.status = status;
  r.arrival = to_unix_seconds(p.arrival_wall);
  MonoTime end = p.finish.value_or(Clock::real().now());
  r.e2e = to_seconds(end - p.arrival);
  r.finish = r.arrival + r.e2e;
  if (p.first_token) r.ttft = to_seconds(*p.first_token - p.arrival);
  r.prompt_tokens = p.prompt_tokens;
  r.cached_tokens = p.cached;
  r.oracle_tokens = p.oracle_tokens;
  r.output_tokens = static_cast<uint32_t>(p.all.size());
  r.preemptions = p.preemptions;
  records_.push_back(std::move(r));
  while (records_.size() > options_.request_records) records_.pop_front();
}

net::awaitable<void> Worker::serve_inference(ApiKind kind, const http::Request& req,
                                             http::Responder& res) {
  const MonoTime arrival = Clock::real().now();
  const WallTime arrival_wall = Clock::real().wall();
  auto parsed = parse_api_request(kind, req.body(), tokenizer_, json_);
  if (!parsed.ok()) {
    Response reply = Response::error(400, std::string(parsed.status().message()));
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  ApiRequest& api = *parsed;
  if (auto status = injected_failure()) {
    Response reply = Response::error(*status, "injected failure (mock fault hook)",
                                     http::error_type_for(*status));
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  if (stopping_) {
    Response reply = Response::error(503, "engine shutting down", "service_unavailable");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  std::optional<uint32_t> wanted = api.dp_rank;
  if (auto h = req.header("X-Data-Parallel-Rank"); !h.empty()) {
    wanted = static_cast<uint32_t>(std::strtoul(std::string(h).c_str(), nullptr, 10));
  }
  if (wanted && *wanted >= options_.dp_size) {
    Response reply = Response::error(400, "data_parallel_rank out of range");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  const uint32_t rank = pick_rank(wanted);
  Rank& r = *ranks_[rank];

  Exchange ex(res.get_executor());
  // Whatever way this coroutine ends (client gone, shutdown), no part stays in the engine.
  struct Cleanup {
    Worker* w;
    Exchange* ex;
    ~Cleanup() {
      for (auto& p : ex->parts) {
        if (p->registered) {
          w->ranks_[p->rank]->engine.abort(p->engine_id);
          w->parts_.erase(part_key(p->rank, p->engine_id));
          p->registered = false;
          p->aborted = true;
        }
        if (p->engine_id != 0) w->record(*p, p->aborted ? "aborted" : "finished");
      }
    }
  } cleanup{this, &ex};

  const std::string_view prefix = kind == ApiKind::kChat         ? "chatcmpl-"
                                  : kind == ApiKind::kCompletion ? "cmpl-"
                                                                 : "";
  const std::string base_id = std::string(prefix) + "w" + std::to_string(options_.index) + "-" +
                              std::to_string(next_request_++);
  for (size_t i = 0; i < api.prompts.size(); ++i) {
    auto p = std::make_unique<Part>();
    p->owner = &ex;
    p->rank = rank;
    p->kind = kind;
    p->rid = i == 0 ? base_id : base_id + "-" + std::to_string(i);
    p->prompt_tokens = static_cast<uint32_t>(api.prompts[i].size());
    if (options_.oracle != nullptr)
      p->oracle_tokens = options_.oracle->best_prefix_tokens(api.prompts[i]);
    p->arrival = arrival;
    p->arrival_wall = arrival_wall;
    auto id = r.engine.add(std::move(api.prompts[i]), api.max_tokens, arrival);
    if (!id.ok()) {
      Response reply = Response::error(400, std::string(id.status().message()));
      (void)co_await res.send(std::move(reply));
      co_return;
    }
    p->engine_id = *id;
    p->registered = true;
    parts_[part_key(rank, *id)] = p.get();
    ex.parts.push_back(std::move(p));
  }
  kick(r);

  ResponseIds rids{base_id, static_cast<int64_t>(to_unix_seconds(arrival_wall)), options_.model};
  auto wait = [&ex]() -> net::awaitable<void> {
    ex.wake.expires_at(MonoTime::max());
    boost::system::error_code ec;
    co_await ex.wake.async_wait(net::redirect_error(net::use_awaitable, ec));
  };
  auto result_of = [](const Part& p, std::vector<TokenId> tokens) {
    ChoiceResult c;
    c.tokens = std::move(tokens);
    c.prompt_tokens = p.prompt_tokens;
    c.cached_tokens = p.cached;
    c.output_tokens = static_cast<uint32_t>(p.all.size());
    c.finished = p.finished && !p.aborted;
    c.aborted = p.aborted;
    return c;
  };

  if (!api.stream) {
    // As vLLM does: a client that closes the connection aborts its request (Cleanup, above).
    const http::DisconnectWatch watch = res.watch_disconnect([&ex] { ex.wake.cancel(); });
    for (;;) {
      bool done =
          std::all_of(ex.parts.begin(), ex.parts.end(), [](const auto& p) { return p->finished; });
      if (done) break;
      co_await wait();
      if (watch.fired()) co_return;
    }
    if (std::any_of(ex.parts.begin(), ex.parts.end(), [](const auto& p) { return p->aborted; })) {
      Response reply =
          Response::error(503, "request aborted: engine shutting down", "service_unavailable");
      (void)co_await res.send(std::move(reply));
      co_return;
    }
    std::vector<ChoiceResult> choices;
    for (auto& p : ex.parts) choices.push_back(result_of(*p, p->all));
    double e2e = to_seconds(Clock::real().now() - arrival);
    {
      Response reply = Response::json(200, render_response(api, rids, choices, e2e));
      (void)co_await res.send(std::move(reply));
    }
    co_return;
  }

  if (!(co_await res.start_sse()).ok()) co_return;
  for (;;) {
    bool all_written = true;
    bool wrote = false;
    for (size_t i = 0; i < ex.parts.size(); ++i) {
      Part& p = *ex.parts[i];
      if (p.final_written) continue;
      if (!p.pending.empty() || p.finished) {
        ChoiceResult c = result_of(p, std::move(p.pending));
        p.pending.clear();
        if (kind == ApiKind::kGenerate) append_token_text(c.tokens, &p.text_so_far);
        if (kind == ApiKind::kGenerate) c.tokens = p.all;  // SGLang streams cumulative ids
        std::string chunk = render_chunk(api, rids, i, c, !p.first_written, p.text_so_far);
        p.first_written = true;
        if (c.finished || c.aborted) p.final_written = true;
        wrote = true;
        if (!(co_await res.write_sse(chunk)).ok()) co_return;
      }
      if (!p.final_written) all_written = false;
    }
    if (all_written) break;
    if (!wrote) co_await wait();
  }
  if (api.include_usage && kind != ApiKind::kGenerate) {
    std::vector<ChoiceResult> choices;
    for (auto& p : ex.parts) choices.push_back(result_of(*p, {}));
    const std::string usage = render_usage_chunk(api, rids, choices);
    if (!(co_await res.write_sse(usage)).ok()) co_return;
  }
  if (!(co_await res.write_sse("[DONE]")).ok()) co_return;
  (void)co_await res.finish();
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

void Worker::on_step_done(Rank& r) {
  r.stepping = false;
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
      KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 1000, "reopen listener: {}", s.ToString());
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

// ---- read-only routes ----

Response Worker::health() const { return Response::text(200, ""); }

Response Worker::models() const {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("object", "list").key("data").begin_array();
  w.begin_object().member("id", options_.model).member("object", "model");
  w.member("created", int64_t{0}).member("owned_by", "kvgate-mock");
  w.member("root", options_.model).member("max_model_len", options_.engine.max_model_len);
  w.end_object().end_array().end_object();
  return Response::json(200, std::move(out));
}

Response Worker::load_report() const {
  std::string out;
  JsonWriter w(&out);
  uint64_t running = 0, waiting = 0, used = 0, blocks = 0, queued = 0;
  std::vector<EngineLoad> loads;
  for (const auto& r : ranks_) {
    loads.push_back(r->engine.load());
    const EngineLoad& l = loads.back();
    running += l.running;
    waiting += l.waiting;
    used += l.used_blocks;
    blocks += l.num_blocks;
    queued += l.queued_prefill_tokens;
  }
  w.begin_object().member("worker", options_.index);
  w.member("running", running).member("waiting", waiting);
  w.member("kv_usage", blocks ? double(used) / double(blocks) : 0.0);
  w.member("queued_prefill_tokens", queued);
  w.member("used_blocks", used).member("num_blocks", blocks);
  w.member("paused", paused_);
  w.key("ranks").begin_array();
  for (size_t i = 0; i < loads.size(); ++i) {
    const EngineLoad& l = loads[i];
    w.begin_object().member("dp_rank", i).member("running", l.running).member("waiting", l.waiting);
    w.member("kv_usage", l.kv_usage()).member("queued_prefill_tokens", l.queued_prefill_tokens);
    w.member("used_blocks", l.used_blocks).member("cached_blocks", l.cached_blocks);
    w.member("num_blocks", l.num_blocks).end_object();
  }
  w.end_array().end_object();
  return Response::json(200, std::move(out));
}

Response Worker::server_info() const {
  const EngineConfig& e = options_.engine;
  const bool sglang = hash_scheme_for(options_.wire) == HashScheme::kSglangSha256;
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  w.member("model_path", options_.model).member("served_model_name", options_.model);
  w.member("engine", sglang ? "sglang" : "vllm").member("version", "kvgate-mock");
  w.member("worker_index", options_.index).member("dp_size", options_.dp_size);
  w.member("page_size", e.block_size).member("block_size", e.block_size);
  w.member("num_gpu_blocks", e.num_blocks);
  w.member("max_total_num_tokens", uint64_t{e.num_blocks} * e.block_size);
  w.member("max_running_requests", e.max_num_seqs);
  w.member("max_num_batched_tokens", e.max_num_batched_tokens);
  w.member("context_length", e.max_model_len);
  w.member("enable_prefix_caching", e.enable_prefix_caching);
  w.member("tokenizer", "kvgate-test-tokenizer").member("vocab_size", e.vocab);
  w.member("kv_events_wire", events::wire_format_name(options_.wire));
  w.member("kv_events_hash", hash_scheme_name(e.hash_scheme));
  if (!sglang) w.member("prefix_caching_hash_algo", "sha256_cbor");
  w.member("router_hash_seed", e.router_hash_seed);
  w.member("kv_events_topic", options_.topic);
  w.member("kv_events_replay_shape",
           options_.replay_shape == ReplayShape::kWithTopic ? "topic" : "legacy");
  w.member("kv_events_buffer_steps", options_.replay_buffer_steps);
  // The engines' own config string, rank 0's endpoints (rank r adds its own offset).
  std::string config;
  JsonWriter cw(&config);
  cw.begin_object().member("publisher", "zmq").member("endpoint", options_.advertised[0].pub);
  if (!options_.advertised[0].replay.empty()) {
    cw.member("replay_endpoint", options_.advertised[0].replay);
  }
  cw.member("topic", options_.topic).member("buffer_steps", options_.replay_buffer_steps);
  cw.end_object();
  w.member("kv_events_config", config);
  w.key("kv_events_endpoints").begin_array();
  for (uint32_t r = 0; r < options_.dp_size; ++r) {
    const StreamEndpoints& ep = options_.advertised[r];
    w.begin_object().member("dp_rank", r).member("endpoint", ep.pub);
    w.key("replay_endpoint");
    if (ep.replay.empty()) {
      w.null();
    } else {
      w.value(ep.replay);
    }
    w.member("topic", options_.topic).end_object();
  }
  w.end_array();
  w.end_object();
  return Response::json(200, std::move(out));
}

Response Worker::metrics() {
  for (auto& rp : ranks_) {
    Rank& r = *rp;
    EngineLoad l = r.engine.load();
    r.running->Set(l.running);
    r.waiting->Set(l.waiting);
    r.kv_usage->Set(l.kv_usage());
    r.gpu_usage->Set(l.kv_usage());
    const EngineCounters& c = r.engine.counters();
    auto bump = [](metrics::Counter* m, uint64_t now, uint64_t& seen) {
      if (now > seen) m->Increment(double(now - seen));
      seen = now;
    };
    bump(r.queries, c.prefix_cache_queries, r.exported.prefix_cache_queries);
    bump(r.hits, c.prefix_cache_hits, r.exported.prefix_cache_hits);
    bump(r.preemptions, c.preemptions, r.exported.preemptions);
    bump(r.prompt_tokens, c.prompt_tokens, r.exported.prompt_tokens);
    bump(r.generation_tokens, c.generation_tokens, r.exported.generation_tokens);
    bump(r.success, c.finished_requests, r.exported.finished_requests);
    StreamStats s = hub_.stats(r.stream);
    bump(r.batches_sent, s.sent, r.exported_sent);
    bump(r.batches_dropped, s.dropped, r.exported_dropped);
  }
  return Response::text(200, metrics::text_exposition(*registry_),
                        "text/plain; version=0.0.4; charset=utf-8");
}

// ---- admin ----

Response Worker::truth() const {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("worker", options_.index);
  w.member("block_size", options_.engine.block_size);
  w.member("hash_scheme", hash_scheme_name(options_.engine.hash_scheme));
  w.member("router_hash_seed", options_.engine.router_hash_seed);
  w.key("ranks").begin_array();
  for (const auto& r : ranks_) {
    StreamStats s = hub_.stats(r->stream);
    w.begin_object().member("dp_rank", r->index);
    w.member("next_seq", r->next_seq).member("step_in_flight", r->stepping);
    w.member("batches_sent", s.sent).member("batches_dropped", s.dropped);
    w.member("publisher_restarts", r->restarts);
    w.key("tiers").begin_object().key("GPU").begin_array();
    for (const ResidentBlock& b : r->engine.truth()) {
      w.begin_object().member("engine_hash", b.engine_hash);
      w.key("parent_hash");
      if (b.parent) {
        w.value(*b.parent);
      } else {
        w.null();
      }
      w.member("local_hash", b.local_hash).member("seq_hash", b.seq_hash);
      w.member("copies", b.copies).member("refs", b.refs).end_object();
    }
    w.end_array().end_object().end_object();
  }
  w.end_array().end_object();
  return Response::json(200, std::move(out));
}

Response Worker::requests(const http::Request& req) const {
  uint64_t since = 0;
  size_t limit = 10'000;
  if (auto v = req.query_param("since"))
    since = std::strtoull(std::string(*v).c_str(), nullptr, 10);
  if (auto v = req.query_param("limit"))
    limit = std::strtoull(std::string(*v).c_str(), nullptr, 10);
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("worker", options_.index).key("requests").begin_array();
  size_t n = 0;
  uint64_t last = since;
  for (const Record& r : records_) {
    if (r.seq <= since) continue;
    if (n++ >= limit) break;
    last = r.seq;
    w.begin_object().member("seq", r.seq).member("id", r.id).member("worker", options_.index);
    w.member("dp_rank", r.rank).member("api", r.api).member("status", r.status);
    w.member("arrival", r.arrival).member("finish", r.finish);
    w.key("ttft_s");
    if (r.ttft) {
      w.value(*r.ttft);
    } else {
      w.null();
    }
    w.member("e2e_s", r.e2e).member("prompt_tokens", r.prompt_tokens);
    w.member("cached_tokens", r.cached_tokens).member("oracle_tokens", r.oracle_tokens);
    w.member("output_tokens", r.output_tokens);
    w.member("preemptions", r.preemptions).end_object();
  }
  w.end_array().member("last_seq", last).end_object();
  return Response::json(200, std::move(out));
}

Response Worker::faults() const {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("paused", paused_);
  w.member("fail_next", fail_next_).member("fail_ratio", fail_ratio_);
  w.member("fail_status", fail_status_).member("injected_failures", injected_failures_);
  w.member("listener_open", server_->listening());
  w.key("ranks").begin_array();
  for (const auto& r : ranks_) {
    w.begin_object().member("dp_rank", r->index).member("drop_next", r->drop_next);
    w.member("publish_delay_ms",
             std::chrono::duration_cast<std::chrono::milliseconds>(r->publish_delay).count());
    w.member("next_seq", r->next_seq).member("publisher_restarts", r->restarts).end_object();
  }
  w.end_array().end_object();
  return Response::json(200, std::move(out));
}

net::awaitable<void> Worker::serve_admin(const http::Request& req, http::Responder& res) {
  const std::string_view path = req.path();
  if (req.method() == http::Verb::get) {
    if (path == "/admin/truth") {
      Response reply = truth();
      (void)co_await res.send(std::move(reply));
    } else if (path == "/admin/requests") {
      Response reply = requests(req);
      (void)co_await res.send(std::move(reply));
    } else if (path == "/admin/faults") {
      Response reply = faults();
      (void)co_await res.send(std::move(reply));
    } else {
      Response reply = Response::error(404, "no such admin route", "not_found_error");
      (void)co_await res.send(std::move(reply));
    }
    co_return;
  }
  simdjson::dom::object body;
  if (!admin_body(json_, req.body(), &body)) {
    Response reply = Response::error(400, "admin body must be a JSON object");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  // Rank selection shared by the per-rank hooks: "rank" absent means every rank.
  std::optional<int64_t> rank = int_field(body, "rank");
  if (rank && (*rank < 0 || *rank >= options_.dp_size)) {
    Response reply = Response::error(400, "rank out of range");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  auto each_rank = [&](auto&& fn) {
    for (auto& r : ranks_) {
      if (!rank || *rank == r->index) fn(*r);
    }
  };

  if (path == "/admin/fault/drop_batches") {
    const int64_t count = int_field(body, "count").value_or(1);
    each_rank([&](Rank& r) { r.drop_next += static_cast<uint64_t>(std::max<int64_t>(count, 0)); });
  } else if (path == "/admin/fault/delay_publisher") {
    const int64_t ms = int_field(body, "delay_ms").value_or(0);
    each_rank(
        [&](Rank& r) { r.publish_delay = std::chrono::milliseconds(std::max<int64_t>(ms, 0)); });
  } else if (path == "/admin/fault/restart_publisher") {
    const bool clear = bool_field(body, "clear_cache").value_or(false);
    each_rank([&](Rank& r) {
      r.deferred_restart = clear || r.deferred_restart.value_or(false);
      kick(r);  // applies it now unless a step is in flight (then when it ends)
    });
  } else if (path == "/admin/clear_cache") {
    each_rank([&](Rank& r) {
      r.deferred_clear = true;
      kick(r);
    });
  } else if (path == "/admin/fault/pause") {
    const bool paused = bool_field(body, "paused").value_or(true);
    pause_timer_.cancel();
    set_paused(paused);
    if (auto ms = int_field(body, "duration_ms"); paused && ms && *ms > 0) {
      pause_timer_.expires_after(std::chrono::milliseconds(*ms));
      pause_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec && !stopping_) set_paused(false);
      });
    }
  } else if (path == "/admin/fault/fail_requests") {
    fail_next_ = static_cast<uint64_t>(std::max<int64_t>(int_field(body, "count").value_or(0), 0));
    fail_ratio_ = std::clamp(num_field(body, "ratio").value_or(0.0), 0.0, 1.0);
    const int64_t status = int_field(body, "status").value_or(500);
    if (status < 400 || status > 599) {
      Response reply = Response::error(400, "status must be a 4xx or 5xx code");
      (void)co_await res.send(std::move(reply));
      co_return;
    }
    fail_status_ = static_cast<unsigned>(status);
  } else if (path == "/admin/fault/close_listener") {
    const int64_t ms = std::max<int64_t>(int_field(body, "duration_ms").value_or(1000), 0);
    // Answer first: closing drops this connection too.
    {
      Response reply = ok_json();
      (void)co_await res.send(std::move(reply));
    }
    server_->close_listener(/*drop_connections=*/true);
    reopen_listener_after(std::chrono::milliseconds(ms));
    co_return;
  } else if (path == "/admin/fault/reset") {
    fail_next_ = 0;
    fail_ratio_ = 0;
    pause_timer_.cancel();
    set_paused(false);
    for (auto& r : ranks_) {
      r->drop_next = 0;
      r->publish_delay = Duration(0);
    }
  } else {
    Response reply = Response::error(404, "no such admin route", "not_found_error");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  {
    Response reply = ok_json();
    (void)co_await res.send(std::move(reply));
  }
}

}  // namespace kvgate::mock::detail
