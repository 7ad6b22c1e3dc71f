// Worker: the inference endpoints (completions, chat, SGLang generate), streamed or not
// (detail/worker.h).
#include "mock/detail/worker.h"
#include "mock/detail/worker_parts.h"

#include <algorithm>

#include "boost/asio/redirect_error.hpp"
#include "boost/asio/use_awaitable.hpp"

namespace kvgate::mock::detail {
namespace net = boost::asio;
using http::Response;

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
  if (p.owner != nullptr) r.request_id = p.owner->request_id;
  r.rank = p.rank;
  r.api = p.kind == ApiKind::kChat        ? "chat"
          : p.kind == ApiKind::kGenerate  ? "generate"
          : p.kind == ApiKind::kResponses ? "responses"
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

std::optional<Response> Worker::refuse_non_json(const http::Request& req) const {
  // FastAPI (vLLM's and SGLang's servers) reads a body as JSON only under a JSON content type:
  // curl -d sends application/x-www-form-urlencoded, and the engines answer 422.
  const std::string_view ct = req.header("content-type");
  if (ct.empty() || ct.find("json") != std::string_view::npos) return std::nullopt;
  return Response::error(422,
                         "Input should be a valid dictionary or object: the body must be sent as "
                         "application/json, not " +
                             std::string(ct));
}

net::awaitable<void> Worker::serve_pooling(PoolingKind kind, const http::Request& req,
                                           http::Responder& res) {
  remember_body(req);
  if (auto refusal = refuse_non_json(req)) {
    (void)co_await res.send(std::move(*refusal));
    co_return;
  }
  if (auto status = injected_failure()) {
    Response reply = Response::error(*status, "injected failure (mock fault hook)",
                                     http::error_type_for(*status));
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  const char* prefix = kind == PoolingKind::kEmbeddings ? "embd-"
                       : kind == PoolingKind::kRerank   ? "rerank-"
                                                        : "score-";
  const ResponseIds ids{prefix + std::string("w") + std::to_string(options_.index) + "-" +
                            std::to_string(next_request_++),
                        static_cast<int64_t>(to_unix_seconds(Clock::real().wall())),
                        options_.model};
  auto body = render_pooling(kind, req.body(), *tokenizer_, json_, ids);
  Response reply = body.ok() ? Response::json(200, std::move(*body))
                             : Response::error(400, std::string(body.status().message()));
  (void)co_await res.send(std::move(reply));
}

namespace {

// Until the step loop wakes `wake` (tokens, a finish) or a disconnect watch cancels it.
net::awaitable<void> wait_for_wake(net::steady_timer& wake) {
  wake.expires_at(MonoTime::max());
  boost::system::error_code ec;
  co_await wake.async_wait(net::redirect_error(net::use_awaitable, ec));
}

}  // namespace

ChoiceResult Worker::choice_result(const Part& p, std::vector<TokenId> tokens) {
  ChoiceResult c;
  c.tokens = std::move(tokens);
  c.prompt_tokens = p.prompt_tokens;
  c.cached_tokens = p.cached;
  c.output_tokens = static_cast<uint32_t>(p.all.size());
  c.finished = p.finished && !p.aborted;
  c.aborted = p.aborted;
  return c;
}

std::optional<uint32_t> Worker::wanted_rank(const ApiRequest& api, const http::Request& req) {
  std::optional<uint32_t> wanted = api.dp_rank;
  if (auto h = req.header("X-Data-Parallel-Rank"); !h.empty()) {
    wanted = static_cast<uint32_t>(std::strtoul(std::string(h).c_str(), nullptr, 10));
  }
  return wanted;
}

net::awaitable<void> Worker::serve_inference(ApiKind kind, const http::Request& req,
                                             http::Responder& res) {
  const MonoTime arrival = Clock::real().now();
  const WallTime arrival_wall = Clock::real().wall();
  remember_body(req);
  if (auto refusal = refuse_non_json(req)) {
    (void)co_await res.send(std::move(*refusal));
    co_return;
  }
  auto parsed = parse_api_request(kind, req.body(), *tokenizer_, json_);
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
  const std::optional<uint32_t> wanted = wanted_rank(api, req);
  if (wanted && *wanted >= options_.dp_size) {
    Response reply = Response::error(400, "data_parallel_rank out of range");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  const uint32_t rank = pick_rank(wanted);
  Rank& r = *ranks_[rank];

  Exchange ex(res.get_executor());
  ex.request_id.assign(req.header("x-request-id").substr(0, 128));
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
      if (ex->room) w->rooms_->abandon(*ex->room);  // a no-op once the room was ready
    }
  } cleanup{this, &ex};
  if (std::optional<Response> refusal = co_await prepare_pd(api, r, ex)) {
    (void)co_await res.send(std::move(*refusal));
    co_return;
  }

  const std::string_view prefix = kind == ApiKind::kChat         ? "chatcmpl-"
                                  : kind == ApiKind::kCompletion ? "cmpl-"
                                  : kind == ApiKind::kResponses  ? "resp_"
                                                                 : "";
  const std::string base_id = std::string(prefix) + "w" + std::to_string(options_.index) + "-" +
                              std::to_string(next_request_++);
  if (Status s = add_parts(kind, api, rank, base_id, arrival, arrival_wall, ex); !s.ok()) {
    Response reply = Response::error(400, std::string(s.message()));
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  kick(r);

  const ResponseIds rids{base_id, static_cast<int64_t>(to_unix_seconds(arrival_wall)),
                         options_.model};
  if (api.stream) {
    co_await answer_stream(kind, api, rids, ex, res);
  } else {
    co_await answer_whole(api, rids, arrival, ex, res);
  }
}

Status Worker::add_parts(ApiKind kind, ApiRequest& api, uint32_t rank, const std::string& base_id,
                         MonoTime arrival, WallTime arrival_wall, Exchange& ex) {
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
    if (i == 0 && ex.room) {
      p->room = ex.room;
      p->room_prompt = api.prompts[0];
    }
    auto id = ranks_[rank]->engine.add(std::move(api.prompts[i]), api.max_tokens, arrival);
    if (!id.ok()) return id.status();
    p->engine_id = *id;
    p->registered = true;
    parts_[part_key(rank, *id)] = p.get();
    ex.parts.push_back(std::move(p));
  }
  return absl::OkStatus();
}

net::awaitable<void> Worker::answer_whole(const ApiRequest& api, const ResponseIds& rids,
                                          MonoTime arrival, Exchange& ex, http::Responder& res) {
  // As vLLM does: a client that closes the connection aborts its request (serve_inference's
  // Cleanup).
  const http::DisconnectWatch watch = res.watch_disconnect([&ex] { ex.wake.cancel(); });
  while (
      !std::all_of(ex.parts.begin(), ex.parts.end(), [](const auto& p) { return p->finished; })) {
    co_await wait_for_wake(ex.wake);
    if (watch.fired()) co_return;
  }
  if (std::any_of(ex.parts.begin(), ex.parts.end(), [](const auto& p) { return p->aborted; })) {
    Response reply =
        Response::error(503, "request aborted: engine shutting down", "service_unavailable");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  std::vector<ChoiceResult> choices;
  for (auto& p : ex.parts) choices.push_back(choice_result(*p, p->all));
  const double e2e = to_seconds(Clock::real().now() - arrival);
  // Issued only now: the decode learns of the transfer from this answer alone, and a request
  // that ended otherwise leaves nothing to expire.
  const std::string kv_params = ex.remote_decode ? issue_transfer(ex) : std::string();
  Response reply = Response::json(200, render_response(api, rids, choices, e2e, kv_params));
  (void)co_await res.send(std::move(reply));
}

net::awaitable<void> Worker::answer_stream(ApiKind kind, const ApiRequest& api,
                                           const ResponseIds& rids, Exchange& ex,
                                           http::Responder& res) {
  if (!(co_await res.start_sse()).ok()) co_return;
  for (;;) {
    const StreamStep step = co_await write_ready_chunks(kind, api, rids, ex, res);
    if (step == StreamStep::kClientGone) co_return;
    if (step == StreamStep::kAllWritten) break;
    if (step == StreamStep::kNothingNew) {
      // As vLLM's server does (Starlette listens for the disconnect beside the stream): a client
      // that closes the connection while the engine works (a long prefill, a queue) aborts its
      // request at once, not at the next token it would have been sent.
      const http::DisconnectWatch watch = res.watch_disconnect([&ex] { ex.wake.cancel(); });
      co_await wait_for_wake(ex.wake);
      if (watch.fired()) co_return;
    }
  }
  if (kind == ApiKind::kResponses) {  // a Responses stream ends with response.completed
    (void)co_await res.finish();
    co_return;
  }
  if (api.include_usage && kind != ApiKind::kGenerate) {
    std::vector<ChoiceResult> choices;
    for (auto& p : ex.parts) choices.push_back(choice_result(*p, {}));
    const std::string usage = render_usage_chunk(api, rids, choices);
    if (!(co_await res.write_sse(usage)).ok()) co_return;
  }
  if (!(co_await res.write_sse("[DONE]")).ok()) co_return;
  (void)co_await res.finish();
}

// Writes what each part produced since the last pass (and its last chunk once it finished).
net::awaitable<Worker::StreamStep> Worker::write_ready_chunks(ApiKind kind, const ApiRequest& api,
                                                              const ResponseIds& rids, Exchange& ex,
                                                              http::Responder& res) {
  bool all_written = true;
  bool wrote = false;
  for (size_t i = 0; i < ex.parts.size(); ++i) {
    Part& p = *ex.parts[i];
    if (p.final_written) continue;
    if (!p.pending.empty() || p.finished) {
      ChoiceResult c = choice_result(p, std::move(p.pending));
      p.pending.clear();
      if (kind == ApiKind::kGenerate) append_token_text(c.tokens, &p.text_so_far);
      if (kind == ApiKind::kGenerate) c.tokens = p.all;  // SGLang streams cumulative ids
      if (kind == ApiKind::kResponses && !p.first_written) {
        for (const std::string& event : render_response_opening(rids, &p.sequence)) {
          if (!(co_await res.write_sse(event)).ok()) co_return StreamStep::kClientGone;
        }
      }
      std::string chunk = kind == ApiKind::kResponses
                              ? render_response_delta(rids, c, &p.sequence)
                              : render_chunk(api, rids, i, c, !p.first_written, p.text_so_far);
      p.first_written = true;
      if (c.finished || c.aborted) p.final_written = true;
      wrote = true;
      if (!(co_await res.write_sse(chunk)).ok()) co_return StreamStep::kClientGone;
      if (kind == ApiKind::kResponses && p.final_written) {
        const ChoiceResult whole = choice_result(p, p.all);
        for (const std::string& event : render_response_closing(rids, whole, &p.sequence)) {
          if (!(co_await res.write_sse(event)).ok()) co_return StreamStep::kClientGone;
        }
      }
    }
    if (!p.final_written) all_written = false;
  }
  co_return all_written ? StreamStep::kAllWritten
  : wrote               ? StreamStep::kWrote
                        : StreamStep::kNothingNew;
}

}  // namespace kvgate::mock::detail
