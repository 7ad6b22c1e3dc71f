// GatewayConfig: every knob of the `kvgate` binary, with the defaults that serve, and the CLI that
// sets them (`kvgate --help` prints each flag's meaning and default).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/index/indexer.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/worker.h"

namespace CLI {
class App;
}
namespace kvgate::events {
struct SubscriptionOptions;
struct IngestOptions;
}  // namespace kvgate::events

namespace kvgate::app {

// KV event endpoints given on the command line for one worker (instead of /server_info discovery).
struct ExplicitKvEndpoint {
  std::string worker_url;
  workers::KvEndpoint endpoint;
};

// A --kv-events-endpoint value: "WORKER_URL=tcp://host:port[,replay=tcp://host:port][,topic=T]
// [,rank=R]". Throws CLI::ValidationError naming the flag.
ExplicitKvEndpoint parse_kv_endpoint(const std::string& spec);

// What one KV-event publisher can make kvgate hold and do (docs/events.md, "Bounds"). The socket,
// turn, replay and hash bounds are every subscription's (the relay's too); the block limit and the
// lag window are the gateway index's. Defaults: the event side's own (events/subscription.h,
// events/ingest.h).
struct KvEventBounds {
  int live_hwm;
  int replay_hwm;
  int64_t max_message_bytes;
  size_t turn_messages;
  size_t turn_bytes;
  std::chrono::milliseconds replay_interval;
  std::chrono::milliseconds replay_backoff_max;
  double hash_quarantine_ratio;
  double capacity_margin;
  uint64_t max_holder_blocks;
  std::chrono::milliseconds lag_window;
};
KvEventBounds default_kv_event_bounds();
// Registers their flags; `index_bounds` adds the block limit's and the lag window's.
void add_kv_event_bound_flags(CLI::App& app, KvEventBounds& b, bool index_bounds);
void apply_kv_event_bounds(const KvEventBounds& b, events::SubscriptionOptions& o);
void apply_kv_event_bounds(const KvEventBounds& b, events::IngestOptions& o);

struct GatewayConfig {
  // Listening
  std::string host = "0.0.0.0";
  uint16_t port = 30000;
  size_t threads = 0;  // executor threads; 0: one per core
  // Pin each executor thread to one CPU: "on", "off", or "auto" (only when the per-node layout
  // runs: several nodes found by --numa auto, or numa_topology; otherwise the OS places them).
  std::string pin_threads = "auto";
  // One executor pool, index shard and set of event lanes per NUMA node: "auto" (the machine's
  // nodes, from libnuma; one node is the plain layout) or "off". numa_topology, when set, names
  // the nodes instead ("0-3;4-7": CPU lists, ';' between nodes), memory left unbound.
  std::string numa = "auto";
  std::string numa_topology;
  size_t max_payload_bytes = 64 << 20;
  // Client connections at once (0: from the process's file-descriptor limit, which main raises to
  // its hard limit: half of it, each request also holds an upstream connection). At the limit the
  // longest-idle connection is closed first; a few more stay reserved for health and metrics.
  size_t max_connections = 0;
  // Request bodies held at once, bytes: a request beyond gets 429 before its body is kept. Eight
  // maximal requests (--max-payload-size) at once then grow the process by less than 200 MB.
  size_t max_inflight_body_bytes = 128 << 20;
  // Prompt tokens at most when no worker reports its context length (0: no bound then).
  size_t max_model_len = 0;
  // On SIGTERM / SIGINT, how long requests in flight may run before they are ended (Gateway::
  // drain). Long enough for a long answer to finish, short of a pod's termination grace period.
  std::chrono::milliseconds shutdown_grace_period{180'000};
  // Clients must send "Authorization: Bearer <api_key>" (empty: no check). Control routes need
  // admin_api_key; without one they answer only peers on 127.0.0.1 / ::1 (app/access.h).
  std::string api_key;
  std::string admin_api_key;
  // --api-keys-file: client keys with their tenant, priority, models and rate limits
  // (app/tenants.h); read again by a reload.
  std::string api_keys_file;
  size_t tenant_series_limit = 100;  // tenants with series of their own; the rest "other"
  size_t model_series_limit = 16;    // models with request series of their own; the rest "other"
  // Both set: the front end (and the metrics listener) speak HTTPS with this PEM certificate
  // chain and private key; neither: plain HTTP.
  std::string tls_cert_path;
  std::string tls_key_path;
  bool tls_session_tickets = false;  // issue TLS session tickets (resumption without state here)
  // Client connections: reading one request (its first byte to its body's end), writing one
  // answer or chunk, and a kept-alive connection's wait for its next request.
  std::chrono::milliseconds client_read_timeout{60'000};
  std::chrono::milliseconds client_write_timeout{60'000};
  std::chrono::milliseconds client_idle_timeout{60'000};
  // PEM roots that https:// workers' certificates must chain to (empty: the system's roots).
  std::string worker_ca_path;
  // Sent to every worker as "Authorization: Bearer <worker_api_key>" (empty: none), unless the
  // worker has credentials of its own (its URL's, or POST /workers' "api_key").
  std::string worker_api_key;
  // Workers without credentials of their own get each client's own Authorization header. Off,
  // a client's key reaches no engine; it is on regardless while kvgate checks no key itself
  // (api_key empty: the client's key is then the engines' to check).
  bool forward_client_authorization = false;
  bool forwards_client_authorization() const {
    return forward_client_authorization || (api_key.empty() && api_keys_file.empty());
  }
  // Client headers passed on to workers as they came (lower case), besides the request id, the
  // authorization above and kvgate's own: trace context by default.
  std::vector<std::string> forward_headers = {"traceparent", "tracestate"};
  // The models' tokenizers: "PATH" (every model) or "MODEL=PATH", PATH a tokenizer.json or a
  // model folder holding one. Empty: the built-in test tokenizer (the mock engine's).
  std::vector<std::string> tokenizers;
  // Chat templates replacing the ones the tokenizers' models ship: "FILE" or "MODEL=FILE".
  std::vector<std::string> chat_templates;
  // Encode each chat answer into the tokenizer's cache after it is sent, where the client's next
  // turn will look for it (only with a model tokenizer that has a chat template).
  bool answer_prewarm = true;
  // Generation requests running at once (0: no limit; each worker's overload gate still sheds);
  // beyond it up to queue_size wait, each up to queue_timeout, and the rest get 429.
  size_t max_concurrent_requests = 0;
  size_t queue_size = 100;
  // Of max_concurrent_requests, slots only critical requests take; a waiter past the starvation
  // bound goes first whatever its class (0: never); fair share weighs a tenant's output tokens
  // this many times its prompt tokens (app/admission_gate.h).
  size_t reserved_critical_slots = 0;
  // Of the places --worker-max-prefilling gives (cache_aware.overload.prefilling_requests times
  // the workers that take prompts), those only critical requests take; never all of them.
  size_t reserved_critical_prefills = 0;
  std::chrono::milliseconds priority_starvation{30'000};
  double fair_share_output_weight = 4;
  std::chrono::milliseconds queue_timeout{60'000};
  // Non-empty: the log goes to log_dir/kvgate.log and the access log to log_dir/access.log (each
  // rotated at 100 MiB, five kept) instead of stderr and stdout.
  std::string log_dir;
  // One line per answered request on stdout: "off", "text" or "json" (app/access_log.h).
  std::string access_log = "off";
  // Where access-log lines go instead of stdout (tests).
  std::function<void(std::string_view)> access_log_sink;
  // Why each request went where it did, as the answer's x-kvgate-decision header (and in the
  // access log): "off", "request" (when the request carries x-kvgate-explain: 1) or "always".
  std::string decision_headers = "request";
  // Name the worker (its URL), its rank and a pair's prefill worker on every answer
  // (x-kvgate-worker, x-kvgate-dp-rank, x-kvgate-prefill-worker). Off, only an answer whose
  // decision is told names them (worker URLs are the fleet's internal addresses), and gRPC's.
  bool expose_worker_header = false;
  // A listener of its own for GET /metrics (0: none; the main port serves /metrics either way),
  // on prometheus_host (empty: the main listener's host).
  uint16_t prometheus_port = 0;
  std::string prometheus_host;
  // The gRPC front end (kvgate.v1.Gateway, proto/kvgate/v1/gateway.proto): -1 off, 0 any free
  // port; on grpc_host (empty: the main listener's host). TLS and api_key apply as on HTTP.
  int32_t grpc_port = -1;
  std::string grpc_host;
  // A gRPC message larger than this is refused (RESOURCE_EXHAUSTED); gRPC's own default.
  size_t grpc_max_message_bytes = 4 << 20;
  // Memory gRPC's transport may hold for incoming messages, every call together (its resource
  // quota): ten concurrent 100 MB messages then grow the process by about 60 MB.
  size_t grpc_memory_bytes = 24 << 20;
  // Web origins whose pages may call the gateway ("*": any; empty: no CORS), app/cors.h.
  std::vector<std::string> cors_allowed_origins;

  // Fleet
  std::vector<std::string> worker_urls;
  std::vector<ExplicitKvEndpoint> kv_endpoints;
  size_t max_workers = 1024;  // POST /workers beyond this is refused

  // Prefill/decode disaggregation (--pd-disaggregation): every generation is prefilled on a
  // prefill worker and decoded on a decode worker, SGLang's way: the request goes to both at once
  // with a bootstrap room that joins them (the decode fetches the room's KV from the prefill).
  struct PrefillWorker {
    std::string url;
    uint16_t bootstrap_port = 0;  // 0: none given
  };
  bool pd_disaggregation = false;
  // How a pair works: SGLang's (both at once, joined by a bootstrap room) or vLLM's (the prefill
  // first, with kv_transfer_params, then the decode with what the prefill answered).
  enum class PdProtocol { kSglang, kVllm };
  PdProtocol pd_protocol = PdProtocol::kSglang;
  std::vector<PrefillWorker> prefill_workers;
  std::vector<std::string> decode_workers;
  policy::PolicyKind prefill_policy = policy::PolicyKind::kCacheAware;
  policy::PolicyKind decode_policy = policy::PolicyKind::kPowerOfTwo;
  // The prefill side's queue gate (cache_aware's overload.waiting_requests there; nullopt: off). A
  // prefill worker's queue is all it does, and the expected wait already prices it: a count gate
  // there sends requests from their cache to longer waits.
  std::optional<uint32_t> prefill_overload_waiting_requests;
  // The decider: a request whose chosen decode worker already holds all but this many of its
  // prompt tokens (0: off), or at least this share of them (0: off), goes to the decode worker
  // alone, which prefills the rest itself and no KV is transferred. vLLM engines with kv_role
  // kv_both can; SGLang's decode workers cannot (refused with --pd-protocol sglang).
  uint32_t pd_local_prefill_tokens = 0;
  double pd_local_prefill_share = 0;
  // The decider by load: a request also goes to its decode worker alone when that worker's
  // expected wait before the first token (its own queued prefill and the prompt's tokens it does
  // not hold) is under this times the pair's (the prefill worker's queue and the tokens it does
  // not hold). 0: off; 1: whichever starts sooner; below 1 favours the pair, whose decode streams
  // no prefill interrupts.
  double pd_local_prefill_wait_ratio = 0;
  bool pd_local_prefill_by_cache() const {
    return pd_local_prefill_tokens > 0 || pd_local_prefill_share > 0;
  }
  bool pd_local_prefill_by_wait() const { return pd_local_prefill_wait_ratio > 0; }

  // Kubernetes pod discovery (app/pod_discovery.h): workers are the serving pods the selectors
  // match (a label selector as kubectl takes it; in a disaggregated fleet one per role), at
  // http://POD_IP:discovery_port.
  bool service_discovery = false;
  std::string selector;
  std::string prefill_selector;
  std::string decode_selector;
  std::string discovery_namespace;  // empty: the gateway pod's own, else "default"
  uint16_t discovery_port = 8000;
  std::string kubeconfig;  // empty: the pod's service account
  // Where the pod's service account is mounted (its token, ca.crt and namespace); no flag, the
  // standard path always, tests point it at their own.
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";

  // Routing
  policy::PolicyKind policy = policy::PolicyKind::kCacheAware;
  policy::CacheAwareConfig cache_aware;
  index::IndexKind kv_index = index::IndexKind::kChain;
  bool kv_events = true;
  // Read every worker's KV events through a kvgate relay (its HOST:PORT) instead of subscribing to
  // the engines; empty: subscribe directly.
  std::string kv_events_relay;
  uint32_t default_block_size = 16;  // until the workers report theirs
  uint64_t hash_seed = kDefaultHashSeed;
  std::string routing_key_header = "x-routing-key";
  // Route to a worker's data-parallel rank (each has its own KV cache) and pin it with
  // X-Data-Parallel-Rank; applies to workers that report more than one rank.
  bool dp_aware = true;

  // State sync between gateway replicas (sync/state_sync.h, app/fleet_sync.h): the Redis URL
  // (empty: off), the namespace replicas of one fleet share, how often to sync and how long an
  // entry outlives its last refresh (0: 3 periods). The password may come from a file or the
  // KVGATE_STATE_SYNC_PASSWORD environment variable instead of the URL. The replica's id (empty:
  // host name, port and a random suffix) names its entries.
  std::string state_sync_url;
  std::string state_sync_namespace = "kvgate";
  std::chrono::milliseconds state_sync_period{1000};
  std::chrono::milliseconds state_sync_ttl{0};
  std::string state_sync_password_file;
  std::string state_sync_replica_id;

  // Event ingestion
  size_t event_threads = 1;
  size_t event_lanes = 2;
  KvEventBounds kv_event_bounds = default_kv_event_bounds();

  // Upstream
  // The timeouts are backstops: the liveness tracker takes a frozen or wedged worker out within
  // seconds and moves its waiting requests elsewhere. They bound what it cannot see (a fleet of
  // one, a worker slow but not stopped). A non-streamed answer is whole only at its end: 8k
  // tokens at 15 tokens/s take 9 minutes. A stream's first token waits for the queue and the
  // prefill: a 128k-token prompt at 5k tokens/s is 26 s, 120 s leaves room for a queue. Between
  // two tokens of a running stream engines take milliseconds; a minute of silence is a fault.
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{600'000};     // a whole non-streamed answer
  std::chrono::milliseconds first_byte_timeout{120'000};  // a stream's head and first token
  std::chrono::milliseconds stream_idle_timeout{60'000};  // between two events of a stream
  // A worker's answer, streamed or whole, in bytes: past it the stream ends with an error event
  // (a whole answer fails). 64 MiB holds a 128k-token answer with top-5 logprobs.
  uint64_t max_answer_bytes = 64 << 20;
  uint32_t max_retries = 3;
  std::chrono::milliseconds retry_initial_backoff{50};
  std::chrono::milliseconds retry_max_backoff{2'000};
  size_t idle_connections_per_worker = 64;  // per executor thread
  // Pooled connections idle longer than this are closed, never reused: below the engines' own
  // keep-alive timeout (uvicorn's, which vLLM and SGLang use, is 5 s), so the gateway never sends
  // a request into a connection the engine is closing.
  std::chrono::milliseconds upstream_idle_timeout{4'000};

  // Worker state
  std::chrono::milliseconds health_check_interval{2'000};  // 0: off (workers healthy at once)
  std::chrono::milliseconds health_check_timeout{2'000};
  workers::HealthConfig health;
  workers::BreakerConfig breaker;
  workers::LivenessConfig liveness;
  // A worker whose engine-reported cached tokens agree with the index's prediction less than this
  // (workers/cache_agreement.h) is named in a warning (0: never).
  double cache_agreement_warn_below = 0.9;
  // How each worker's prefill rate is learned (the prior is cache_aware.prefill_tokens_per_second).
  Duration prefill_rate_half_life = std::chrono::seconds(30);  // 0: the prior always
  std::chrono::milliseconds load_poll_interval{500};           // 0: off
  std::chrono::milliseconds discovery_retry{1'000};

  // The --config file the flags came from ("" when none).
  std::string config_file;

  // Logging
  std::string log_level = "info";
  std::string log_format = "text";

  // Flags given that kvgate accepts and ignores (other gateways' tuning knobs), for a warning each.
  std::vector<std::string> ignored_flags;
  // Flags given whose meaning differs from another router's flag of the same name: a warning
  // each at start, so a launch line carried over says what changed.
  std::vector<std::string> launch_warnings;
};

// The configuration a command line gives, with the --config file it names beneath it (flags on
// the line win over the file's keys).
// Each flag given, on the line or in the file, by its name without dashes: the values as given
// (a reload compares them to see what changed).
using FlagValues = std::map<std::string, std::vector<std::string>>;
struct LoadedConfig {
  GatewayConfig config;
  FlagValues values;
  // Set when the line asked for --help or --version: printed, exit with this status.
  std::optional<int> exit_code;
};
// Parses kvgate's arguments (without the program's name). An error says which flag or key is
// wrong, in words for the operator.
Result<LoadedConfig> load_config(const std::vector<std::string>& args);

// Registers every flag on `app`, writing into `config`; call validate() after parsing.
void add_flags(CLI::App& app, GatewayConfig& config);
// Checks cross-flag rules and parses what CLI11 stores as text. Call after app.parse().
Status finish_config(GatewayConfig& config);

// A --prefill value: URL [BOOTSTRAP_PORT]. Throws CLI::ValidationError naming the flag.
GatewayConfig::PrefillWorker parse_prefill_worker(const std::vector<std::string>& spec);

}  // namespace kvgate::app
