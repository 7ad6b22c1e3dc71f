// kvgate's command line: every flag of the gateway, by the --help group it shows in.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include "app/flag_helpers.h"
#include "app/help_format.h"
#include "kvgate/app/config.h"
#include "kvgate/index/indexer.h"
#include "kvgate/policy/policy.h"

namespace kvgate::app {
namespace {

// Where kvgate listens and on which threads; its other listeners; its drain.
void add_listener_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--host", c.host, "Address to listen on")
      ->capture_default_str()
      ->group("Listening");
  app.add_option("--port", c.port, "Port to listen on (0: any free port, printed at start)")
      ->capture_default_str()
      ->group("Listening");
  app.add_option("--threads", c.threads,
                 "Executor threads for HTTP and upstream I/O (0: one per core)")
      ->capture_default_str()
      ->group("Listening");
  CLI::Option* pin =
      app.add_option("--pin-threads", c.pin_threads,
                     "Pin each executor thread to one CPU: auto (only under the per-node layout, "
                     "i.e. several NUMA nodes or --numa-topology; on one node the OS places the "
                     "threads, which keeps cores shared with other busy processes balanced), on "
                     "(one node too: thread i on the i-th CPU it may use) or off. Under the "
                     "per-node layout threads stay on their node's CPUs whatever this says "
                     "(kvgate_executor_threads_pinned)")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "on", "off"}))
          ->group("Listening");
  app.add_flag_function(
         "--no-pin-threads", [&c](int64_t) { c.pin_threads = "off"; },
         "The same as --pin-threads off")
      ->excludes(pin)
      ->group("Listening");
  app.add_option("--numa", c.numa,
                 "On a machine with several NUMA nodes, give each node its own executor threads "
                 "(on its CPUs), its own shard of the KV index (in its memory) and the event "
                 "lanes of the workers placed on it (worker id modulo nodes); a request runs on "
                 "the node whose thread took its connection and looks up every shard: auto "
                 "(libnuma's nodes; one node changes nothing) or off (kvgate_numa_nodes)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "off"}))
      ->group("Listening");
  app.add_option("--numa-topology", c.numa_topology,
                 "Describe the nodes instead of asking libnuma: CPU lists separated by ';', "
                 "e.g. \"0-3;4-7\" (memory is not bound to a described node); \"0;1\" runs the "
                 "per-node layout on two CPUs of a one-node machine")
      ->group("Listening");
  app.add_option_function<double>(
         "--shutdown-grace-period-secs",
         [&c](double s) {
           positive_seconds(s, "--shutdown-grace-period-secs");
           c.shutdown_grace_period = seconds(s);
         },
         "On SIGTERM or SIGINT: /readiness answers 503, new requests get 503, and requests in "
         "flight have this long to finish; then streams end with an error event and the rest "
         "with a 503, and kvgate exits 0. A second signal exits at once, with status 1. SIGHUP "
         "never stops kvgate (it is logged)")
      ->default_str("180")
      ->group("Listening");
  app.add_option("--prometheus-port", c.prometheus_port,
                 "Also serve GET /metrics on this port, a listener of its own that scrapes reach "
                 "when the main port is saturated or closed to them (0: none; the main port "
                 "serves /metrics either way)")
      ->capture_default_str()
      ->group("Listening");
  app.add_option("--prometheus-host", c.prometheus_host,
                 "Address of the --prometheus-port listener (default: the --host address)")
      ->group("Listening");
  app.add_option("--grpc-port", c.grpc_port,
                 "Also serve the gRPC API (kvgate.v1.Gateway: token-in/token-out Generate, "
                 "Tokenize, ListModels, ListWorkers; grpc.health.v1 and reflection) on this port, "
                 "routed exactly as HTTP requests are; --api-key and TLS apply to it too (-1: off; "
                 "0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 65535))
      ->group("Listening");
  app.add_option("--grpc-host", c.grpc_host,
                 "Address of the --grpc-port listener (default: the --host address)")
      ->group("Listening");
  app.add_option(
         "--cors-allowed-origins", c.cors_allowed_origins,
         "Web origins (scheme://host[:port], or * for any) whose pages may call the "
         "gateway from a browser: answers carry CORS headers and OPTIONS preflights get "
         "204. Several after the flag, comma-separated, or the flag repeated. Default: none")
      ->delimiter(',')
      ->group("Listening");
}

// What clients may hold: bodies, connections, slots, time, gRPC messages.
void add_client_bound_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--max-payload-size", c.max_payload_bytes,
                 "Largest request body in bytes; larger gets 413")
      ->capture_default_str()
      ->group("Listening");
  app.add_option("--max-connections", c.max_connections,
                 "Client connections at once (0: half the file-descriptor limit). At the limit the "
                 "longest-idle connection is closed; 32 more stay reserved for /health, "
                 "/readiness, /liveness and /metrics")
      ->capture_default_str()
      ->group("Listening");
  app.add_option("--max-inflight-body-bytes", c.max_inflight_body_bytes,
                 "Request bodies held at once, in bytes (a body is held until its request ends); "
                 "a request beyond gets 429 (413 if it alone is larger) before its body is read. "
                 "The default keeps a flood of maximal bodies under 200 MB; a gateway with "
                 "thousands of long prompts in flight at once (1,000 of 100 KB hold 100 MB) "
                 "raises it")
      ->capture_default_str()
      ->group("Listening");
  add_seconds(app, "--client-read-timeout-secs", c.client_read_timeout,
              "Reading a client's request, from its first byte to its body's end (a client that "
              "trickles its request is cut off)",
              "Listening");
  add_seconds(app, "--client-write-timeout-secs", c.client_write_timeout,
              "Writing one answer, or one piece of a stream, to a client that does not read",
              "Listening");
  add_seconds(app, "--client-idle-timeout-secs", c.client_idle_timeout,
              "A kept-alive client connection's wait for its next request (the keep-alive "
              "timeout)",
              "Listening");
  app.add_option("--max-concurrent-requests", c.max_concurrent_requests,
                 "Generation requests this gateway runs at once; the next --queue-size wait for a "
                 "slot and the rest get 429 (0: no limit; each worker's overload gate still "
                 "sheds what no worker can take)")
      ->capture_default_str()
      ->group("Listening");
  app.add_option("--queue-size", c.queue_size,
                 "Requests that wait for a slot when --max-concurrent-requests run")
      ->capture_default_str()
      ->group("Listening");
  app.add_option_function<double>(
         "--queue-timeout-secs",
         [&c](double s) {
           c.queue_timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
         },
         "How long a request waits for a slot before it gets 429")
      ->default_str("60")
      ->check(CLI::PositiveNumber)
      ->group("Listening");
  app.add_option("--reserved-critical-slots", c.reserved_critical_slots,
                 "Of --max-concurrent-requests, slots only critical requests take (a key's "
                 "priority, or x-kvgate-priority)")
      ->capture_default_str()
      ->group("Listening");
  app.add_option_function<double>(
         "--priority-starvation-secs",
         [&c](double s) {
           c.priority_starvation = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
         },
         "A request queued this long goes before every class (0: never)")
      ->default_str("30")
      ->check(CLI::NonNegativeNumber)
      ->group("Listening");
  app.add_option("--fair-share-output-weight", c.fair_share_output_weight,
                 "Within a class the tenant served least goes next; an output token counts this "
                 "many prompt tokens")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Listening");
  app.add_option("--grpc-max-message-bytes", c.grpc_max_message_bytes,
                 "A larger gRPC request is refused with RESOURCE_EXHAUSTED (a 4 MiB prompt is "
                 "about a million tokens)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->group("Listening");
  app.add_option("--grpc-memory-bytes", c.grpc_memory_bytes,
                 "Memory gRPC may hold for incoming messages, every call together (its resource "
                 "quota); bounds what oversized or many messages cost (process_resident_memory_"
                 "bytes shows it)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1} << 20, size_t{1} << 40))
      ->group("Listening");
}

// Who may call: keys and TLS.
void add_access_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--api-key", c.api_key,
                 "Clients must send \"Authorization: Bearer KEY\" (401 otherwise); also from "
                 "$KVGATE_API_KEY, which keeps the key out of the process list. Never logged")
      ->envname("KVGATE_API_KEY")
      ->group("Listening");
  app.add_option("--api-keys-file", c.api_keys_file,
                 "Client keys as YAML (keys: [{key or key_sha256, tenant, priority, rpm, tpm, "
                 "models}]): each key's tenant, class and limits; a reload reads it again")
      ->check(CLI::ExistingFile)
      ->group("Listening");
  app.add_option("--tenant-series-limit", c.tenant_series_limit,
                 "Tenants with kvgate_tenant_* series of their own (in file order); the rest "
                 "share \"other\"")
      ->capture_default_str()
      ->group("Listening");
  app.add_option("--model-series-limit", c.model_series_limit,
                 "Models with request series of their own (kvgate_requests_total{model}, "
                 "kvgate_completion_tokens_total), in the order of their first request; the "
                 "rest, and names no worker serves, share \"other\"")
      ->capture_default_str()
      ->group("Listening");
  app.add_option("--admin-api-key", c.admin_api_key,
                 "Key for the control routes (POST and DELETE /workers); also from "
                 "$KVGATE_ADMIN_API_KEY. Without one, control routes answer only 127.0.0.1 / ::1")
      ->envname("KVGATE_ADMIN_API_KEY")
      ->group("Listening");
  app.add_option("--tls-cert-path", c.tls_cert_path,
                 "PEM certificate chain: with --tls-key-path the gateway serves HTTPS (TLS 1.2 and "
                 "later) on --port and --prometheus-port")
      ->check(CLI::ExistingFile)
      ->group("Listening");
  app.add_option("--tls-key-path", c.tls_key_path, "PEM private key of --tls-cert-path")
      ->check(CLI::ExistingFile)
      ->group("Listening");
  app.add_flag("--tls-session-tickets", c.tls_session_tickets,
               "Issue TLS session tickets, so clients resume without a full handshake (off: "
               "none; TLS 1.2 takes forward-secret AEAD suites only either way)")
      ->group("Listening");
}

// How prompts become the engines' token ids.
void add_prompt_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--tokenizer,--tokenizer-path,--model-path", c.tokenizers,
                 "The model's tokenizer.json or model folder, so prompts route on the ids the "
                 "engines compute; chat messages are rendered with the chat template beside it "
                 "(chat_template.jinja or tokenizer_config.json). MODEL=PATH for one model of "
                 "several (repeatable). Default: the built-in test tokenizer, which only the mock "
                 "engine shares. (--tokenizer-path and --model-path: SGLang's router's names)")
      ->group("Routing");
  app.add_option("--chat-template", c.chat_templates,
                 "A Jinja chat template file used instead of the one the --tokenizer's model "
                 "ships (as vLLM's --chat-template); MODEL=FILE for one model of several")
      ->check([](const std::string& spec) {
        const std::string file =
            spec.substr(spec.find('=') == std::string::npos ? 0 : spec.find('=') + 1);
        return std::filesystem::exists(file) ? std::string() : "no such file: " + file;
      })
      ->group("Routing");
  app.add_flag_function(
         "--no-answer-prewarm", [&c](int64_t) { c.answer_prewarm = false; },
         "Do not encode chat answers ahead of the next turn. By default, with a --tokenizer that "
         "has a chat template, each answer is rendered and encoded on a low-priority thread after "
         "it is sent, so the client's next turn (which resends it) encodes only its new question "
         "(kvgate_tokenizer_answers_total)")
      ->group("Routing");
  app.add_option("--max-model-len", c.max_model_len,
                 "Prompt tokens at most, for workers that do not report their context length in "
                 "/v1/models (0: no bound then); a longer prompt gets 400 without being "
                 "tokenized to its end")
      ->capture_default_str()
      ->group("Routing");
}

// The policy, the index and what it hashes.
void add_routing_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option_function<std::string>(
         "--policy",
         [&c](const std::string& s) {
           auto k = policy::parse_policy_kind(s);
           if (!k.ok()) throw CLI::ValidationError("--policy", std::string(message_of(k.status())));
           c.policy = *k;
         },
         "Routing policy: cache_aware (prefix affinity with load gates), round_robin, random, "
         "power_of_two, least_load, consistent_hashing (on --routing-key-header)")
      ->default_str("cache_aware")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--kv-index",
         [&c](const std::string& s) {
           auto k = index::parse_index_kind(s);
           if (!k.ok())
             throw CLI::ValidationError("--kv-index", std::string(message_of(k.status())));
           c.kv_index = *k;
         },
         "KV index backend: chain (lock-free, compact), positional (the baseline) or reference "
         "(the obviously-correct definition, slow)")
      ->default_str("chain")
      ->group("Routing");
  app.add_flag_function(
         "--no-kv-events", [&c](int64_t) { c.kv_events = false; },
         "Do not subscribe to KV events; predict each worker's cache from the gateway's own "
         "routing "
         "decisions (approximate, see --prediction-ttl-secs)")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--kv-events-relay",
         [&c](const std::string& url) {
           constexpr std::string_view kScheme = "grpc://";
           if (url.rfind(kScheme, 0) != 0 || url.size() == kScheme.size() ||
               url.find(':', kScheme.size()) == std::string::npos) {
             throw CLI::ValidationError("--kv-events-relay",
                                        "expected grpc://HOST:PORT, got " + url);
           }
           c.kv_events_relay = url.substr(kScheme.size());
         },
         "Read every worker's KV events through a kvgate relay (`kvgate relay`), "
         "grpc://HOST:PORT, instead of subscribing to each engine; the relay's --engine URLs "
         "must be the workers' URLs. Streams resume from where they were after a break")
      ->group("Routing");
  app.add_option("--block-size", c.default_block_size,
                 "Tokens per KV block used for hashing until the workers report their own")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20))
      ->group("Routing");
  app.add_option("--hash-seed", c.hash_seed,
                 "Seed of the router's block hashes (every replica must agree)")
      ->capture_default_str()
      ->group("Routing");
  app.add_flag_function(
         "--dp-aware", [&c](int64_t) { c.dp_aware = true; },
         "Route to the data-parallel rank that holds the prefix, pinned with the "
         "X-Data-Parallel-Rank header vLLM and SGLang honour (the default for workers reporting "
         "more than one rank)")
      ->group("Routing");
  app.add_flag_function(
         "--no-dp-aware", [&c](int64_t) { c.dp_aware = false; },
         "Route to workers only and let each engine pick the rank (its own balancer ignores "
         "prefixes)")
      ->group("Routing");
  app.add_option("--routing-key-header", c.routing_key_header,
                 "Header consistent_hashing routes on (a session or user id the client sends)")
      ->capture_default_str()
      ->group("Routing");
}

// cache_aware's gates: balance, overload, warm-up, predictions.
void add_cache_aware_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option(
         "--balance-abs-threshold", c.cache_aware.balance_abs_threshold,
         "cache_aware spills off the deepest holder when its load exceeds the fleet mean by this "
         "many requests ...")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Routing");
  app.add_option("--balance-rel-threshold", c.cache_aware.balance_rel_threshold,
                 "... and by this factor (of the fleet mean; SGLang's router compares the most "
                 "loaded worker with the least)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Routing");
  app.add_option("--wait-spill-ratio", c.cache_aware.wait_spill_ratio,
                 "cache_aware sends a request elsewhere when the deepest holder's expected wait "
                 "exceeds the least by more than this many times the prefill its deeper match "
                 "saves (a few shared blocks never hold a request behind a long prefill; 0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Routing");
  app.add_option_function<std::string>(
         "--worker-overload-token-usage",
         [&c](const std::string& s) {
           if (s == "off") {
             c.cache_aware.overload.token_usage.reset();
             return;
           }
           double v = 0;
           try {
             v = std::stod(s);
           } catch (...) {
             throw CLI::ValidationError("--worker-overload-token-usage",
                                        "must be a fraction in (0, 1] or 'off'");
           }
           if (!(v > 0 && v <= 1))
             throw CLI::ValidationError("--worker-overload-token-usage",
                                        "must be in (0, 1] or 'off'");
           c.cache_aware.overload.token_usage = v;
         },
         "A worker whose KV cache usage reaches this fraction is overloaded and steered around "
         "('off' "
         "disables)")
      ->default_str("0.8")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--worker-overload-waiting-requests",
         count_or_off("--worker-overload-waiting-requests", 0,
                      c.cache_aware.overload.waiting_requests),
         "A worker with this many requests waiting in its queue is overloaded ('off' disables)")
      ->default_str("8")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--worker-overload-in-flight",
         count_or_off("--worker-overload-in-flight", 1, c.cache_aware.overload.in_flight_requests),
         "A worker (or data-parallel rank) with this many requests in flight from the gateway "
         "fleet is overloaded: this replica's own, plus its peers' with --state-sync. Set it near "
         "the engine's batch capacity plus its queue (vLLM --max-num-seqs plus "
         "--worker-overload-waiting-requests); 'off' disables")
      ->default_str("off")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--worker-max-prefilling",
         count_or_off("--worker-max-prefilling", 1, c.cache_aware.overload.prefilling_requests),
         "Requests of this gateway that may wait for their first token at one worker. A worker "
         "with this many is overloaded (steered around), and when every worker that takes "
         "prompts has this many the next request waits in this gateway's queue, where "
         "--max-concurrent-requests' class and fair-share order hold, instead of in an engine's "
         "queue, where it would be computed beside the others. 1 keeps each engine's prompts "
         "one at a time: what a latency-sensitive tenant needs on a saturated fleet. A whole "
         "answer (not streamed) counts until it ends: the gateway sees no first token. 'off' "
         "disables")
      ->default_str("off")
      ->group("Routing");
  app.add_option("--reserved-critical-prefills", c.reserved_critical_prefills,
                 "Of the places --worker-max-prefilling gives (per worker, times the workers that "
                 "take prompts), those only critical requests take, never all of them: a critical "
                 "prompt that arrives while other classes' prompts fill the fleet starts at once "
                 "instead of after one of them. Size it to the critical prompts computed at once "
                 "(their rate times a prompt's time, with room); kvgate_admission_prefilling "
                 "shows the places taken")
      ->capture_default_str()
      ->group("Routing");
  app.add_flag(
         "--worker-overload-shed", c.cache_aware.shed_when_all_overloaded,
         "When every worker is overloaded, answer 503 instead of sending to the least-loaded one")
      ->group("Routing");
  app.add_option("--warmup-thin-ratio", c.cache_aware.warmup_thin_ratio,
                 "Warm-up: a worker whose index holds less than this share of the fleet's mean is "
                 "thin (an engine back with an empty cache, a new worker) and is sent a share of "
                 "the requests until it fills (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group("Routing");
  app.add_option("--warmup-miss-share", c.cache_aware.warmup_miss_share,
                 "Warm-up: the share of cache misses sent to a thin worker")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group("Routing");
  app.add_option("--warmup-hit-share", c.cache_aware.warmup_hit_share,
                 "Warm-up: the share of cache hits sent to a thin worker (each costs that hit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group("Routing");
  app.add_option("--warmup-max-diversions", c.cache_aware.warmup_max_diversions,
                 "Warm-up: requests a thin worker is sent at most before the rule gives up on it "
                 "(it starts again once the worker was not thin)")
      ->capture_default_str()
      ->group("Routing");
  add_seconds(app, "--prediction-ttl-secs", c.cache_aware.prediction_ttl,
              "Approximate mode: how long a routed prompt is assumed cached on a worker without KV "
              "events",
              "Routing");
}

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

// "host=0.8,disk=0.5": the named tiers' weights over `weights` (the others keep theirs);
// "off": every tier weighs as the device. Throws CLI::ValidationError naming the bad part.
void parse_tier_weights(const std::string& text, std::array<double, index::kTierCount>& weights) {
  const auto fail = [](const std::string& why) {
    throw CLI::ValidationError("--tier-weights", why);
  };
  if (text == "off") {
    weights.fill(1.0);
    return;
  }
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos) fail("'" + part + "' is not TIER=WEIGHT");
    const std::string name = part.substr(0, eq);
    size_t t = 0;
    while (t < index::kTierCount && index::tier_name(static_cast<index::Tier>(t)) != name) ++t;
    if (t == index::kTierCount) fail("'" + name + "' is not a tier (device, host, disk, external)");
    double w = -1;
    try {
      size_t used = 0;
      w = std::stod(part.substr(eq + 1), &used);
      if (used != part.size() - eq - 1) w = -1;
    } catch (...) {
      w = -1;
    }
    if (!(w >= 0 && w <= 1)) fail(name + "'s weight must be a number in [0, 1]");
    if (t == 0 && w != 1) fail("the device's weight is 1: the others are shares of it");
    weights[t] = w;
  }
}

// The cost model's prefill speed: a prior, and how fast each worker's own is learned.
void add_prefill_rate_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--prefill-tokens-per-second", c.cache_aware.prefill_tokens_per_second,
                 "cache_aware's cost model: the prompt tokens per second a worker prefills")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9))
      ->group("Routing");
  app.add_flag("--measured-prefill-rate", c.cache_aware.measured_prefill_rate,
               "cache_aware costs each worker at the prefill rate its streamed requests' first "
               "tokens taught the gateway (kvgate_worker_prefill_tokens_per_second), not "
               "--prefill-tokens-per-second. Off by default: on a replay with half the workers "
               "at half speed it placed conversations worse (docs/benchmarks.md)")
      ->group("Routing");
  add_seconds(app, "--prefill-rate-half-life-secs", c.prefill_rate_half_life,
              "How fast a worker's learned prefill rate forgets its old samples (a worker that "
              "slows under decode-heavy batches is seen within a few half-lives); 0: not learned",
              "Routing");
}

void add_tier_weights_flag(CLI::App& app, GatewayConfig& c) {
  app.add_option_function<std::string>(
         "--tier-weights",
         [&c](const std::string& s) { parse_tier_weights(s, c.cache_aware.tier_weights); },
         "cache_aware: what a matched block held off the device saves, as a share of computing "
         "it (it must be loaded first): TIER=WEIGHT,... over device, host, disk and external; "
         "'off' weighs every tier as the device. A worker's blocks past its device depth count at "
         "the weight of the dearest tier its KV events store on")
      ->default_str("device=1,host=0.8,disk=0.5,external=0.3")
      ->group("Routing");
}

// Blocks in flight (cache_aware, workers with KV events): a dispatched prompt credited to its
// worker until its events can have confirmed it.
void add_pending_flags(CLI::App& app, GatewayConfig& c) {
  add_seconds(app, "--pending-blocks-max-age-secs", c.cache_aware.pending_max_age,
              "Blocks in flight: a routed prompt counts as cached on its worker (for the requests "
              "that share its prefix) until its KV events can have confirmed it, at most this "
              "long; 0: off, and a burst sharing a new prefix is spread before the first events "
              "arrive",
              "Routing");
  add_seconds(app, "--pending-blocks-grace-secs", c.cache_aware.pending_grace,
              "Blocks in flight: how long after its first token a request's prompt still counts "
              "(the KV events' lag; kvgate_events_apply_lag_seconds shows it)",
              "Routing");
  app.add_option("--pending-blocks-max-requests", c.cache_aware.pending_max_requests,
                 "Blocks in flight: requests credited at most (the oldest credit ends first)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group("Routing");
  app.add_option("--pending-blocks-depth-levels", c.cache_aware.pending_depth_levels,
                 "Blocks in flight: a decision counts the credits of the holders at this many of "
                 "the deepest depths credits reach (each level a binary search of the prompt)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group("Routing");
  app.add_option("--pending-blocks-capacity", c.cache_aware.pending_capacity_blocks,
                 "Blocks in flight: blocks credited at most, all requests together")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group("Routing");
}

// The logs: access log, decision headers, the process's own log.
void add_logging_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--access-log", c.access_log,
                 "One line per answered request on stdout (the log stays on stderr): off, text "
                 "or json. Generation requests carry model, worker, rank, matched blocks, "
                 "decision time, TTFT, the wait in the admission queue, duration, attempts and "
                 "request id; json adds the time, "
                 "the client's address and the prompt and completion tokens")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "text", "json"}))
      ->group("Logging");
  app.add_option("--decision-headers", c.decision_headers,
                 "Tell clients why their request went where it did, in an x-kvgate-decision "
                 "answer header (branch, matched blocks, the top candidates with their expected "
                 "waits and loads, the gates that fired): off, request (when the request carries "
                 "x-kvgate-explain: 1) or always. The access log carries the same text when it is "
                 "told (the decision's fields always)")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "request", "always"}))
      ->group("Logging");
  app.add_flag("--expose-worker-header", c.expose_worker_header,
               "Name the worker (its URL), rank and prefill worker on every answer "
               "(x-kvgate-worker, x-kvgate-dp-rank, x-kvgate-prefill-worker). Without it only an "
               "answer whose decision is told (x-kvgate-explain: 1, --decision-headers always) "
               "names them: worker URLs are the fleet's internal addresses")
      ->group("Logging");

  app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error, critical, off")
      ->capture_default_str()
      ->group("Logging");
  app.add_flag_function(
         "--log-json", [&c](int64_t) { c.log_format = "json"; }, "The same as --log-format json")
      ->group("Logging");
  app.add_option("--log-dir", c.log_dir,
                 "Write the log to DIR/kvgate.log and the access log to DIR/access.log, each "
                 "rotated at 100 MiB with five kept, instead of stderr and stdout (created if "
                 "missing)")
      ->group("Logging");
  app.add_option("--log-format", c.log_format, "text or json (one JSON object per line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}))
      ->group("Logging");
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
                 "of the prompt's tokens (0: never; vLLM kv_both engines only)")
      ->capture_default_str()
      ->group(kGroup);
  app.add_option("--pd-local-prefill-share", c.pd_local_prefill_share,
                 "Likewise when the decode worker holds at least this share of the prompt "
                 "(0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
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

void add_compatibility_flags(CLI::App& app, GatewayConfig& c) {
  // Launch lines written for the SGLang model gateway keep working: its names for kvgate's flags
  // are aliases above; these tune its approximate radix tree, which kvgate does not have.
  for (const char* name : {"--cache-threshold", "--eviction-interval-secs", "--max-tree-size"}) {
    app.add_option_function<std::string>(
           name, [&c, name](const std::string&) { c.ignored_flags.emplace_back(name); },
           "Accepted for SGLang model gateway launch lines and ignored with a warning: kvgate's "
           "index follows the engines' KV events and has no approximate tree to tune")
        ->group("Compatibility");
  }
}

}  // namespace

void add_flags(CLI::App& app, GatewayConfig& c) {
  app.description(
      "kvgate: an OpenAI-compatible inference gateway that routes each request to the engine "
      "worker\n"
      "holding the longest prefix of its KV cache, learned exactly from the workers' KV-event "
      "streams,\n"
      "while keeping the fleet balanced and steering around overloaded or failing workers.\n\n"
      "Example: kvgate --port 30000 --worker-urls http://10.0.0.1:8000 http://10.0.0.2:8000\n"
      "Workers are discovered through GET /server_info (KV event endpoints, block size) and "
      "/v1/models;\n"
      "add or remove them at run time with POST/DELETE /workers.\n\n"
      "kvgate relay [FLAGS]: the KV-event relay role instead (kvgate relay --help).\n");
  app.name("kvgate");
  app.formatter(help_formatter());
  add_listener_flags(app, c);
  add_client_bound_flags(app, c);
  add_access_flags(app, c);
  add_prompt_flags(app, c);
  add_routing_flags(app, c);
  add_cache_aware_flags(app, c);
  add_tier_weights_flag(app, c);
  add_prefill_rate_flags(app, c);
  add_pending_flags(app, c);
  add_logging_flags(app, c);
  add_fleet_flags(app, c);
  add_pd_flags(app, c);
  add_discovery_flags(app, c);
  add_state_sync_flags(app, c);
  add_kv_event_flags(app, c);
  add_upstream_flags(app, c);
  add_worker_flags(app, c);
  add_compatibility_flags(app, c);
}

}  // namespace kvgate::app
