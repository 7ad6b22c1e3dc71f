#include "replay/runner.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/core/clock.h"
#include "kvgate/http/client.h"
#include "kvgate/http/io_pool.h"
#include "kvgate/http/sse.h"
#include "replay/stream.h"

namespace kvgate::replay {
namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kWorkerHeader = "x-kvgate-worker";
constexpr std::string_view kRankHeader = "x-kvgate-dp-rank";
constexpr std::string_view kPrefillWorkerHeader = "x-kvgate-prefill-worker";

// This process's request ids: a random run tag and the row's position, so the workers' records
// of one run never match another's.
std::string request_id_for(size_t i) {
  static const std::string tag = [] {
    std::random_device rd;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    return std::string(buf);
  }();
  return "replay-" + tag + "-" + std::to_string(i);
}
constexpr size_t kErrorBodyBytes = 4096;

std::string error_kind_of(const Status& s) {
  return absl::IsDeadlineExceeded(s) ? "timeout" : "transport";
}

}  // namespace

uint64_t max_tokens_for(uint64_t output_length, uint64_t cap) {
  uint64_t n = output_length;
  if (cap != 0) n = std::min(n, cap);
  return std::max<uint64_t>(n, 1);
}

// The state of one run(): shared by the scheduler and every request coroutine.
class Runner::Run {
 public:
  Run(const Runner& r, const RunInput& in, std::vector<Endpoint> targets, Counters* counters)
      : r_(r),
        in_(in),
        targets_(std::move(targets)),
        counters_(counters),
        pool_(r.options_.threads),
        idle_(pool_.size() * targets_.size()),
        records_(in.rows.size()),
        outstanding_(in.rows.size()) {}

  std::vector<RequestRecord> go(double* wall_s) {
    pool_.start();
    start_ = Clock::now();
    if (!records_.empty()) {
      net::co_spawn(pool_.context(0), schedule(), net::detached);
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return finished_; });
    }
    *wall_s = to_seconds(Clock::now() - start_);
    pool_.stop();
    idle_.clear();
    return std::move(records_);
  }

 private:
  net::awaitable<void> schedule() {
    net::steady_timer timer(pool_.context(0));
    const auto& s = in_.schedule;
    for (size_t k = 0; k < s.order.size(); ++k) {
      const size_t i = s.order[k];
      const auto at = due_at(start_, s.due[i]);
      if (at > Clock::now()) {
        timer.expires_at(at);
        boost::system::error_code ec;
        co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
      }
      const size_t ctx = k % pool_.size();
      net::co_spawn(pool_.context(ctx), request(i, ctx), net::detached);
    }
  }

  // The chat request of `row`, and the ids the engines compute for it (empty if the tokenizer
  // cannot render it).
  void build_chat(const corpus::TraceRow& row, const RequestRecord& rec, http::ClientRequest* req,
                  std::vector<TokenId>* tokens) const {
    thread_local std::string messages;
    chat_messages(row, r_.prompts_.options().seed, r_.options_.chat_words_per_id, &messages);
    req->target = "/v1/chat/completions";
    chat_body(r_.options_.model, messages, rec.max_tokens, &req->body);
    tokens->clear();
    if (row.hash_ids.empty()) return;
    const tokenizer::PromptTokenizer& tok = *r_.options_.chat_tokenizer;
    auto text = tok.render_chat({.messages_json = messages});
    if (!text.ok() || !tok.encode_chat(*text, static_cast<size_t>(-1), tokens).ok()) {
      tokens->clear();
    }
  }

  net::awaitable<void> request(size_t i, size_t ctx) {
    RequestRecord& rec = records_[i];
    const corpus::TraceRow& row = *in_.rows[i];
    rec.row = in_.row_numbers[i];
    rec.scheduled_s = std::chrono::duration<double>(in_.schedule.due[i]).count();
    rec.max_tokens = max_tokens_for(row.output_length, r_.options_.max_output_tokens);
    std::vector<WorkerTokens> per_worker;
    http::ClientRequest req;
    req.method = http::Verb::post;
    req.target = "/v1/completions";
    rec.request_id = request_id_for(i);
    req.headers.emplace_back("x-request-id", rec.request_id);
    {
      // Used only before the first co_await: other coroutines of this thread reuse it after.
      thread_local std::vector<TokenId> tokens;
      if (r_.options_.chat_tokenizer != nullptr) {
        build_chat(row, rec, &req, &tokens);
      } else {
        r_.prompts_.build(row, &tokens);
        completion_body(r_.options_.model, tokens, rec.max_tokens, &req.body);
      }
      rec.prompt_tokens = tokens.size();
      if (r_.oracle_ != nullptr && !tokens.empty()) {
        rec.oracle_tokens = r_.oracle_->lookup(tokens, &per_worker);
        rec.oracle_source = OracleSource::kEvents;
      }
    }
    const auto sent = Clock::now();
    rec.actual_s = to_seconds(sent - start_);
    counters_->sent.fetch_add(1, std::memory_order_relaxed);
    if (rec.prompt_tokens == 0) {
      rec.error_kind = "empty_prompt";
      rec.error = "the row has no hash ids";
    } else {
      co_await exchange(rec, req, ctx, i % targets_.size(), sent);
      // The figure of the holder the request ran on (a pair's prefill): its rank's when the
      // gateway said which, else the worker's best rank's. A request a decode worker computed
      // alone ran on no worker the oracle follows, and has none.
      const std::string& ran_on = rec.prefill_worker.empty() ? rec.worker : rec.prefill_worker;
      if (rec.oracle_tokens && !rec.worker.empty() && r_.oracle_->follows(ran_on)) {
        uint32_t routed = 0;
        for (const WorkerTokens& w : per_worker) {
          if (r_.oracle_->worker_url(w.worker) != ran_on) continue;
          if (rec.dp_rank && rec.prefill_worker.empty() && w.rank != *rec.dp_rank) continue;
          routed = std::max(routed, w.tokens);
        }
        rec.routed_oracle_tokens = routed;
      }
    }
    (rec.answered ? counters_->answered : counters_->failed)
        .fetch_add(1, std::memory_order_relaxed);
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> l(mu_);
      finished_ = true;
      cv_.notify_all();
    }
  }

  // Sends to targets_[t] on a connection of this context's.
  net::awaitable<void> exchange(RequestRecord& rec, const http::ClientRequest& req, size_t ctx,
                                size_t t, Clock::time_point sent) {
    auto& idle = idle_[ctx * targets_.size() + t];
    const Endpoint& target = targets_[t];
    const http::ClientOptions copts{.connect_timeout = r_.options_.connect_timeout,
                                    .request_timeout = r_.options_.request_timeout,
                                    .idle_timeout = r_.options_.idle_timeout};
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::unique_ptr<http::Connection> conn;
      // Servers close keep-alive connections idle past their timeout: skip those.
      while (!conn && !idle.empty()) {
        conn = std::move(idle.back());
        idle.pop_back();
        if (!conn->idle_and_open()) conn.reset();
      }
      const bool reused = conn != nullptr;
      if (!reused) {
        auto c = co_await http::Connection::connect(target.host, target.port, copts);
        if (!c.ok()) {
          rec.error_kind = "connect";
          rec.error = std::string(message_of(c.status()));
          co_return;
        }
        conn = std::move(*c);
      }
      auto head = co_await conn->start_streaming(req);
      if (!head.ok()) {
        // A pooled connection the server closed while idle: once more on a fresh one.
        if (reused && conn->closed_by_peer()) continue;
        rec.error_kind = error_kind_of(head.status());
        rec.error = std::string(message_of(head.status()));
        co_return;
      }
      rec.status = head->status;
      const std::string_view worker = head->header(kWorkerHeader);
      rec.worker = worker.empty() ? r_.options_.target_url : std::string(worker);
      rec.prefill_worker = std::string(head->header(kPrefillWorkerHeader));
      if (const std::string_view rank = head->header(kRankHeader); !rank.empty()) {
        rec.dp_rank = static_cast<uint32_t>(std::strtoul(std::string(rank).c_str(), nullptr, 10));
      }
      if (head->status != 200) {
        std::string body;
        for (;;) {
          auto piece = co_await conn->next_piece();
          if (!piece.ok() || piece->empty()) break;
          if (body.size() < kErrorBodyBytes) body.append(*piece);
        }
        rec.error_kind = "http_" + std::to_string(head->status);
        rec.error = body.substr(0, kErrorBodyBytes);
        if (conn->reusable()) idle.push_back(std::move(conn));
        co_return;
      }
      http::SseParser sse;
      StreamReader reader(&rec, sent);
      Clock::time_point now;
      const http::SseParser::OnData on_data = [&](std::string_view d) { reader.on_event(d, now); };
      for (;;) {
        auto piece = co_await conn->next_piece();
        now = Clock::now();
        if (!piece.ok()) {
          rec.error_kind = error_kind_of(piece.status());
          rec.error = "mid-stream: " + std::string(message_of(piece.status()));
          break;
        }
        if (piece->empty()) break;
        sse.feed(*piece, on_data);
      }
      reader.finish(now);
      if (rec.error_kind.empty() && !reader.errored()) {
        if (reader.done()) {
          rec.answered = true;
        } else {
          rec.error_kind = "incomplete";
          rec.error = "the stream ended without [DONE]";
        }
      }
      if (rec.answered && conn->reusable()) idle.push_back(std::move(conn));
      co_return;
    }
    rec.error_kind = "transport";
    rec.error = "the server closed two connections before answering";
  }

  const Runner& r_;
  const RunInput& in_;
  const std::vector<Endpoint> targets_;  // the target, then its replicas
  Counters* counters_;
  http::IoPool pool_;
  // Idle keep-alive connections per (context, target): touched only by that context's thread.
  std::vector<std::vector<std::unique_ptr<http::Connection>>> idle_;
  std::vector<RequestRecord> records_;
  std::atomic<size_t> outstanding_;
  Clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
};

Result<std::vector<RequestRecord>> Runner::run(const RunInput& input, Counters* counters) {
  if (input.rows.size() != input.row_numbers.size() ||
      input.rows.size() != input.schedule.due.size()) {
    return absl::InvalidArgumentError("replay: rows, row numbers and schedule differ in size");
  }
  std::vector<Endpoint> targets;
  for (const std::string* url = &options_.target_url;;) {
    auto target = parse_http_url(*url);
    if (!target.ok()) return target.status();
    targets.push_back(std::move(*target));
    if (targets.size() > options_.replica_urls.size()) break;
    url = &options_.replica_urls[targets.size() - 1];
  }
  Run run(*this, input, std::move(targets), counters);
  return run.go(&wall_s_);
}

}  // namespace kvgate::replay
