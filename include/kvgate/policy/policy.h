// Routing policies: given a request's block chain and the fleet snapshot, pick a worker.
//
// A policy never blocks and allocates nothing after warm-up (per-thread Scratch holds the buffers).
// It returns a Decision with the branch that decided it, which the caller counts
// (kvgate_router_decisions_total{policy, branch}); the caller also tells the policy about every
// request's end on every path (success, error, client abort, retry).
//
// Threading: select() and on_request_end() may run on any number of threads at once; each thread
// passes its own Scratch.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/clock.h"
#include "kvgate/core/result.h"
#include "kvgate/index/indexer.h"
#include "kvgate/workers/registry.h"

namespace kvgate::policy {

struct RouteRequest {
  std::span<const SeqHash> chain;  // the prompt's block chain at the fleet's block size
  uint32_t prompt_tokens = 0;
  uint32_t block_size = 0;       // tokens per block of `chain` (0 when the chain is empty)
  std::string_view routing_key;  // consistent_hashing; empty when the request has none
  std::string_view model;        // empty: any worker
  // Only workers of this role (a prefill/decode fleet asks for each side in turn; a regular
  // request never lands on a prefill or decode worker).
  workers::WorkerRole role = workers::WorkerRole::kRegular;
  // Workers this request already failed on: retries go elsewhere.
  std::span<const WorkerId> exclude;
  // Route to a data-parallel rank, not only a worker: a worker with several ranks (one KV cache
  // each) is several candidates, and the decision names the rank to pin.
  bool dp_aware = true;
  // The caller will explain() the decision: every candidate is left in the scratch (cache_aware
  // takes no shortcut past the fleet).
  bool explain = false;
};

enum class Branch : uint8_t {
  kAffinity,        // cache_aware: the deepest holder of the prefix
  kFreshPrefix,     // cache_aware: nobody holds a block; least expected wait
  kImbalanceSpill,  // cache_aware: the deepest holder was far above the fleet mean; least wait
                    // instead
  kOverloadSteer,   // cache_aware: the deepest holder was overloaded; the best of the others
  kWaitSpill,       // cache_aware: the deepest holder's queue cost far more than its cache saved;
                    // least wait instead
  kWarmup,          // cache_aware: sent to a thin worker (warm-up rule) instead
  kAllOverloaded,   // every candidate overloaded: the least-loaded one
  kShed,            // every candidate overloaded and shedding on: no worker (503)
  kNoWorker,        // no routable worker serves the model (503)
  kRandom,
  kRoundRobin,
  kPowerOfTwo,
  kLeastLoad,
  kConsistentHash,
  kCount,
};
const char* branch_name(Branch b);

struct Decision {
  int32_t worker = -1;  // index into FleetSnapshot::workers; -1 with kShed / kNoWorker
  Branch branch = Branch::kNoWorker;
  uint32_t matched_blocks = 0;  // blocks of the chain the chosen worker holds (cache_aware)
  int32_t rank = -1;            // the data-parallel rank to pin, or -1: the worker chooses
  // Of matched_blocks, those only credits of requests in flight there predict (blocks its
  // events have not confirmed yet: CacheAwareConfig::pending_max_age).
  uint32_t pending_blocks = 0;
};

// A candidate as a policy sees it during one decision: a worker, or one data-parallel rank of a
// worker with several (RouteRequest::dp_aware).
struct Candidate {
  int32_t index = 0;  // into FleetSnapshot::workers
  int32_t rank = -1;  // the rank, or -1: the whole worker
  bool overloaded = false;
  bool has_events = false;  // the worker publishes KV events (else its depth is predicted)
  HolderId holder;          // the rank's KV holder (invalid: the whole worker, or none)
  uint32_t matched_blocks = 0;
  // cache_aware: of matched_blocks, the leading ones on the device tier; the others are worth
  // offload_weight of a block each (CacheAwareConfig::tier_weights).
  uint32_t device_blocks = 0;
  float offload_weight = 1;
  // cache_aware: prompt tokens per second it prefills (CacheAwareConfig::prefill_tokens_per_second,
  // or with measured_prefill_rate the worker's learned rate once it has one).
  float prefill_rate = 0;
  double load = 0;  // effective load: max(gateway fleet's in-flight, engine running + waiting)
  // cache_aware: the prompt tokens queued there (the engine's count, or for a whole worker the
  // gateway fleet's prompts there without a first token, whichever is more), what its expected
  // wait starts from; and the blocks the index holds for it (the warm-up rule's level).
  uint64_t queued_tokens = 0;
  uint64_t index_blocks = 0;
  // cache_aware: the tokens its KV pool has free (cached prefixes not in use included, as the
  // engines count them), what the queue ahead allocates from; kUnknownFree if it did not say.
  static constexpr uint64_t kUnknownFree = UINT64_MAX;
  uint64_t free_kv_tokens = kUnknownFree;
};

// Per-thread buffers for decisions; keep one per executor thread.
struct Scratch {
  std::vector<index::HolderMatch> matches;
  // The decision's candidates: a view of the first slots. The slots only grow (to the most a
  // fleet can give), so a pass writes them in place and constructs nothing.
  std::span<Candidate> candidates;
  std::vector<Candidate> candidate_slots;
  std::vector<uint32_t> depth_by_holder;
  std::vector<uint32_t> device_depth_by_holder;
  // cache_aware's blocks in flight: the credits a lookup found, whether it found any, and the
  // index's own matches before they were counted (what the decision reports as confirmed).
  std::vector<index::HolderMatch> pending_matches;
  bool pending_counted = false;
  std::vector<index::HolderMatch> confirmed_matches;
  // By holder id: 1 + its position in `matches` while credits are merged, else 0.
  std::vector<uint32_t> match_of_holder;
  std::mt19937_64 rng{std::random_device{}()};

  // cache_aware's shortcut (a decision among the deepest holders only): the workers it visits, as
  // a bitset over the snapshot's workers, and the generator as it was before the shortcut's draws
  // (restored when the shortcut gives way to the full pass).
  std::vector<uint64_t> worker_bits;
  std::mt19937_64 rng_before_shortcut;
  // Decisions this scratch made by the shortcut, and by a pass over the whole fleet.
  uint64_t shortcut_decisions = 0;
  uint64_t fleet_pass_decisions = 0;

  // cache_aware's warm-up levels (CacheAwareConfig::warmup_level_max_age) as this thread last
  // summed them, one per model: the mean index blocks of the model's workers and which are thin.
  struct WarmupLevel {
    uint64_t policy = 0;  // the policy instance that summed it
    uint64_t fleet_version = 0;
    std::string model;
    MonoTime summed_at{};
    size_t with_level = 0;  // candidates with KV events, whose levels the mean is of
    double mean = 0;
    std::vector<uint64_t> thin;  // bitset over the snapshot's workers
  };
  std::vector<WarmupLevel> warmup_levels;
};

// Blocks the approximate mode predicted cached on one worker (a worker without KV events), as
// gateway replicas share them (state sync).
struct PredictedBlocks {
  WorkerId worker;
  std::vector<SeqHash> blocks;
};

struct CacheAwareConfig;

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                          Scratch& scratch) = 0;
  // The request went to `worker` (after select(), when it is actually sent), pinned to `rank`
  // (-1: the worker chooses). Returns a ticket for on_prefilled() and on_request_end() (0: the
  // policy keeps nothing of this dispatch).
  virtual uint64_t on_dispatch(const workers::Worker& /*worker*/, const RouteRequest& /*req*/,
                               int32_t /*rank*/) {
    return 0;
  }
  // The dispatched request's first token (or whole answer) came back.
  virtual void on_prefilled(uint64_t /*ticket*/) {}
  // The request ended on `worker` with `outcome` (every path, exactly once per dispatch).
  virtual void on_request_end(const workers::Worker& /*worker*/, workers::Outcome /*outcome*/,
                              uint64_t /*ticket*/) {}
  // The worker left the fleet: forget anything kept about it.
  virtual void on_worker_removed(WorkerId /*worker*/) {}
  // State sync (CacheAwareConfig::journal_predictions): the blocks predicted since the last call,
  // per worker, for the peer replicas; and what a peer predicted, added to this policy's own.
  virtual void take_predictions(std::vector<PredictedBlocks>& /*out*/) {}
  virtual void add_predictions(WorkerId /*worker*/, std::span<const SeqHash> /*blocks*/) {}
  // New figures while serving (a configuration reload): cache_aware takes the balance, wait-spill,
  // overload, tie and cost-model figures of `config` for its next decisions; the warm-up rule and
  // the predictions keep the figures they started with. Any thread, concurrently with select().
  virtual void reconfigure(const CacheAwareConfig& /*config*/) {}
  // The blocks-in-flight credits (cache_aware; zeros elsewhere). Any thread.
  struct PendingStats {
    uint64_t credited = 0;   // dispatches credited to their holder
    uint64_t withdrawn = 0;  // ended by their request's failure or cancellation
    uint64_t evicted = 0;    // ended early for room (pending_max_requests, _capacity_blocks)
    uint64_t live_requests = 0;
    uint64_t live_blocks = 0;
    PendingStats& operator+=(const PendingStats& o) {
      credited += o.credited;
      withdrawn += o.withdrawn;
      evicted += o.evicted;
      live_requests += o.live_requests;
      live_blocks += o.live_blocks;
      return *this;
    }
  };
  virtual PendingStats pending_stats() const { return {}; }
};

enum class PolicyKind {
  kRandom,
  kRoundRobin,
  kPowerOfTwo,
  kLeastLoad,
  kConsistentHashing,
  kCacheAware
};
std::string_view policy_kind_name(PolicyKind k);
Result<PolicyKind> parse_policy_kind(std::string_view s);

struct CacheAwareConfig {
  // Spill off the deepest holder when its load exceeds the fleet mean by both of these.
  double balance_abs_threshold = 32;
  double balance_rel_threshold = 1.5;
  // Spill off the deepest holder when its expected wait exceeds the least expected wait by more
  // than this many times the prefill its deeper match saves: a request that shares a few blocks
  // more with a worker stuck behind a long prefill goes where it starts sooner, one that shares
  // its conversation stays. Only the share of the match the worker's free KV keeps through the
  // queue ahead counts (its engine evicts the oldest free blocks first). 0: off.
  double wait_spill_ratio = 20;
  workers::OverloadThresholds overload;
  bool shed_when_all_overloaded = false;  // 503 instead of the least-loaded worker
  // Decisions whose expected waits differ by less than this are ties, drawn uniformly.
  double tie_window_us = 1.0;
  // Cost model for expected wait: prefill throughput of a worker, and the prompt length assumed
  // for requests the engine has queued when it does not report queued tokens. With
  // measured_prefill_rate, a worker that has taught the gateway its own rate
  // (Worker::prefill_rate()) is costed at it instead.
  double prefill_tokens_per_second = 10000;
  bool measured_prefill_rate = false;
  double assumed_queued_prompt_tokens = 1024;
  // What a matched block saves, per index::Tier (device, host, disk, external), as a share of
  // computing it: a block off the device costs a load. Affinity still goes to the deepest match
  // on any tier; the expected wait and the prefill a match saves count a worker's matched blocks
  // past its device depth at the weight of the dearest tier its events offload to (the host's
  // if they named none). In [0, 1]; the device's is 1.
  std::array<double, index::kTierCount> tier_weights = {1.0, 0.8, 0.5, 0.3};
  // Warm-up: a worker whose index holds less than warmup_thin_ratio of the fleet's mean (an engine
  // that came back empty, a worker just added) gets warmup_miss_share of the requests nobody holds
  // and warmup_hit_share of those others hold, so it fills instead of idling while its peers hold
  // every hot prefix. It ends when the worker is no longer thin, or after warmup_max_diversions
  // requests (so it ends even for a worker that never fills). Off with a ratio of 0; nothing
  // either while the fleet's mean is under warmup_min_mean_blocks (the whole fleet is warming).
  double warmup_thin_ratio = 0.5;
  double warmup_miss_share = 0.25;
  double warmup_hit_share = 0.125;
  uint64_t warmup_max_diversions = 1000;
  uint64_t warmup_min_mean_blocks = 64;
  // The warm-up level (the mean and which workers are thin) is summed over the fleet at most this
  // often per thread; decisions in between reuse it. The blocks it sums change once per control
  // tick, and reusing it lets a decision visit only the deepest holders. 0: every decision sums.
  Duration warmup_level_max_age = std::chrono::milliseconds(100);
  // Approximate mode for workers without KV events: a routed prompt is assumed cached there for
  // this long.
  Duration prediction_ttl = std::chrono::seconds(120);
  size_t prediction_capacity_blocks = 1 << 20;
  // Keep a journal of the predictions for take_predictions() (state sync between replicas), up
  // to this many blocks between two takes (beyond: dropped, and only peers miss them).
  bool journal_predictions = false;
  size_t prediction_journal_blocks = 1 << 18;
  // Blocks in flight, for workers with KV events: a dispatched prompt's chain is credited to its
  // holder (the pinned rank's, or a single-rank worker's) as pending until its events can have
  // confirmed it, and lookups count the credit beside the index's depth. Without it, a burst of
  // requests sharing a new prefix arrives before the first one's events and is spread, each
  // worker computing the prefix. A credit ends pending_grace after its request's first token
  // (the events' lag), at its request's failure or cancellation, or pending_max_age after its
  // dispatch; at most pending_max_requests credits of pending_capacity_blocks blocks in all (the
  // oldest go first). A max age of 0: off. A lookup counts the credits of the holders at the
  // pending_depth_levels deepest depths credits reach (a level: every holder at one depth).
  Duration pending_max_age = std::chrono::seconds(30);
  Duration pending_grace = std::chrono::seconds(1);
  uint32_t pending_max_requests = 4096;
  size_t pending_capacity_blocks = size_t{1} << 20;
  uint32_t pending_depth_levels = 4;
};

struct PolicyDeps {
  const index::Indexer* index = nullptr;  // cache_aware; may be null (then everything is predicted)
  const Clock* clock = nullptr;           // defaults to Clock::real()
};

Result<std::unique_ptr<Policy>> make_policy(PolicyKind kind, const CacheAwareConfig& config,
                                            PolicyDeps deps);

}  // namespace kvgate::policy
