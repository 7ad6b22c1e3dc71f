// kvgate's command line: every flag of the gateway, by the --help group it shows in. The routing
// and fleet groups are in config_flags_routing.cc and config_flags_fleet.cc.
#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <string>

#include "app/config_flags.h"
#include "app/flag_helpers.h"
#include "app/help_format.h"
#include "kvgate/app/config.h"

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
  add_routing_flag_groups(app, c);
  add_logging_flags(app, c);
  add_fleet_flag_groups(app, c);
  add_compatibility_flags(app, c);
}

}  // namespace kvgate::app
