// Worker: prefill/decode disaggregation as SGLang runs it (detail/pd.h, docs/mock.md). A prefill
// keeps each request's room and serves it on its bootstrap server; a decode pulls the room from
// the prefill its request names, receives the blocks it lacks, then generates as usual.
#include <charconv>

#include "boost/asio/redirect_error.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/http/client.h"
#include "mock/detail/worker.h"
#include "mock/detail/worker_parts.h"

namespace kvgate::mock::detail {
namespace net = boost::asio;
using http::Response;

namespace {

// The longest long poll a bootstrap server holds, whatever wait_ms asks: bounds its handlers.
constexpr std::chrono::milliseconds kMaxRoomWait{600'000};
// A bootstrap server answers a poll when its wait ends; the decode's client allows it this much
// longer to say so before calling it a timeout of its own.
constexpr std::chrono::milliseconds kPollSlack{2'000};

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string room_json(uint64_t id, const RoomTable::Room& room, std::string_view engine,
                      uint32_t block_size) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("room", id).member("engine", engine).member("dp_rank", room.dp_rank);
  w.member("block_size", block_size).member("num_blocks", room.blocks);
  w.member("prompt_tokens", static_cast<uint64_t>(room.prompt.size()));
  w.key("token_ids").begin_array();
  for (TokenId t : room.prompt) w.value(t);
  w.end_array().end_object();
  return out;
}

// What a decode learned from a bootstrap server.
struct Pull {
  std::optional<PdFailure> failure;
  std::string message;
  std::vector<TokenId> prompt;
  uint32_t blocks = 0;
  uint32_t block_size = 0;
};

Pull failed(PdFailure reason, std::string message) {
  Pull p;
  p.failure = reason;
  p.message = std::move(message);
  return p;
}

Pull read_room(std::string_view body, simdjson::dom::parser& parser) {
  simdjson::dom::element doc;
  simdjson::dom::array ids;
  uint64_t blocks = 0, block_size = 0;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS ||
      doc["num_blocks"].get(blocks) != simdjson::SUCCESS ||
      doc["block_size"].get(block_size) != simdjson::SUCCESS ||
      doc["token_ids"].get(ids) != simdjson::SUCCESS) {
    return failed(PdFailure::kBadAnswer,
                  "the bootstrap server's room is not a room: " + std::string(body.substr(0, 200)));
  }
  Pull p;
  p.blocks = static_cast<uint32_t>(blocks);
  p.block_size = static_cast<uint32_t>(block_size);
  for (simdjson::dom::element t : ids) {
    uint64_t v = 0;
    if (t.get(v) != simdjson::SUCCESS) return failed(PdFailure::kBadAnswer, "room token ids");
    p.prompt.push_back(static_cast<TokenId>(v));
  }
  return p;
}

// GET /room/<room>?wait_ms=<left> from the prefill's bootstrap server, answered by `deadline`.
// `pulls` holds the connection while it waits, so a shutdown can close it.
net::awaitable<Pull> pull_room(const std::string& host, uint16_t port, uint64_t room,
                               MonoTime deadline, simdjson::dom::parser& parser,
                               absl::flat_hash_set<http::Connection*>& pulls) {
  const std::string where = host + ":" + std::to_string(port);
  const std::string name = "room " + std::to_string(room) + " at " + where;
  // Rounded up: the bootstrap server must not give up before this decode does.
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::real().now());
  left = std::max(left, std::chrono::milliseconds(1));
  http::ClientOptions co;
  co.connect_timeout = left;
  co.request_timeout = left + kPollSlack;
  co.idle_timeout = left + kPollSlack;
  auto conn = co_await http::Connection::connect(host, port, co);
  if (!conn.ok()) {
    co_return failed(PdFailure::kUnreachable, "bootstrap server " + where + " unreachable: " +
                                                  std::string(conn.status().message()));
  }
  http::ClientRequest req;
  req.target = "/room/" + std::to_string(room) + "?wait_ms=" + std::to_string(left.count());
  pulls.insert(conn->get());
  auto res = co_await (*conn)->send(req);
  pulls.erase(conn->get());
  if (!res.ok()) {
    if (Clock::real().now() >= deadline) {
      co_return failed(PdFailure::kTimeout, name + " not answered within the transfer timeout");
    }
    co_return failed(PdFailure::kUnreachable,
                     "bootstrap server " + where + ": " + std::string(res.status().message()));
  }
  switch (res->status) {
    case 200:
      co_return read_room(res->body, parser);
    case 404:
      co_return failed(PdFailure::kUnknownRoom,
                       name + " is unknown: that prefill never received the room (wrong pairing)");
    case 410:
      co_return failed(PdFailure::kRoomGone, name + " is gone: " + res->body);
    case 504:
      co_return failed(PdFailure::kTimeout, name + " not ready within the transfer timeout");
    default:
      co_return failed(PdFailure::kBadAnswer, name + ": status " + std::to_string(res->status));
  }
}

unsigned failure_status(PdFailure reason) {
  switch (reason) {
    case PdFailure::kTimeout:
      return 504;
    case PdFailure::kPoolFull:
      return 503;
    default:
      return 502;
  }
}

}  // namespace

Duration Worker::scaled(Duration d) const {
  return Duration(static_cast<int64_t>(double(d.count()) / options_.engine.timing.speedup));
}

void Worker::register_bootstrap() {
  if (options_.pd.role != PdRole::kRegular) pd_stats_.register_metrics(*registry_, options_.model);
  if (options_.pd.role != PdRole::kPrefill) return;
  rooms_ = std::make_unique<RoomTable>(ctx_, pd_stats_);
  http::ServerOptions so = options_.http;  // the worker's context, host and timeouts
  so.port = options_.bootstrap_port;
  // Plain HTTP, as SGLang's bootstrap server is: decodes pull without a client certificate store.
  so.tls_cert_path.clear();
  so.tls_key_path.clear();
  so.server_name = "kvgate-mock-bootstrap";
  bootstrap_ = std::make_unique<http::Server>(pool_, so);
  bootstrap_->route_prefix(
      http::Verb::get, "/room/",
      [this](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
        co_await serve_room(req, res);
      });
  bootstrap_->route(http::Verb::get, "/health",
                    [](const http::Request&, http::Responder& res) -> net::awaitable<void> {
                      Response ok = Response::text(200, "");
                      (void)co_await res.send(std::move(ok));
                    });
}

net::awaitable<void> Worker::serve_room(const http::Request& req, http::Responder& res) {
  const std::optional<uint64_t> id =
      parse_u64(req.path().substr(std::string_view("/room/").size()));
  if (!id) {
    Response reply = Response::error(400, "GET /room/<room>: the room must be an integer");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  std::chrono::milliseconds wait{0};
  if (auto v = req.query_param("wait_ms")) {
    wait = std::min(kMaxRoomWait, std::chrono::milliseconds(parse_u64(*v).value_or(0)));
  }
  const MonoTime deadline = Clock::real().now() + wait;
  const std::string name = "room " + std::to_string(*id);
  net::steady_timer timer(ctx_);
  for (;;) {
    if (stopping_) {
      Response reply = Response::error(503, "prefill shutting down", "service_unavailable");
      (void)co_await res.send(std::move(reply));
      co_return;
    }
    const RoomTable::State state = rooms_->state(*id);
    if (state == RoomTable::State::kReady) {
      const std::string engine = options_.advertise_host + ":" + std::to_string(http_port());
      Response reply = Response::json(
          200, room_json(*id, *rooms_->take(*id), engine, options_.engine.block_size));
      (void)co_await res.send(std::move(reply));
      co_return;
    }
    if (state == RoomTable::State::kGone) {
      Response reply =
          Response::error(410, name + " was " + std::string(rooms_->gone_reason(*id)), "gone");
      (void)co_await res.send(std::move(reply));
      co_return;
    }
    if (Clock::real().now() >= deadline) {
      Response reply = state == RoomTable::State::kPending
                           ? Response::error(504, name + " is not ready yet", "timeout")
                           : Response::error(404, name + " is unknown to this prefill worker",
                                             "not_found_error");
      (void)co_await res.send(std::move(reply));
      co_return;
    }
    rooms_->add_waiter(*id, &timer);
    timer.expires_at(deadline);
    boost::system::error_code ec;
    co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
    rooms_->remove_waiter(*id, &timer);
  }
}

net::awaitable<std::optional<Response>> Worker::prepare_pd(ApiRequest& api, Rank& r, Exchange& ex) {
  if (options_.pd.role == PdRole::kPrefill) co_return open_room(api, ex);
  if (options_.pd.role == PdRole::kDecode) co_return co_await receive_prefill(api, r);
  co_return std::nullopt;
}

std::optional<Response> Worker::open_room(ApiRequest& api, Exchange& ex) {
  const BootstrapFields& b = api.bootstrap;
  if (!b.any()) return std::nullopt;  // a prefill engine still serves a whole request
  if (!b.error.empty()) return Response::error(400, b.error);
  if (!b.room) return Response::error(400, "a prefill request's bootstrap fields need its room");
  if (!rooms_->open(*b.room)) {
    return Response::error(
        400, "bootstrap_room " + std::to_string(*b.room) + " is already open on this worker");
  }
  ex.room = *b.room;
  api.max_tokens = 1;  // SGLang's prefill samples the first token only; the decode does the rest
  return std::nullopt;
}

void Worker::room_ready(const Part& p) {
  RoomTable::Room room;
  room.prompt = p.room_prompt;
  room.blocks = static_cast<uint32_t>(p.room_prompt.size() / options_.engine.block_size);
  room.dp_rank = p.rank;
  rooms_->ready(*p.room, std::move(room), scaled(options_.pd.room_timeout));
}

Response Worker::pd_failure(PdFailure reason, std::string_view message) {
  pd_stats_.failures[size_t(reason)].add();
  const unsigned status = failure_status(reason);
  return Response::error(status, message, http::error_type_for(status));
}

net::awaitable<std::optional<Response>> Worker::receive_prefill(ApiRequest& api, Rank& r) {
  const BootstrapFields& b = api.bootstrap;
  if (!b.error.empty()) co_return Response::error(400, b.error);
  if (!b.complete()) {
    co_return Response::error(
        400, "a decode worker needs bootstrap_host, bootstrap_port and bootstrap_room");
  }
  const MonoTime deadline = Clock::real().now() + scaled(options_.pd.transfer_timeout);
  Pull pull = co_await pull_room(*b.host, *b.port, *b.room, deadline, json_, pulls_);
  if (stopping_) co_return Response::error(503, "engine shutting down", "service_unavailable");
  if (pull.failure) co_return pd_failure(*pull.failure, pull.message);
  const std::vector<TokenId>& prompt = api.prompts.front();
  if (pull.prompt != prompt) {
    co_return pd_failure(PdFailure::kPromptMismatch,
                         "room " + std::to_string(*b.room) +
                             " holds another prompt than this request's (wrong pairing)");
  }
  if (pull.block_size != options_.engine.block_size) {
    co_return pd_failure(PdFailure::kBadAnswer, "the prefill's block size differs from this one's");
  }
  // Blocks this engine holds already need no transfer: what lets a gateway save transfers by
  // sending a prompt back to the decode that has it.
  const uint32_t held = r.engine.cached_prefix_blocks(prompt, pull.blocks);
  const uint32_t moved = pull.blocks - held;
  if (moved > 0) {
    net::steady_timer transfer(ctx_);
    transfer.expires_after(scaled(options_.pd.transfer_per_block * moved));
    boost::system::error_code ec;
    co_await transfer.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  if (stopping_) co_return Response::error(503, "engine shutting down", "service_unavailable");
  auto stored = r.engine.import_prefix(prompt, pull.blocks);
  if (!stored.ok())
    co_return pd_failure(PdFailure::kPoolFull, std::string(stored.status().message()));
  // The received blocks are announced as this engine's own, so a gateway's index learns them.
  r.engine.take_events(&r.scratch);
  if (options_.oracle != nullptr) options_.oracle->apply(holder_of(r), r.scratch);
  publish(r, r.scratch);
  pd_stats_.transfers.add();
  pd_stats_.blocks_transferred.add(moved);
  pd_stats_.blocks_skipped.add(held);
  co_return std::nullopt;
}

Response Worker::pd_report() const {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("worker", options_.index);
  w.member("pd_role", pd_role_name(options_.pd.role));
  if (bootstrap_) w.member("bootstrap_port", bootstrap_->port());
  w.member("open_rooms", static_cast<uint64_t>(rooms_ ? rooms_->open_rooms() : 0));
  w.member("pulls_in_flight", static_cast<uint64_t>(pulls_.size()));
  pd_stats_.write_json(w);
  w.end_object();
  return Response::json(200, std::move(out));
}

}  // namespace kvgate::mock::detail
