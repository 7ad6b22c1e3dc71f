// Worker: one mock engine process as the fleet sees it: an HTTP server on its own port in front
// of dp_size engine ranks, each rank with its own scheduler, KV block pool and KV-event stream.
//
// Threading: everything a worker owns (its server's connections and handlers, its ranks' step
// timers, its fault state and records) runs on one context of the pool, so none of it is locked.
// start() and shutdown() may be called from any thread outside the pool.
#pragma once

#include <array>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "boost/asio/steady_timer.hpp"
#include "kvgate/core/tokenizer.h"
#include "kvgate/events/wire.h"
#include "kvgate/http/client.h"
#include "kvgate/http/server.h"
#include "kvgate/metrics/metrics.h"
#include "kvgate/mock/engine.h"
#include "kvgate/mock/fleet.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"
#include "mock/detail/api.h"
#include "mock/detail/oracle.h"
#include "mock/detail/pd.h"
#include "mock/detail/publisher.h"

namespace kvgate::mock::detail {

struct WorkerOptions {
  uint32_t index = 0;
  uint32_t dp_size = 1;
  std::string model = "mock-8b";
  EngineConfig engine;
  events::WireFormat wire = events::WireFormat::kVllmArray;
  http::ServerOptions http;
  std::vector<size_t> streams;              // hub stream per rank
  std::vector<StreamEndpoints> advertised;  // per rank, host as clients should dial it
  std::string advertise_host = "127.0.0.1";
  std::string topic;
  ReplayShape replay_shape = ReplayShape::kWithTopic;
  size_t replay_buffer_steps = 10'000;
  size_t request_records = 100'000;
  uint64_t seed = 0;
  FleetOracle* oracle = nullptr;  // shared by the fleet's workers (optional)
  // How prompts' text becomes token ids (the test tokenizer unless the fleet has --tokenizer).
  std::shared_ptr<const tokenizer::PromptTokenizer> tokenizer;
  // Push each rank's load on its KV-event socket (events/load_record.h) after its steps (at most
  // every push_loads_min_gap) and every push_loads_interval while quiet. Zero: off.
  std::chrono::milliseconds push_loads_interval{0};
  PdOptions pd;                 // its bootstrap_port is the fleet's base, not this worker's
  uint16_t bootstrap_port = 0;  // prefill: this worker's bootstrap server (0: any free port)
};

class Worker {
 public:
  Worker(http::IoPool& pool, PublisherHub& hub, WorkerOptions options);
  ~Worker();

  Status start();
  // Stops stepping, aborts every request and wakes its handler, then stops the HTTP server.
  void shutdown();
  uint16_t http_port() const { return server_->port(); }
  // The prefill role's bootstrap server; 0 in other roles. After start().
  uint16_t bootstrap_port() const { return bootstrap_ ? bootstrap_->port() : 0; }
  const WorkerOptions& options() const { return options_; }

 private:
  struct Exchange;
  struct Part;
  struct Rank;
  struct Record;

  // Routes.
  boost::asio::awaitable<void> serve_inference(ApiKind kind, const http::Request& req,
                                               http::Responder& res);
  boost::asio::awaitable<void> serve_pooling(PoolingKind kind, const http::Request& req,
                                             http::Responder& res);
  // serve_inference's steps: the rank a request asks for (header over body), its prompts added
  // to the rank's engine as parts of `ex`, and the answer written whole or streamed.
  static std::optional<uint32_t> wanted_rank(const ApiRequest& api, const http::Request& req);
  Status add_parts(ApiKind kind, ApiRequest& api, uint32_t rank, const std::string& base_id,
                   MonoTime arrival, WallTime arrival_wall, Exchange& ex);
  boost::asio::awaitable<void> answer_whole(const ApiRequest& api, const ResponseIds& rids,
                                            MonoTime arrival, Exchange& ex, http::Responder& res);
  boost::asio::awaitable<void> answer_stream(ApiKind kind, const ApiRequest& api,
                                             const ResponseIds& rids, Exchange& ex,
                                             http::Responder& res);
  // What one pass of answer_stream over the parts did.
  enum class StreamStep : uint8_t { kWrote, kNothingNew, kAllWritten, kClientGone };
  boost::asio::awaitable<StreamStep> write_ready_chunks(ApiKind kind, const ApiRequest& api,
                                                        const ResponseIds& rids, Exchange& ex,
                                                        http::Responder& res);
  static ChoiceResult choice_result(const Part& p, std::vector<TokenId> tokens);
  boost::asio::awaitable<void> serve_admin(const http::Request& req, http::Responder& res);
  // A refusal for a body not sent as JSON (FastAPI answers 422), or nothing.
  std::optional<http::Response> refuse_non_json(const http::Request& req) const;
  http::Response health() const;
  http::Response model_info() const;
  http::Response load_report() const;
  http::Response server_info() const;
  http::Response models() const;
  http::Response metrics();
  http::Response truth() const;
  http::Response requests(const http::Request& req) const;
  http::Response faults() const;
  // GET /admin/bodies: the last request bodies the inference and pooling routes received, as
  // received (a client checks what reached the engine, byte for byte).
  http::Response bodies() const;
  void remember_body(const http::Request& req);

  // Prefill/decode disaggregation (worker_pd.cc).
  // GET /room/<id>?wait_ms=<ms> on the bootstrap server: the long poll a decode pulls a room with.
  boost::asio::awaitable<void> serve_room(const http::Request& req, http::Responder& res);
  // The role's part of a request before its prompts go to the engine: the prefill opens the
  // request's room and cuts it to one token; the decode pulls the room and receives the blocks it
  // lacks. Returns the error answer when the request cannot go on.
  boost::asio::awaitable<std::optional<http::Response>> prepare_pd(ApiRequest& api, Rank& r,
                                                                   Exchange& ex);
  std::optional<http::Response> open_room(ApiRequest& api, Exchange& ex);
  boost::asio::awaitable<std::optional<http::Response>> receive_prefill(ApiRequest& api, Rank& r);
  // vLLM's protocol (NixlConnector): the prefill's side of a do_remote_decode request, the
  // kv_transfer_params its answer carries (issuing the transfer), the side channel's pull, and
  // the decode's side of a do_remote_prefill request.
  std::optional<http::Response> start_remote_decode(ApiRequest& api, Exchange& ex);
  std::string issue_transfer(const Exchange& ex);
  boost::asio::awaitable<void> serve_nixl_pull(const http::Request& req, http::Responder& res);
  boost::asio::awaitable<std::optional<http::Response>> receive_remote_prefill(ApiRequest& api,
                                                                               Rank& r);
  // Both decodes' end: the pulled prompt checked against the request's, the blocks this rank
  // lacks waited for and imported as if computed, announced, counted. `name` names the transfer
  // in errors. A rank with too few free blocks keeps the request waiting (as vLLM does) until
  // running requests free enough or `deadline` passes.
  boost::asio::awaitable<std::optional<http::Response>> take_over(
      const std::vector<TokenId>& pulled, uint32_t blocks, uint32_t block_size,
      std::string_view name, const ApiRequest& api, MonoTime deadline, Rank& r);
  boost::asio::awaitable<Result<uint32_t>> import_when_room(const std::vector<TokenId>& prompt,
                                                            uint32_t blocks, MonoTime deadline,
                                                            Rank& r);
  // A rank's engine load with the decodes waiting for KV room counted as waiting requests.
  static EngineLoad rank_load(const Rank& r);
  // A transfer failure counted, as the error answer it becomes.
  http::Response pd_failure(PdFailure reason, std::string_view message);
  // The prefill's part computed its prompt: its room is ready.
  void room_ready(const Part& p);
  void register_bootstrap();
  http::Response pd_report() const;
  // A PD duration at the timing model's speedup.
  Duration scaled(Duration d) const;

  // Engine driving.
  uint32_t pick_rank(std::optional<uint32_t> wanted) const;
  void kick(Rank& r);
  void on_step_done(Rank& r);
  void publish(Rank& r, std::vector<events::WireEvent>& evs);
  void push_load(Rank& r, MonoTime now);
  void arm_load_timer();
  // The fleet-wide holder number of a rank (worker-major), as the oracle knows it.
  uint32_t holder_of(const Rank& r) const;
  void apply_deferred(Rank& r);
  void set_paused(bool paused);
  void reopen_listener_after(Duration delay);
  std::optional<unsigned> injected_failure();
  void record(const Part& p, std::string_view status);

  http::IoPool& pool_;
  boost::asio::io_context& ctx_;
  PublisherHub& hub_;
  WorkerOptions options_;
  std::shared_ptr<const tokenizer::PromptTokenizer> tokenizer_;
  simdjson::dom::parser json_;
  std::unique_ptr<http::Server> server_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  absl::flat_hash_map<uint64_t, Part*> parts_;  // (rank << 48 | engine id) -> waiting part
  uint64_t next_request_ = 1;
  bool stopping_ = false;

  // Faults.
  bool paused_ = false;
  boost::asio::steady_timer pause_timer_;
  uint64_t fail_next_ = 0;
  double fail_ratio_ = 0;
  unsigned fail_status_ = 500;
  uint64_t injected_failures_ = 0;
  std::mt19937_64 rng_;
  boost::asio::steady_timer listener_timer_;
  boost::asio::steady_timer load_timer_;

  // Records, oldest first; `seq` numbers them for paging.
  std::deque<Record> records_;
  // The last kKeptBodies request bodies (path, x-request-id, body), oldest first.
  static constexpr size_t kKeptBodies = 64;
  std::deque<std::array<std::string, 3>> bodies_;
  uint64_t next_record_seq_ = 1;

  // Metrics (one registry per worker: each serves its own /metrics).
  std::shared_ptr<metrics::Registry> registry_;

  // Prefill/decode. The rooms and the bootstrap server exist in the prefill role only.
  PdStats pd_stats_;
  std::unique_ptr<RoomTable> rooms_;
  // vLLM transfers, by their first block id; ids are issued from next_block_id_ (never reused in
  // the worker's life) under engine_id_, which differs on every start, so a restarted prefill
  // refuses what its former self issued.
  std::unique_ptr<RoomTable> transfers_;
  std::string engine_id_;
  uint64_t next_block_id_ = 1;
  std::unique_ptr<http::Server> bootstrap_;
  // A decode's pulls waiting on a bootstrap server: shutdown closes them, so no handler outlives
  // the worker's server by a transfer timeout.
  absl::flat_hash_set<http::Connection*> pulls_;
};

}  // namespace kvgate::mock::detail
