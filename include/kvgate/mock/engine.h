// Engine: one simulated vLLM engine core (one data-parallel rank): a continuous-batching scheduler
// over a finite, prefix-cached KV block pool, with a step-time model. Pure: no sockets, no timers,
// no clock of its own. The caller drives it:
//
//   engine.add(prompt, max_tokens, now);
//   while (auto d = engine.begin_step(now)) {   // plans a step; *d is how long it takes
//     now += *d;                                 // (the mock waits on a timer; tests advance a
//     const StepOutput& out = engine.finish_step(now);   //  ManualClock)
//     ... out.tokens, then engine.take_events(&batch) for the step's KV events ...
//   }
//
// Scheduling follows vLLM V1: running requests first (a decode token each, or the next chunk of
// an unfinished prefill), then waiting requests in arrival order while the step's token budget,
// the running limit and the pool allow. A new request first takes the longest run of its full
// blocks already cached (never its last token: vLLM recomputes at least one); its usage reports
// those tokens as cached. Admission needs the rest of the request to fit in the free blocks; a
// running request that needs a block when none is free preempts the latest-admitted running
// request (its blocks are freed, it goes back to the front of the queue and recomputes later).
//
// The pool: every block not held by a request sits in one free queue, oldest-freed first; a
// finished request frees its blocks tail first, so a shared head outlives the tails hanging off
// it. Allocation takes the queue's head; if that block is cached, it is evicted (BlockRemoved).
// A block is cached (BlockStored) when its last token's KV is computed, prompt or output. Two
// requests computing the same block at once both keep a copy, and both copies are announced.
//
// The host tier (EngineConfig::host_blocks): every block the device caches is copied to host
// memory too (BlockStored, medium CPU), which evicts its own least recently used blocks
// (BlockRemoved, medium CPU). A prefix hit may continue on host blocks: they are loaded into fresh
// device blocks (BlockStored, medium GPU) at TimingModel::host_load_cost of computing them.
//
// Threading: none. One thread drives one engine.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/core/clock.h"
#include "kvgate/core/result.h"
#include "kvgate/events/engine_hash.h"
#include "kvgate/events/wire.h"

namespace kvgate::mock {

using RequestId = uint64_t;

// How long a step takes. Defaults model an 8B dense model (Llama-3.1-8B class, bf16) on one
// H100-class accelerator; docs/mock.md gives the arithmetic. Every duration is divided by
// `speedup`.
struct TimingModel {
  double prefill_tokens_per_s = 20'000;  // compute-bound prefill throughput
  // Every step: reading the weights once (16 GB at ~3 TB/s), launch and sampling.
  Duration step_overhead = std::chrono::microseconds(6'000);
  Duration decode_per_seq = std::chrono::microseconds(40);  // per decoding sequence
  // Attention's KV read per context token of each decoding sequence (128 KiB per token).
  Duration decode_per_context_token = std::chrono::nanoseconds(40);
  // Loading a token's KV back from the host tier, as a share of computing it: 128 KiB per token
  // over a ~25 GB/s host link is ~5 us, a tenth of the 50 us prefill computes it in.
  double host_load_cost = 0.1;
  double speedup = 1.0;

  // The duration of a step that computes `prefill_tokens` prompt tokens and one token for each of
  // `decode_seqs` sequences whose contexts total `decode_context_tokens`, after loading
  // `loaded_tokens` from the host tier.
  Duration step(uint64_t prefill_tokens, uint64_t decode_seqs, uint64_t decode_context_tokens,
                uint64_t loaded_tokens = 0) const;
};

enum class HashScheme { kVllmSha256Cbor, kSglangSha256 };
HashScheme hash_scheme_for(events::WireFormat wire);
std::string_view hash_scheme_name(HashScheme s);

struct EngineConfig {
  uint32_t block_size = 16;
  // 26,000 blocks of 16 tokens: ~416k tokens of KV at 128 KiB per token (~52 GB), what an 80 GB
  // accelerator has left for KV at 0.9 memory utilization after 16 GB of weights and activations.
  uint32_t num_blocks = 26'000;
  uint32_t max_num_seqs = 256;             // running requests at most
  uint32_t max_num_batched_tokens = 8192;  // tokens per step (chunked prefill)
  uint32_t max_model_len = 131'072;        // prompt + output tokens per request
  bool enable_prefix_caching = true;
  // Blocks of the host (CPU) offload tier; 0: none. Every block the device caches is copied there
  // (BlockStored, medium CPU) and a prefix evicted from the device loads back from it.
  uint32_t host_blocks = 0;
  TimingModel timing;
  HashScheme hash_scheme = HashScheme::kVllmSha256Cbor;
  std::string vllm_hash_seed = std::string(events::VllmSha256Cbor::kDefaultSeed);
  uint64_t router_hash_seed = kDefaultHashSeed;  // for the router-side hashes in the truth
  uint32_t vocab = 32'000;                       // output token ids are drawn below this
};

enum class FinishReason : uint8_t { kNone, kLength, kAborted };

// One token produced by a step for one request.
struct TokenOutput {
  RequestId id = 0;
  TokenId token = 0;
  bool first = false;          // the request's first output token (its TTFT ends here)
  bool finished = false;       // the request is done (finish_reason kLength)
  uint32_t cached_tokens = 0;  // the request's prefix-cache hit at first admission
  uint32_t preemptions = 0;
};

struct StepOutput {
  MonoTime start{};
  MonoTime end{};
  std::vector<TokenOutput> tokens;
  uint32_t prefill_tokens = 0;  // prompt tokens computed
  uint32_t decode_seqs = 0;
  uint32_t scheduled = 0;  // requests in the step
  uint32_t preempted = 0;  // requests preempted while planning it
};

// What a request looked like when it was admitted, and how it is doing.
struct RequestInfo {
  RequestId id = 0;
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;  // prefix-cache hit at first admission
  uint32_t output_tokens = 0;
  uint32_t preemptions = 0;
  bool admitted = false;
};

struct EngineLoad {
  uint32_t running = 0;
  uint32_t waiting = 0;        // includes preempted requests
  uint32_t used_blocks = 0;    // held by requests
  uint32_t cached_blocks = 0;  // holding a cached hash (held or free)
  uint32_t num_blocks = 0;
  uint64_t queued_prefill_tokens = 0;  // prompt tokens still to compute, waiting and running
  double kv_usage() const { return num_blocks ? double(used_blocks) / num_blocks : 0.0; }
};

// Cumulative counters (vLLM's metric definitions: queries and hits count tokens).
struct EngineCounters {
  uint64_t prefix_cache_queries = 0;  // prompt tokens looked up at admission
  uint64_t prefix_cache_hits = 0;     // of those, found cached
  uint64_t preemptions = 0;
  uint64_t prompt_tokens = 0;  // prompt tokens of admitted requests (first admission)
  uint64_t generation_tokens = 0;
  uint64_t computed_prefill_tokens = 0;  // prompt and recomputed tokens actually computed
  uint64_t steps = 0;
  uint64_t finished_requests = 0;
  uint64_t aborted_requests = 0;
  uint64_t stored_blocks = 0;
  uint64_t evicted_blocks = 0;
  uint64_t host_hit_tokens = 0;      // prompt tokens loaded from the host tier at admission
  uint64_t offloaded_blocks = 0;     // blocks newly copied to the host tier
  uint64_t host_evicted_blocks = 0;  // blocks the host tier evicted for room
};

// One cached block as the engine holds it: the engine truth the KV events must reproduce.
struct ResidentBlock {
  events::EngineHash engine_hash = 0;
  std::optional<events::EngineHash> parent;  // nullopt: first block of a sequence
  LocalHash local_hash = 0;                  // router's hash of the block's tokens
  SeqHash seq_hash = 0;                      // router's hash of the block and its prefix
  uint32_t copies = 0;                       // physical blocks holding it (0: on host only)
  uint32_t refs = 0;                         // requests holding those copies
  bool on_host = false;                      // the host tier holds a copy
};

namespace detail {
class BlockPool;
struct BlockMeta;
class HostTier;
struct SimRequest;
}  // namespace detail

class Engine {
 public:
  explicit Engine(EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return config_; }

  // Queues a request. Fails (InvalidArgument) when prompt + max_tokens exceeds max_model_len or
  // could never fit the pool, or the prompt is empty.
  Result<RequestId> add(std::vector<TokenId> prompt, uint32_t max_tokens, MonoTime now);
  // Drops a request, freeing its blocks. A request inside the planned step is dropped when the
  // step finishes. Unknown ids are ignored.
  void abort(RequestId id);

  // Plans the next step at `now`; nullopt when there is nothing to do. The step's events (e.g.
  // evictions for its allocations) are buffered until take_events().
  std::optional<Duration> begin_step(MonoTime now);
  bool step_in_flight() const { return in_flight_; }
  // Completes the planned step at `now` (the caller's view of start + duration).
  const StepOutput& finish_step(MonoTime now);

  // Moves the KV events buffered since the last call (in the order they happened) to `out`.
  void take_events(std::vector<events::WireEvent>* out);

  // Evicts every cached block, after preempting the running requests so that nothing is held.
  // With `announce`, publishes AllBlocksCleared; without it the cache vanishes silently (what an
  // engine restart does). Fails while a step is in flight.
  Status clear_cache(bool announce);

  // Prefill/decode disaggregation: a decode engine receives a prompt's KV from a prefill engine
  // instead of computing it.
  // How many leading full blocks of `prompt` (at most `max_blocks`) this engine has cached: the
  // ones a transfer can skip.
  uint32_t cached_prefix_blocks(std::span<const TokenId> prompt, uint32_t max_blocks);
  // Caches the first `blocks` full blocks of `prompt` as if this engine had computed them: a
  // BlockStored for the ones after its cached prefix (allocation may evict: BlockRemoved), then
  // they sit free and cached, so the next request with this prompt takes them as its prefix hit.
  // Returns how many it stored. Fails (ResourceExhausted) when too few blocks are free; stores
  // nothing without prefix caching. Allowed while a step is in flight (it takes only free blocks).
  Result<uint32_t> import_prefix(std::span<const TokenId> prompt, uint32_t blocks);

  std::optional<RequestInfo> info(RequestId id) const;
  EngineLoad load() const;
  uint32_t num_running() const { return static_cast<uint32_t>(running_.size()); }
  uint32_t num_waiting() const { return static_cast<uint32_t>(waiting_.size()); }
  const EngineCounters& counters() const { return counters_; }
  // Every cached block, sorted by engine hash.
  std::vector<ResidentBlock> truth() const;

 private:
  detail::SimRequest* find(RequestId id);
  void hash_blocks(detail::SimRequest& r);
  bool try_admit(detail::SimRequest& r, uint32_t budget, uint32_t* scheduled_tokens,
                 uint32_t* loaded_tokens);
  // Takes the request's first `hits` blocks: the device's copies, and fresh blocks the host tier
  // loads the others into (cached on the device again).
  void hold_prefix(detail::SimRequest& r, uint32_t hits);
  detail::BlockMeta meta_of(const detail::SimRequest& r, uint32_t i) const;
  void announce_evicted(events::EngineHash hash);
  std::optional<std::string> device_medium() const;
  // One BlockStored for blocks [first, end) of `r`, on the device or the host tier (counted as
  // stored_blocks or offloaded_blocks).
  void announce_stored(const detail::SimRequest& r, uint32_t first, uint32_t end, bool on_host);
  void copy_to_host(const detail::SimRequest& r, uint32_t first, uint32_t end);
  bool allocate(detail::SimRequest& r, uint32_t total_tokens);
  void preempt(detail::SimRequest& r);
  void free_blocks(detail::SimRequest& r);
  void cache_full_blocks(detail::SimRequest& r);
  void erase(detail::SimRequest* r);
  TokenId next_token(const detail::SimRequest& r) const;

  EngineConfig config_;
  std::unique_ptr<detail::BlockPool> pool_;
  std::unique_ptr<detail::HostTier> host_;
  events::VllmSha256Cbor vllm_hash_;
  BlockHasher router_hasher_;
  RequestId next_id_ = 1;
  // Requests live in `requests_`; running_ and waiting_ hold non-owning pointers.
  absl::flat_hash_map<RequestId, std::unique_ptr<detail::SimRequest>> requests_;
  std::vector<detail::SimRequest*> running_;  // in admission order
  std::deque<detail::SimRequest*> waiting_;   // preempted requests go to the front
  struct Scheduled {
    detail::SimRequest* req;
    uint32_t tokens;
  };
  std::vector<Scheduled> scheduled_;
  bool in_flight_ = false;
  StepOutput out_;
  std::vector<events::WireEvent> events_;
  EngineCounters counters_;
};

}  // namespace kvgate::mock
