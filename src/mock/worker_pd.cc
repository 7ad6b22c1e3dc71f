// Worker: prefill/decode disaggregation as SGLang and vLLM's NixlConnector run it (detail/pd.h,
// docs/mock.md). A prefill keeps each request's room (SGLang) or transfer (vLLM) and serves it on
// its bootstrap server; a decode pulls it from the prefill its request names, receives the
// blocks it lacks, then generates as usual.
#include <charconv>
#include <cstdio>
#include <random>
#include <span>

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

// What a decode needs of a room or transfer: members of an object the caller opened.
void write_room_body(JsonWriter& w, const RoomTable::Room& room, uint32_t block_size) {
  w.member("dp_rank", room.dp_rank).member("block_size", block_size);
  w.member("num_blocks", room.blocks);
  w.member("prompt_tokens", static_cast<uint64_t>(room.prompt.size()));
  w.key("token_ids").begin_array();
  for (TokenId t : room.prompt) w.value(t);
  w.end_array();
}

std::string room_json(uint64_t id, const RoomTable::Room& room, std::string_view engine,
                      uint32_t block_size) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("room", id).member("engine", engine);
  write_room_body(w, room, block_size);
  w.end_object();
  return out;
}

// The body of a side-channel pull, and the start of its answer: {"engine_id":..,"block_ids":[..]}.
void write_blocks_ref(JsonWriter& w, std::string_view engine_id, std::span<const uint64_t> ids) {
  w.member("engine_id", engine_id).key("block_ids").begin_array();
  for (uint64_t id : ids) w.value(id);
  w.end_array();
}

std::string blocks_json(std::string_view engine_id, std::span<const uint64_t> ids,
                        const RoomTable::Room& room, uint32_t block_size) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  write_blocks_ref(w, engine_id, ids);
  write_room_body(w, room, block_size);
  w.end_object();
  return out;
}

// What a decode learned from a bootstrap server.
struct Pull {
  std::optional<PdFailure> failure;
  std::string message;
  std::vector<TokenId> prompt;
  uint32_t blocks = 0;
  uint32_t block_size = 0;
  // The bootstrap server's answer, before it is read as a room.
  unsigned status = 0;
  std::string body;
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

// What is left of the transfer timeout, rounded up: the bootstrap server must not give up
// before this decode does.
std::chrono::milliseconds left_until(MonoTime deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::real().now());
  return std::max(left, std::chrono::milliseconds(1));
}

// Sends `req` to the prefill's bootstrap server, answered by `deadline`. `pulls` holds the
// connection while it waits, so a shutdown can close it. Its answer is the Pull's status and
// body, or the Pull is the failure to get one.
net::awaitable<Pull> ask_prefill(const std::string& host, uint16_t port, std::string_view name,
                                 http::ClientRequest req, MonoTime deadline,
                                 absl::flat_hash_set<http::Connection*>& pulls) {
  const std::string where = host + ":" + std::to_string(port);
  const std::chrono::milliseconds left = left_until(deadline);
  http::ClientOptions co;
  co.connect_timeout = left;
  co.request_timeout = left + kPollSlack;
  co.idle_timeout = left + kPollSlack;
  auto conn = co_await http::Connection::connect(host, port, co);
  if (!conn.ok()) {
    co_return failed(PdFailure::kUnreachable, "bootstrap server " + where + " unreachable: " +
                                                  std::string(conn.status().message()));
  }
  pulls.insert(conn->get());
  auto res = co_await (*conn)->send(req);
  pulls.erase(conn->get());
  if (!res.ok()) {
    if (Clock::real().now() >= deadline) {
      co_return failed(PdFailure::kTimeout,
                       std::string(name) + " not answered within the transfer timeout");
    }
    co_return failed(PdFailure::kUnreachable,
                     "bootstrap server " + where + ": " + std::string(res.status().message()));
  }
  Pull answer;
  answer.status = res->status;
  answer.body = std::move(res->body);
  co_return answer;
}

// GET /room/<room>?wait_ms=<left> from the prefill's bootstrap server (SGLang's protocol).
net::awaitable<Pull> pull_room(const std::string& host, uint16_t port, uint64_t room,
                               MonoTime deadline, simdjson::dom::parser& parser,
                               absl::flat_hash_set<http::Connection*>& pulls) {
  const std::string name =
      "room " + std::to_string(room) + " at " + host + ":" + std::to_string(port);
  http::ClientRequest req;
  req.target =
      "/room/" + std::to_string(room) + "?wait_ms=" + std::to_string(left_until(deadline).count());
  auto answer = co_await ask_prefill(host, port, name, std::move(req), deadline, pulls);
  if (answer.failure) co_return answer;
  const Pull& res = answer;
  switch (res.status) {
    case 200:
      co_return read_room(res.body, parser);
    case 404:
      co_return failed(PdFailure::kUnknownRoom,
                       name + " is unknown: that prefill never received the room (wrong pairing)");
    case 410:
      co_return failed(PdFailure::kRoomGone, name + " is gone: " + res.body);
    case 504:
      co_return failed(PdFailure::kTimeout, name + " not ready within the transfer timeout");
    default:
      co_return failed(PdFailure::kBadAnswer, name + ": status " + std::to_string(res.status));
  }
}

// POST /nixl/pull to the prefill's side channel (vLLM's protocol): no wait, the prefill issued
// the transfer before its answer reached the router.
net::awaitable<Pull> pull_blocks(const KvTransferParams& kv, MonoTime deadline,
                                 simdjson::dom::parser& parser,
                                 absl::flat_hash_set<http::Connection*>& pulls) {
  http::ClientRequest req;
  req.method = http::Verb::post;
  req.target = "/nixl/pull";
  JsonWriter w(&req.body);
  w.begin_object();
  write_blocks_ref(w, *kv.engine_id, *kv.block_ids);
  w.end_object();
  const std::string name =
      "the blocks of engine " + *kv.engine_id + " at " + *kv.host + ":" + std::to_string(*kv.port);
  auto answer = co_await ask_prefill(*kv.host, *kv.port, name, std::move(req), deadline, pulls);
  if (answer.failure) co_return answer;
  const Pull& res = answer;
  switch (res.status) {
    case 200:
      co_return read_room(res.body, parser);
    case 404:
      co_return failed(
          PdFailure::kUnknownRoom,
          name + " are unknown: that prefill never issued them (wrong pairing): " + res.body);
    case 410:
      co_return failed(PdFailure::kRoomGone, name + " are gone: " + res.body);
    default:
      co_return failed(PdFailure::kBadAnswer, name + ": status " + std::to_string(res.status) +
                                                  ": " + res.body.substr(0, 200));
  }
}

// A prompt of `tokens` tokens occupies this many blocks, the last one partial or not.
uint64_t blocks_of(size_t tokens, uint32_t block_size) {
  return (tokens + block_size - 1) / block_size;
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
  transfers_ = std::make_unique<RoomTable>(ctx_, pd_stats_);
  // vLLM names an engine by a fresh UUID each start; so does the mock, in its own shape.
  std::random_device entropy;
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%08x%08x", entropy(), entropy());
  engine_id_ = "kvgate-mock-w" + std::to_string(options_.index) + "-" + suffix;
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
  bootstrap_->route(http::Verb::post, "/nixl/pull",
                    [this](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
                      co_await serve_nixl_pull(req, res);
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
  const KvTransferParams& kv = api.kv_transfer;
  if (options_.pd.role == PdRole::kRegular) co_return std::nullopt;
  if (kv.present) {
    if (!kv.error.empty()) co_return Response::error(400, kv.error);
    if (api.bootstrap.any()) {
      co_return Response::error(400,
                                "a request carries SGLang's bootstrap fields or vLLM's "
                                "kv_transfer_params, not both");
    }
  }
  if (options_.pd.role == PdRole::kPrefill) {
    if (!kv.present) co_return open_room(api, ex);
    if (kv.do_remote_prefill) {
      co_return Response::error(
          400, "do_remote_prefill is for a decode worker; this worker is a prefill worker");
    }
    // kv_transfer_params without do_remote_decode: a whole request, as vLLM serves it.
    co_return kv.do_remote_decode ? start_remote_decode(api, ex) : std::nullopt;
  }
  if (kv.present) co_return co_await receive_remote_prefill(api, r);
  co_return co_await receive_prefill(api, r);
}

std::optional<Response> Worker::start_remote_decode(ApiRequest& api, Exchange& ex) {
  if (api.stream) {
    return Response::error(400,
                           "a do_remote_decode request must not stream: the kv_transfer_params "
                           "for the decode ride on the whole answer");
  }
  if (api.prompts.size() != 1) {
    return Response::error(400, "a do_remote_decode request carries one prompt");
  }
  ex.remote_decode = api.prompts.front();
  api.max_tokens = 1;  // the prefill samples the first token only; the decode does the rest
  return std::nullopt;
}

std::string Worker::issue_transfer(const Exchange& ex) {
  const std::vector<TokenId>& prompt = *ex.remote_decode;
  const uint32_t block_size = options_.engine.block_size;
  // One id per block the prompt occupies, the partial last one included, as vLLM lists them.
  const uint64_t first = next_block_id_;
  next_block_id_ += blocks_of(prompt.size(), block_size);
  RoomTable::Room room;
  room.prompt = prompt;
  room.blocks = static_cast<uint32_t>(prompt.size() / block_size);
  room.dp_rank = ex.parts.front()->rank;
  transfers_->open(first);
  transfers_->ready(first, std::move(room), scaled(options_.pd.room_timeout));
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("do_remote_prefill", true).member("do_remote_decode", false);
  w.member("remote_engine_id", engine_id_).key("remote_block_ids").begin_array();
  for (uint64_t id = first; id < next_block_id_; ++id) w.value(id);
  w.end_array().member("remote_host", options_.advertise_host);
  w.member("remote_port", bootstrap_->port()).member("tp_size", 1).end_object();
  return out;
}

net::awaitable<void> Worker::serve_nixl_pull(const http::Request& req, http::Responder& res) {
  simdjson::dom::element doc;
  simdjson::dom::array ids;
  std::string_view engine;
  std::vector<uint64_t> wanted;
  if (json_.parse(req.body().data(), req.body().size()).get(doc) != simdjson::SUCCESS ||
      doc["engine_id"].get(engine) != simdjson::SUCCESS ||
      doc["block_ids"].get(ids) != simdjson::SUCCESS) {
    Response reply =
        Response::error(400, "POST /nixl/pull takes {\"engine_id\":..,\"block_ids\":[..]}");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  for (simdjson::dom::element e : ids) {
    uint64_t v = 0;
    if (e.get(v) != simdjson::SUCCESS) break;
    wanted.push_back(v);
  }
  if (wanted.size() != ids.size() || wanted.empty()) {
    Response reply = Response::error(400, "block_ids must be a non-empty list of block ids");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  const std::string name = "blocks " + std::to_string(wanted.front()) + ".." +
                           std::to_string(wanted.back()) + " of engine " + std::string(engine);
  if (engine != engine_id_) {
    const std::string why = name + ": this prefill is engine " + engine_id_ +
                            " (a wrong pairing, or a prefill restarted since)";
    Response reply = Response::error(404, why, "not_found_error");
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  // The ids must be one whole transfer as issued: a decode that pulled a part of it, or blocks
  // of two, would import a prompt nobody computed.
  const RoomTable::Room* room = transfers_->ready_room(wanted.front());
  bool whole = room != nullptr &&
               wanted.size() == blocks_of(room->prompt.size(), options_.engine.block_size);
  for (size_t i = 0; whole && i < wanted.size(); ++i) whole = wanted[i] == wanted.front() + i;
  if (whole) {
    Response reply =
        Response::json(200, blocks_json(engine_id_, wanted, *transfers_->take(wanted.front()),
                                        options_.engine.block_size));
    (void)co_await res.send(std::move(reply));
    co_return;
  }
  Response reply =
      transfers_->state(wanted.front()) == RoomTable::State::kGone
          ? Response::error(
                410, name + " were " + std::string(transfers_->gone_reason(wanted.front())), "gone")
          : Response::error(404, name + " were never issued as one transfer by this prefill",
                            "not_found_error");
  (void)co_await res.send(std::move(reply));
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
  // No PD field at all: the whole request here, as vLLM's kv_both engines serve it.
  if (!b.any() && options_.pd.decode_local_prefill) co_return std::nullopt;
  if (!b.complete()) {
    co_return Response::error(
        400,
        "a decode worker needs bootstrap_host, bootstrap_port and bootstrap_room (or vLLM's "
        "kv_transfer_params)");
  }
  const MonoTime deadline = Clock::real().now() + scaled(options_.pd.transfer_timeout);
  Pull pull = co_await pull_room(*b.host, *b.port, *b.room, deadline, json_, pulls_);
  if (stopping_) co_return Response::error(503, "engine shutting down", "service_unavailable");
  if (pull.failure) co_return pd_failure(*pull.failure, pull.message);
  const std::string name = "room " + std::to_string(*b.room);
  co_return co_await take_over(pull.prompt, pull.blocks, pull.block_size, name, api, deadline, r);
}

net::awaitable<std::optional<Response>> Worker::receive_remote_prefill(ApiRequest& api, Rank& r) {
  const KvTransferParams& kv = api.kv_transfer;
  if (kv.do_remote_decode) {
    co_return Response::error(
        400, "do_remote_decode is for a prefill worker; this worker is a decode worker");
  }
  if (!kv.do_remote_prefill || !kv.remote_complete() || kv.block_ids->empty()) {
    co_return Response::error(400,
                              "a decode worker's kv_transfer_params need do_remote_prefill true, "
                              "remote_engine_id, remote_block_ids, remote_host and remote_port "
                              "(the prefill's answer, as it gave them)");
  }
  if (api.prompts.size() != 1) {
    co_return Response::error(400, "a do_remote_prefill request carries one prompt");
  }
  const MonoTime deadline = Clock::real().now() + scaled(options_.pd.transfer_timeout);
  Pull pull = co_await pull_blocks(kv, deadline, json_, pulls_);
  if (stopping_) co_return Response::error(503, "engine shutting down", "service_unavailable");
  if (pull.failure) co_return pd_failure(*pull.failure, pull.message);
  const std::string name = "the blocks of engine " + *kv.engine_id;
  co_return co_await take_over(pull.prompt, pull.blocks, pull.block_size, name, api, deadline, r);
}

net::awaitable<std::optional<Response>> Worker::take_over(const std::vector<TokenId>& pulled,
                                                          uint32_t blocks, uint32_t block_size,
                                                          std::string_view name,
                                                          const ApiRequest& api, MonoTime deadline,
                                                          Rank& r) {
  const std::vector<TokenId>& prompt = api.prompts.front();
  if (pulled != prompt) {
    co_return pd_failure(
        PdFailure::kPromptMismatch,
        std::string(name) + ": another prompt than this request's (wrong pairing)");
  }
  if (block_size != options_.engine.block_size) {
    co_return pd_failure(PdFailure::kBadAnswer, "the prefill's block size differs from this one's");
  }
  // Blocks this engine holds already need no transfer: what lets a gateway save transfers by
  // sending a prompt back to the decode that has it.
  const uint32_t held = r.engine.cached_prefix_blocks(prompt, blocks);
  const uint32_t moved = blocks - held;
  if (moved > 0) {
    net::steady_timer transfer(ctx_);
    transfer.expires_after(scaled(options_.pd.transfer_per_block * moved));
    boost::system::error_code ec;
    co_await transfer.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  if (stopping_) co_return Response::error(503, "engine shutting down", "service_unavailable");
  Result<uint32_t> stored = co_await import_when_room(prompt, blocks, deadline, r);
  if (stopping_) co_return Response::error(503, "engine shutting down", "service_unavailable");
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

net::awaitable<Result<uint32_t>> Worker::import_when_room(const std::vector<TokenId>& prompt,
                                                          uint32_t blocks, MonoTime deadline,
                                                          Rank& r) {
  Result<uint32_t> stored = r.engine.import_prefix(prompt, blocks);
  // Only running requests free blocks: with none running, waiting would only end at the deadline.
  while (!stored.ok() && absl::IsResourceExhausted(stored.status()) && !stopping_ &&
         (r.engine.num_running() > 0 || paused_) && Clock::real().now() < deadline) {
    net::steady_timer room(ctx_);
    room.expires_at(deadline);
    r.room_waiters.push_back(&room);
    boost::system::error_code ec;
    co_await room.async_wait(net::redirect_error(net::use_awaitable, ec));
    std::erase(r.room_waiters, &room);
    if (stopping_) break;
    stored = r.engine.import_prefix(prompt, blocks);
  }
  if (!stored.ok() && Clock::real().now() >= deadline) {
    co_return absl::ResourceExhaustedError(std::string(stored.status().message()) +
                                           " within the transfer timeout");
  }
  co_return stored;
}

Response Worker::pd_report() const {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("worker", options_.index);
  w.member("pd_role", pd_role_name(options_.pd.role));
  if (bootstrap_) w.member("bootstrap_port", bootstrap_->port());
  if (transfers_) w.member("engine_id", engine_id_);
  // SGLang rooms and vLLM transfers alike: what a decode could still pull.
  w.member("open_rooms",
           static_cast<uint64_t>(rooms_ ? rooms_->open_rooms() + transfers_->open_rooms() : 0));
  w.member("pulls_in_flight", static_cast<uint64_t>(pulls_.size()));
  pd_stats_.write_json(w);
  w.end_object();
  return Response::json(200, std::move(out));
}

}  // namespace kvgate::mock::detail
