// The Worker's private parts that its four source files share (worker.cc, worker_inference.cc,
// worker_info.cc, worker_admin.cc): a request's prompts as the handler and the step loop see them,
// one data-parallel rank's engine and streams, and the per-request records the admin API serves.
#pragma once

#include "mock/detail/worker.h"

namespace kvgate::mock::detail {

// The key of Worker::parts_: a rank's engine request id.
inline uint64_t part_key(uint32_t rank, RequestId id) { return (uint64_t{rank} << 48) | id; }

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
  uint64_t sequence = 0;  // a Responses stream's next event number
  MonoTime arrival{};
  WallTime arrival_wall{};
  std::optional<MonoTime> first_token, last_token, finish;
  // A prefill's first part: its room, ready once the prompt is computed, and the prompt it holds.
  std::optional<uint64_t> room;
  std::vector<TokenId> room_prompt;
};

struct Worker::Exchange {
  explicit Exchange(const boost::asio::any_io_executor& ex) : wake(ex) {}
  boost::asio::steady_timer wake;
  std::string request_id;  // the client's x-request-id (a gateway sends both sides of a pair one)
  std::vector<std::unique_ptr<Part>> parts;
  std::optional<uint64_t> room;  // a prefill request's room, abandoned if the request fails
  // A vLLM prefill request (do_remote_decode): the prompt its answer hands to a decode.
  std::optional<std::vector<TokenId>> remote_decode;
};

struct Worker::Rank {
  Rank(boost::asio::io_context& ctx, const EngineConfig& c) : engine(c), timer(ctx) {}
  uint32_t index = 0;
  Engine engine;
  boost::asio::steady_timer timer;
  bool stepping = false;
  MonoTime step_end{};
  size_t stream = 0;
  uint64_t next_seq = 0;
  uint64_t drop_next = 0;
  Duration publish_delay{0};
  bool deferred_clear = false;
  // Decodes whose transfer waits for KV room on this rank (vLLM keeps such a request waiting
  // until running ones free blocks): each timer is cancelled at every step's end, to look again.
  std::vector<boost::asio::steady_timer*> room_waiters;
  std::optional<bool> deferred_restart;  // value: clear the cache too
  uint64_t restarts = 0;
  std::vector<events::WireEvent> scratch;
  std::string payload;
  MonoTime load_pushed{};  // the last pushed load record
  std::string load_payload;
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
  std::string request_id;  // the request's x-request-id, empty without one
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

}  // namespace kvgate::mock::detail
