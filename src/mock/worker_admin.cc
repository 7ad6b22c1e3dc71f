// Worker: the admin API (engine truth, request records, fault hooks) (detail/worker.h).
#include "mock/detail/worker.h"
#include "mock/detail/worker_parts.h"

#include <algorithm>

#include "kvgate/core/json_writer.h"

namespace kvgate::mock::detail {
namespace net = boost::asio;
using http::Response;

namespace {

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
    const std::vector<ResidentBlock> blocks = r->engine.truth();
    w.key("tiers").begin_object().key("GPU").begin_array();
    for (const ResidentBlock& b : blocks) {
      if (b.copies == 0) continue;  // on the host tier only
      w.begin_object().member("engine_hash", b.engine_hash).member("parent_hash", b.parent);
      w.member("local_hash", b.local_hash).member("seq_hash", b.seq_hash);
      w.member("copies", b.copies).member("refs", b.refs).end_object();
    }
    w.end_array();
    if (options_.engine.host_blocks > 0) {
      w.key("CPU").begin_array();
      for (const ResidentBlock& b : blocks) {
        if (!b.on_host) continue;
        w.begin_object().member("engine_hash", b.engine_hash).member("parent_hash", b.parent);
        w.member("local_hash", b.local_hash).member("seq_hash", b.seq_hash).end_object();
      }
      w.end_array();
    }
    w.end_object().end_object();
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
    if (!r.request_id.empty()) w.member("request_id", r.request_id);
    w.member("dp_rank", r.rank).member("api", r.api).member("status", r.status);
    w.member("arrival", r.arrival).member("finish", r.finish);
    w.member("ttft_s", r.ttft);
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

void Worker::remember_body(const http::Request& req) {
  constexpr size_t kLongest = 64 << 10;  // a huge prompt is kept cut
  bodies_.push_back({std::string(req.path()), std::string(req.header("x-request-id")),
                     std::string(req.body().substr(0, kLongest))});
  while (bodies_.size() > kKeptBodies) bodies_.pop_front();
}

Response Worker::bodies() const {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().key("bodies").begin_array();
  for (const auto& [path, request_id, body] : bodies_) {
    w.begin_object().member("path", path).member("request_id", request_id);
    w.member("body", body).end_object();
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
    } else if (path == "/admin/bodies") {
      Response reply = bodies();
      (void)co_await res.send(std::move(reply));
    } else if (path == "/admin/pd") {
      Response reply = pd_report();
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
