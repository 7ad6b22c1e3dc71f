// kvgate's fleet flags: the workers and how they are found, prefill/decode pairs, pod discovery,
// state sync, the KV event intake, requests to the workers and each worker's state.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "app/config_flags.h"
#include "app/flag_helpers.h"
#include "kvgate/policy/policy.h"

namespace kvgate::app {
namespace {

// Headers kvgate never passes on as a client sent them: the message's framing and the hop's own
// (a smuggled length), the credentials (--forward-client-authorization decides) and kvgate's.
constexpr std::string_view kUnforwardable[] = {"authorization",
                                               "connection",
                                               "content-length",
                                               "content-type",
                                               "cookie",
                                               "host",
                                               "keep-alive",
                                               "proxy-authorization",
                                               "te",
                                               "trailer",
                                               "transfer-encoding",
                                               "upgrade",
                                               "x-request-id",
                                               "x-data-parallel-rank"};

void add_forward_headers_flag(CLI::App& app, GatewayConfig& c) {
  app.add_option_function<std::vector<std::string>>(
         "--forward-headers",
         [&c](std::vector<std::string> names) {
           c.forward_headers.clear();
           for (std::string& n : names) {
             std::transform(n.begin(), n.end(), n.begin(),
                            [](unsigned char ch) { return std::tolower(ch); });
             if (n.empty() || n == "none") continue;
             const bool token = std::all_of(n.begin(), n.end(), [](char ch) {
               return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_';
             });
             if (!token)
               throw CLI::ValidationError("--forward-headers", "'" + n + "' is not a header name");
             if (std::find(std::begin(kUnforwardable), std::end(kUnforwardable), n) !=
                     std::end(kUnforwardable) ||
                 n.rfind("x-kvgate-", 0) == 0 || n.rfind("proxy-", 0) == 0) {
               throw CLI::ValidationError("--forward-headers", n + " is never passed on as sent");
             }
             c.forward_headers.push_back(n);
           }
         },
         "Client headers passed on to workers as sent (besides x-request-id, which always is): "
         "trace context and what engines read, e.g. x-trace-id openai-organization openai-beta; "
         "'none' for none. Framing, hop, credential and kvgate's own headers are refused")
      ->default_str("traceparent tracestate")
      ->group("Upstream");
}

// The workers given on the command line.
void add_fleet_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--worker-urls", c.worker_urls,
                 "Engine workers to route to, as http://HOST:PORT (http://USER:PASSWORD@HOST:PORT "
                 "sends those credentials to that worker; they are never shown)")
      ->group("Fleet");
  app.add_option("--max-workers", c.max_workers,
                 "Workers the fleet may hold; POST /workers beyond is refused (409)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20))
      ->group("Fleet");
  app.add_option_function<std::vector<std::string>>(
         "--kv-events-endpoint",
         [&c](const std::vector<std::string>& specs) {
           for (const auto& s : specs) c.kv_endpoints.push_back(parse_kv_endpoint(s));
         },
         "A worker's KV event stream given explicitly instead of discovered: "
         "WORKER_URL=tcp://HOST:PORT[,replay=tcp://HOST:PORT][,topic=T][,rank=N] (repeat per rank)")
      ->group("Fleet");
}

// Sharing the fleet with replicas through Redis.
void add_state_sync_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--state-sync", c.state_sync_url,
                 "Share the fleet with the other gateway replicas through this Redis: "
                 "redis://[user:password@]HOST:PORT[/DB] (a Redis Cluster works too). Workers "
                 "added or removed on one replica reach the others within a period, and each "
                 "replica's in-flight requests count in every replica's routing and overload rule. "
                 "Requests never wait on Redis; without it a replica routes on its own state")
      ->group("State sync");
  app.add_option("--state-sync-namespace", c.state_sync_namespace,
                 "The replicas of one fleet share this namespace (keys kvgate:{NAME}:...)")
      ->capture_default_str()
      ->group("State sync");
  app.add_option_function<double>(
         "--state-sync-period-secs",
         [&c](double s) {
           positive_seconds(s, "--state-sync-period-secs");
           if (s < 0.01) throw CLI::ValidationError("--state-sync-period-secs", "must be >= 0.01");
           c.state_sync_period = seconds(s);
         },
         "How often a replica pulls its peers' state and pushes what changed of its own (±10% "
         "jitter)")
      ->default_str("1")
      ->group("State sync");
  app.add_option_function<double>(
         "--state-sync-ttl-secs",
         [&c](double s) {
           positive_seconds(s, "--state-sync-ttl-secs");
           c.state_sync_ttl = seconds(s);
         },
         "How long a replica's entries outlive its last refresh: a replica gone for this long "
         "no longer counts (0: three periods)")
      ->default_str("0")
      ->group("State sync");
  app.add_option("--state-sync-password-file", c.state_sync_password_file,
                 "Read the Redis password from this file (else KVGATE_STATE_SYNC_PASSWORD, else "
                 "the URL); it is never logged")
      ->group("State sync");
  app.add_option("--state-sync-replica-id", c.state_sync_replica_id,
                 "This replica's name in the shared state (default: host name, port and a random "
                 "suffix)")
      ->group("State sync");
}

// The KV-event side's threads and its intake bounds.
void add_kv_event_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--event-threads", c.event_threads, "Threads that receive and decode KV events")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->group("KV events");
  app.add_option("--event-lanes", c.event_lanes, "Threads that apply KV events to the index")
      ->capture_default_str()
      ->check(CLI::Range(1, 256))
      ->group("KV events");
  add_kv_event_bound_flags(app, c.kv_event_bounds, /*index_bounds=*/true);
}

// Requests to workers: timeouts, credentials, retries, pooled connections.
void add_upstream_flags(CLI::App& app, GatewayConfig& c) {
  add_seconds(app, "--connect-timeout-secs", c.connect_timeout, "Connecting to a worker",
              "Upstream");
  app.add_option("--worker-ca-path", c.worker_ca_path,
                 "PEM roots that https:// workers' certificates must chain to (default: the "
                 "system's roots); the certificate must also name the worker's host")
      ->check(CLI::ExistingFile)
      ->group("Upstream");
  app.add_option("--worker-api-key", c.worker_api_key,
                 "The workers' own key (engines started with --api-key): every request kvgate "
                 "sends a worker carries \"Authorization: Bearer KEY\" (forwarded requests, "
                 "health checks, discovery, load polls). A worker with credentials of its own "
                 "(user:password@ in its URL, or \"api_key\" in POST /workers) gets those "
                 "instead. Also from $KVGATE_WORKER_API_KEY. Never logged or shown")
      ->envname("KVGATE_WORKER_API_KEY")
      ->group("Upstream");
  app.add_flag("--forward-client-authorization", c.forward_client_authorization,
               "Pass each client's own Authorization header on to workers without credentials "
               "of their own (engines that check per-user keys). Without this flag a client's "
               "header reaches no worker while kvgate checks keys (--api-key), so the gateway's "
               "key never leaves it; without --api-key the header is always passed on")
      ->group("Upstream");
  add_forward_headers_flag(app, c);
  add_seconds(
      app, "--request-timeout-secs", c.request_timeout,
      "A whole answer, streamed or not, from the request's start (8k tokens at 15 tokens/s take "
      "9 minutes); a stream past it ends with an error event",
      "Upstream");
  add_seconds(
      app, "--first-byte-timeout-secs", c.first_byte_timeout,
      "A stream's first token: queueing plus prefill (a 128k-token prompt at 5k tokens/s is 26 s)",
      "Upstream");
  add_seconds(
      app, "--stream-idle-timeout-secs", c.stream_idle_timeout,
      "Silence allowed between two events of a running stream (bytes that end no event, such "
      "as a trickle or comments, do not count); also the rest of a whole answer once its first "
      "bytes came",
      "Upstream");
  app.add_option(
         "--max-answer-bytes", c.max_answer_bytes,
         "A worker's answer, streamed or whole, in bytes; past it a stream ends with an "
         "error event and a whole answer fails (kvgate_request_errors_total{reason=\"answer_"
         "too_large\"})")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group("Upstream");
  app.add_option(
         "--max-retries,--retry-max-retries", c.max_retries,
         "Retries on another worker after a connection error, 408, 429 or 5xx, before the first "
         "byte reached the client")
      ->capture_default_str()
      ->group("Upstream");
  add_seconds(
      app, "--upstream-idle-timeout-secs", c.upstream_idle_timeout,
      "Pooled keep-alive connections to workers idle longer than this are closed, not reused; "
      "keep it below the engines' keep-alive timeout (uvicorn's default, used by vLLM and "
      "SGLang, is 5 s)",
      "Upstream");
  app.add_option("--upstream-idle-connections", c.idle_connections_per_worker,
                 "Idle keep-alive connections kept per worker and executor thread")
      ->capture_default_str()
      ->group("Upstream");
  add_seconds(app, "--retry-initial-backoff-secs", c.retry_initial_backoff,
              "First retry delay (doubles, with jitter)", "Upstream");
  add_seconds(app, "--retry-max-backoff-secs", c.retry_max_backoff, "Largest retry delay",
              "Upstream");
}

// Each worker's state: health checks, breaker, liveness, load polls.
void add_worker_flags(CLI::App& app, GatewayConfig& c) {
  add_seconds(
      app, "--health-check-interval-secs", c.health_check_interval,
      "How often each worker's GET /health is probed (0: no probes, workers routable at once)",
      "Workers");
  add_seconds(app, "--health-check-timeout-secs", c.health_check_timeout,
              "A probe slower than this fails", "Workers");
  app.add_option("--health-failure-threshold", c.health.failure_threshold,
                 "Consecutive failed probes that take a worker out of rotation")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000))
      ->group("Workers");
  app.add_option("--health-success-threshold", c.health.success_threshold,
                 "Consecutive passing probes that bring it back")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000))
      ->group("Workers");
  app.add_option(
         "--circuit-breaker-failures,--cb-failure-threshold", c.breaker.consecutive_failures,
         "Consecutive 5xx / timeouts / connection failures that open a worker's circuit breaker "
         "(client 4xx never count; 0 disables)")
      ->capture_default_str()
      ->group("Workers");
  app.add_option_function<double>(
         "--circuit-breaker-open-secs,--cb-timeout-duration-secs",
         [&c](double s) {
           positive_seconds(s, "--circuit-breaker-open-secs");
           c.breaker.open_for = seconds(s);
         },
         "Cool-down before an open breaker lets one trial request through (doubles while it fails)")
      ->default_str("5")
      ->group("Workers");
  app.add_option_function<double>(
         "--worker-wedge-secs",
         [&c](double s) {
           positive_seconds(s, "--worker-wedge-secs");
           c.liveness.wedge = seconds(s);
         },
         "A worker holding streamed requests none of which produced a token for this long is "
         "vetoed as wedged: its waiting requests go elsewhere, its stuck streams end with an "
         "error event, routing avoids it until it generates again (0: off)")
      ->default_str("3")
      ->group("Workers");
  app.add_option("--worker-wedge-prefill-rate", c.liveness.prefill_tokens_per_second,
                 "The slowest prefill, in prompt tokens per second, the wedge rule allows for: a "
                 "streamed request's first token is not awaited before its uncached prompt "
                 "tokens at this rate have passed (a long prompt sends nothing until then); 0: "
                 "none allowed for")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Workers");
  app.add_option_function<double>(
         "--worker-stall-secs",
         [&c](double s) {
           positive_seconds(s, "--worker-stall-secs");
           c.liveness.stall = seconds(s);
         },
         "A worker whose connections fail and that stays silent (no response, KV event or load "
         "report) this long is vetoed as unreachable until it answers again (0: off)")
      ->default_str("2")
      ->group("Workers");
  app.add_option(
         "--cache-agreement-warn-below", c.cache_agreement_warn_below,
         "Name a worker in a warning when the prompt tokens its engine reports cached "
         "agree with what the index predicted there less than this (1 - |reported - "
         "predicted| / the larger, over windows of 8,192 tokens): a wrong block size, "
         "hash seed or tokenizer shows up here first (0: never; kvgate_cache_agreement_ratio "
         "per worker either way)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group("Workers");
  add_seconds(
      app, "--load-poll-interval-secs", c.load_poll_interval,
      "How often each worker's load report is polled (GET /load, else its /metrics; 0: off)",
      "Workers");
}

// A policy flag: its name parsed into `kind`.
void add_policy_flag(CLI::App& app, const char* name, policy::PolicyKind& kind, const char* help,
                     const char* group) {
  app.add_option_function<std::string>(
         name,
         [&kind, name](const std::string& s) {
           auto k = policy::parse_policy_kind(s);
           if (!k.ok()) throw CLI::ValidationError(name, std::string(message_of(k.status())));
           kind = *k;
         },
         help)
      ->default_str(std::string(policy::policy_kind_name(kind)))
      ->group(group);
}

// Prefill/decode disaggregation, with the SGLang model gateway's names for it.
void add_pd_flags(CLI::App& app, GatewayConfig& c) {
  constexpr const char* kGroup = "Prefill/decode disaggregation";
  app.add_flag("--pd-disaggregation", c.pd_disaggregation,
               "Prefill each generation on a prefill worker and decode it on a decode worker: "
               "both get the request at once with bootstrap_host, bootstrap_port and a fresh "
               "bootstrap_room (SGLang's protocol); the client gets the decode's answer")
      ->group(kGroup);
  app.add_option_function<std::string>(
         "--pd-protocol",
         [&c](const std::string& s) {
           c.pd_protocol =
               s == "vllm" ? GatewayConfig::PdProtocol::kVllm : GatewayConfig::PdProtocol::kSglang;
         },
         "How a prefill/decode pair works: sglang (both at once, joined by a bootstrap room) or "
         "vllm (the prefill first with kv_transfer_params, as vLLM's NixlConnector expects, then "
         "the decode with what the prefill answered)")
      ->check(CLI::IsMember({"sglang", "vllm"}))
      ->default_str("sglang")
      ->group(kGroup);
  app.add_flag_callback(
         "--vllm-pd-disaggregation",
         [&c] {
           c.pd_disaggregation = true;
           c.pd_protocol = GatewayConfig::PdProtocol::kVllm;
         },
         "--pd-disaggregation --pd-protocol vllm (vLLM router's name for it)")
      ->group(kGroup);
  app.add_option_function<std::vector<std::vector<std::string>>>(
         "--prefill",
         [&c](const std::vector<std::vector<std::string>>& specs) {
           for (const auto& spec : specs) c.prefill_workers.push_back(parse_prefill_worker(spec));
         },
         "A prefill worker: URL [BOOTSTRAP_PORT] (the port its decode peers fetch KV from; "
         "repeat the flag per worker)")
      ->expected(1, 2)
      ->allow_extra_args(false)
      ->group(kGroup);
  app.add_option("--decode", c.decode_workers, "A decode worker's URL (repeat per worker)")
      ->group(kGroup);
  app.add_option("--pd-local-prefill-tokens", c.pd_local_prefill_tokens,
                 "Send a request to its decode worker alone, with no prefill worker and no KV "
                 "transfer, when that worker's cache (from its KV events) lacks at most this many "
                 "of the prompt's tokens (0: never; vLLM kv_both engines only). 1024, with "
                 "--pd-local-prefill-wait-ratio 1 and --decode-policy cache_aware, made 43% "
                 "fewer KV transfers on a contended conversation replay")
      ->capture_default_str()
      ->group(kGroup);
  app.add_option("--pd-local-prefill-share", c.pd_local_prefill_share,
                 "Likewise when the decode worker holds at least this share of the prompt "
                 "(0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(kGroup);
  app.add_option(
         "--pd-local-prefill-wait-ratio", c.pd_local_prefill_wait_ratio,
         "Likewise when the decode worker would start the answer sooner: its expected "
         "wait (its own queued prefill and the prompt's tokens it lacks) is under this "
         "times the pair's (the prefill worker's queue and the tokens it lacks). Relieves "
         "a saturated prefill side with idle decode capacity. 0: never; 1: whichever is "
         "sooner (a tie keeps the pair); below 1 keeps more pairs, whose decode streams no "
         "prefill interrupts. A decode worker at the overload thresholds "
         "(--worker-overload-token-usage, --worker-overload-waiting-requests) takes none this "
         "way")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0))
      ->group(kGroup);
  add_policy_flag(app, "--prefill-policy", c.prefill_policy,
                  "How the prefill worker is chosen (cache_aware: where the prompt's prefix is "
                  "cached, from the prefill workers' KV events; or any --policy name)",
                  kGroup);
  app.add_option_function<std::string>(
         "--prefill-overload-waiting-requests",
         count_or_off("--prefill-overload-waiting-requests", 0,
                      c.prefill_overload_waiting_requests),
         "A prefill worker with this many requests waiting is overloaded and steered around (the "
         "prefill side's --worker-overload-waiting-requests; off by default: a prefill worker's "
         "queue is all it does, and the expected wait the prefill policy compares counts it)")
      ->default_str("off")
      ->group(kGroup);
  add_policy_flag(app, "--decode-policy", c.decode_policy,
                  "How the decode worker is chosen (power_of_two: the less loaded of two; or any "
                  "--policy name)",
                  kGroup);
}

void add_discovery_flags(CLI::App& app, GatewayConfig& c) {
  static constexpr const char* kGroup = "Kubernetes pod discovery";
  // SMG's --selector takes its terms as separate words or comma-joined; both become one selector.
  const auto joined = [](std::string* out) {
    return [out](const std::vector<std::string>& terms) {
      for (const std::string& t : terms) out->append(out->empty() ? "" : ",").append(t);
    };
  };
  app.add_flag("--service-discovery", c.service_discovery,
               "Workers are the Kubernetes pods --selector matches (Running, Ready, with an IP), "
               "followed through the API server's watch; they join --worker-urls and POST /workers")
      ->group(kGroup);
  app.add_option_function<std::vector<std::string>>("--selector", joined(&c.selector),
                                                    "The worker pods' label selector, as kubectl "
                                                    "takes it (app=sglang,tier!=canary, env in "
                                                    "(prod,staging), !legacy)")
      ->expected(1, -1)
      ->group(kGroup);
  app.add_option_function<std::vector<std::string>>(
         "--prefill-selector", joined(&c.prefill_selector),
         "With --pd-disaggregation: the prefill pods' selector (their bootstrap port from the "
         "kvgate.io/bootstrap-port annotation)")
      ->expected(1, -1)
      ->group(kGroup);
  app.add_option_function<std::vector<std::string>>(
         "--decode-selector", joined(&c.decode_selector),
         "With --pd-disaggregation: the decode pods' selector")
      ->expected(1, -1)
      ->group(kGroup);
  app.add_option("--service-discovery-namespace", c.discovery_namespace,
                 "The namespace the pods are in (default: the gateway pod's own, else default)")
      ->group(kGroup);
  app.add_option("--service-discovery-port", c.discovery_port,
                 "The port the engines serve on in each pod")
      ->capture_default_str()
      ->group(kGroup);
  app.add_option("--kubeconfig", c.kubeconfig,
                 "Reach the API server as this kubeconfig says (default: the pod's service "
                 "account, KUBERNETES_SERVICE_HOST and _PORT)")
      ->group(kGroup);
}

}  // namespace

void add_fleet_flag_groups(CLI::App& app, GatewayConfig& c) {
  add_fleet_flags(app, c);
  add_pd_flags(app, c);
  add_discovery_flags(app, c);
  add_state_sync_flags(app, c);
  add_kv_event_flags(app, c);
  add_upstream_flags(app, c);
  add_worker_flags(app, c);
}

}  // namespace kvgate::app
