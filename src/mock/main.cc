// kvgate-mock: a fleet of simulated vLLM / SGLang engines (docs/mock.md).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "kvgate/core/log.h"
#include "kvgate/mock/fleet.h"

namespace {

using kvgate::mock::EngineConfig;
using kvgate::mock::FleetOptions;

// What the command line says in a form FleetOptions does not take as it is (apply() converts).
struct RawFlags {
  std::string wire = "vllm-map";
  std::string replay_shape = "auto";
  std::string port_file;
  std::string log_level = "info";
  std::string log_format = "text";
  bool no_replay = false;
  bool no_prefix_caching = false;
  bool push_loads = false;
  double push_loads_interval_ms = 250;
  double step_overhead_ms = 6.0;
  double decode_per_seq_us = 40.0;
  double decode_per_ctx_ns = 40.0;
  std::string pd_role = "regular";
  double pd_room_timeout_ms = 30'000;
  double pd_transfer_timeout_ms = 10'000;
  double pd_transfer_ms_per_block = 0.05;
};

void add_fleet_flags(CLI::App& app, FleetOptions& o, RawFlags& raw) {
  auto* fleet_group = "Fleet and ports";
  app.add_option("--workers", o.workers, "Number of engine workers")->group(fleet_group);
  app.add_option("--dp-size", o.dp_size,
                 "Data-parallel ranks per worker, each with its own scheduler, KV pool and event "
                 "stream")
      ->group(fleet_group);
  app.add_option("--model", o.model, "Model name served and reported")->group(fleet_group);
  app.add_option("--host", o.bind_address, "Address to listen on (HTTP and ZMQ)")
      ->group(fleet_group);
  app.add_option("--advertise-host", o.advertise_host,
                 "Host written into the KV endpoints /server_info advertises (default: --host, "
                 "or 127.0.0.1 for a wildcard --host)")
      ->group(fleet_group);
  app.add_option("--http-port", o.http_port, "First worker's HTTP port (0: any free port)")
      ->group(fleet_group);
  app.add_option("--http-ports", o.http_ports, "HTTP port per worker, overriding --http-port")
      ->delimiter(',')
      ->group(fleet_group);
  app.add_option(
         "--kv-port", o.kv_port,
         "Base of the KV-event ports: PUB of holder h at base + 2h, replay at base + 2h + 1 "
         "(0: any free ports)")
      ->group(fleet_group);
  app.add_option("--kv-pub-ports", o.kv_pub_ports,
                 "PUB port per holder (worker-major), overriding --kv-port")
      ->delimiter(',')
      ->group(fleet_group);
  app.add_option("--kv-replay-ports", o.kv_replay_ports,
                 "Replay (ROUTER) port per holder (worker-major), overriding --kv-port")
      ->delimiter(',')
      ->group(fleet_group);
  app.add_flag("--no-replay", raw.no_replay, "Do not open replay sockets")->group(fleet_group);
  app.add_option("--port-file", raw.port_file,
                 "Write the bound ports as JSON to this file once every port is bound")
      ->group(fleet_group);
  app.add_option("--threads", o.threads, "I/O threads shared by the workers")->group(fleet_group);
}

void add_kv_flags(CLI::App& app, FleetOptions& o, RawFlags& raw) {
  EngineConfig& e = o.engine;
  auto* kv = "KV events";
  app.add_option("--kv-events-wire", raw.wire,
                 "Event layout: vllm-array (vLLM <= 0.23), vllm-map (vLLM >= 0.24), sglang "
                 "(array events), sglang-map. vLLM layouts use vLLM's sha256_cbor block hashes, "
                 "SGLang layouts SGLang's sha256")
      ->check(CLI::IsMember({"vllm-array", "vllm-map", "sglang", "sglang-map"}))
      ->group(kv);
  app.add_option("--kv-topic", o.topic, "Topic frame of every KV message (vLLM's default: empty)")
      ->group(kv);
  app.add_option("--replay-shape", raw.replay_shape,
                 "Replay reply frames: topic ([\"\", topic, seq, payload], vLLM >= 0.26), legacy "
                 "([\"\", seq, payload]) or auto (topic for vLLM wires, legacy for SGLang)")
      ->check(CLI::IsMember({"auto", "topic", "legacy"}))
      ->group(kv);
  app.add_option("--replay-buffer-steps", o.replay_buffer_steps, "Batches the replay socket keeps")
      ->group(kv);
  app.add_flag("--push-loads", raw.push_loads,
               "Push each rank's load (running, waiting, KV usage, queued prefill tokens) on its "
               "KV-event socket after its steps and periodically while quiet (topic kvgate-load)")
      ->group(kv);
  app.add_option("--push-loads-interval-ms", raw.push_loads_interval_ms,
                 "How often a quiet rank pushes its load")
      ->check(CLI::PositiveNumber)
      ->group(kv);
  app.add_option("--vllm-hash-seed", e.vllm_hash_seed,
                 "Seed of vLLM's NONE_HASH (PYTHONHASHSEED when set, else vllm-none-hash)")
      ->group(kv);
  app.add_option("--router-hash-seed", e.router_hash_seed,
                 "Seed of the router-side block hashes reported in the engine truth")
      ->group(kv);
}

void add_scheduler_flags(CLI::App& app, FleetOptions& o, RawFlags& raw) {
  EngineConfig& e = o.engine;
  auto* sched = "Scheduler and KV pool";
  app.add_option("--block-size", e.block_size, "Tokens per KV block")->group(sched);
  app.add_option("--num-blocks", e.num_blocks,
                 "KV blocks per rank (default: ~416k tokens, an 8B model on an 80 GB accelerator)")
      ->group(sched);
  app.add_option("--host-blocks", e.host_blocks,
                 "KV blocks of each rank's host (CPU) offload tier: every cached block is copied "
                 "there and a prefix the device evicted loads back from it (default 0: none)")
      ->group(sched);
  app.add_option("--max-num-seqs", e.max_num_seqs, "Running requests per rank at most")
      ->group(sched);
  app.add_option("--max-num-batched-tokens", e.max_num_batched_tokens,
                 "Tokens per scheduler step (chunked prefill budget)")
      ->group(sched);
  app.add_option("--max-model-len", e.max_model_len, "Prompt plus output tokens per request")
      ->group(sched);
  app.add_flag("--no-prefix-caching", raw.no_prefix_caching,
               "Disable prefix caching (and with it every KV event)")
      ->group(sched);
  app.add_option("--vocab", e.vocab, "Vocabulary of the built-in test tokenizer and outputs")
      ->group(sched);
  app.add_option("--tokenizer", o.tokenizer,
                 "A model's tokenizer.json (or its folder): prompts are tokenized as that model's "
                 "engine does (default: the built-in test tokenizer, which the gateway uses "
                 "without its own --tokenizer)")
      ->group(sched);
}

void add_timing_flags(CLI::App& app, FleetOptions& o, RawFlags& raw) {
  kvgate::mock::TimingModel& t = o.engine.timing;
  auto* timing = "Timing model (docs/mock.md)";
  app.add_option("--prefill-tokens-per-s", t.prefill_tokens_per_s, "Prefill throughput")
      ->group(timing);
  app.add_option("--step-overhead-ms", raw.step_overhead_ms,
                 "Fixed cost of every step (weights read once, launch, sampling)")
      ->group(timing);
  app.add_option("--decode-per-seq-us", raw.decode_per_seq_us,
                 "Cost per decoding sequence in a step")
      ->group(timing);
  app.add_option("--decode-per-context-token-ns", raw.decode_per_ctx_ns,
                 "Cost per context token of each decoding sequence (attention KV reads)")
      ->group(timing);
  app.add_option("--worker-speeds", o.worker_speeds,
                 "Each worker's speed as a share of the timing model, cycled over the workers "
                 "(e.g. 1,0.5: every second worker takes twice as long per step)")
      ->delimiter(',')
      ->group(timing);
  app.add_option("--host-load-cost", t.host_load_cost,
                 "Loading a token from the host tier, as a share of computing it")
      ->check(CLI::Range(0.0, 1.0))
      ->group(timing);
  app.add_option("--speedup", t.speedup, "Run this many times faster than real time (> 0)")
      ->group(timing);
}

void add_process_flags(CLI::App& app, FleetOptions& o, RawFlags& raw) {
  auto* proc = "Process";
  app.add_option("--request-records", o.request_records,
                 "Request records kept per worker for /admin/requests")
      ->group(proc);
  app.add_option("--max-body-bytes", o.body_limit, "Largest request body (413 above)")->group(proc);
  app.add_option_function<double>(
         "--keep-alive-timeout-secs",
         [&o](double s) {
           o.keep_alive_timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
         },
         "Close a keep-alive connection idle this long (uvicorn's default, as vLLM and SGLang "
         "serve, is 5)")
      ->default_str("5")
      ->check(CLI::PositiveNumber)
      ->group(proc);
  app.add_option("--tls-cert-path", o.tls_cert_path,
                 "PEM certificate chain: with --tls-key-path every worker serves HTTPS")
      ->check(CLI::ExistingFile)
      ->group(proc);
  app.add_option("--tls-key-path", o.tls_key_path, "PEM private key of --tls-cert-path")
      ->check(CLI::ExistingFile)
      ->group(proc);
  app.add_option("--seed", o.seed, "Seed of the fault hooks' randomness")->group(proc);
  app.add_option("--log-level", raw.log_level, "trace, debug, info, warn, error, off")->group(proc);
  app.add_option("--log-format", raw.log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->group(proc);
}

void add_pd_flags(CLI::App& app, FleetOptions& o, RawFlags& raw) {
  auto* pd = "Prefill/decode disaggregation (SGLang's and vLLM's protocols, docs/mock.md)";
  app.add_option("--pd-role", raw.pd_role,
                 "Every worker's role: regular (whole requests, PD fields ignored), prefill "
                 "(computes the prompt, answers one token, keeps its blocks for a decode) or "
                 "decode (pulls the blocks from the prefill the request names, then generates)")
      ->check(CLI::IsMember({"regular", "prefill", "decode"}))
      ->group(pd);
  app.add_option("--bootstrap-port", o.pd.bootstrap_port,
                 "Prefill: the first worker's bootstrap port (SGLang rooms at GET /room/<room>, "
                 "vLLM transfers at POST /nixl/pull), one per worker counting up (0: any free "
                 "port)")
      ->group(pd);
  app.add_option("--pd-room-timeout-ms", raw.pd_room_timeout_ms,
                 "Prefill: free a ready room or vLLM transfer no decode pulled within this "
                 "(divided by --speedup)")
      ->check(CLI::PositiveNumber)
      ->group(pd);
  app.add_option("--pd-transfer-timeout-ms", raw.pd_transfer_timeout_ms,
                 "Decode: fail a request whose room is not ready, or that finds no KV room "
                 "for its blocks, within this (divided by --speedup)")
      ->check(CLI::PositiveNumber)
      ->group(pd);
  app.add_option("--pd-transfer-ms-per-block", raw.pd_transfer_ms_per_block,
                 "Decode: KV transfer time per block it lacks (2 MiB per 16-token block of an 8B "
                 "model over a 400 Gb/s link; divided by --speedup)")
      ->check(CLI::NonNegativeNumber)
      ->group(pd);
  app.add_option("--pd-decode-local-prefill", o.pd.decode_local_prefill,
                 "Decode: serve a request with no PD field whole, prefill included (vLLM's "
                 "kv_both); false answers it 400")
      ->group(pd);
}

// The flags CLI11 cannot store as they are, converted into `o`.
void apply(const RawFlags& raw, FleetOptions& o) {
  kvgate::mock::TimingModel& t = o.engine.timing;
  o.wire = *kvgate::events::parse_wire_format(raw.wire);
  if (raw.push_loads) {
    o.push_loads_interval =
        std::chrono::milliseconds(static_cast<int64_t>(std::max(1.0, raw.push_loads_interval_ms)));
  }
  o.replay = !raw.no_replay;
  o.engine.enable_prefix_caching = !raw.no_prefix_caching;
  if (raw.replay_shape != "auto") o.replay_with_topic = raw.replay_shape == "topic";
  t.step_overhead = std::chrono::nanoseconds(static_cast<int64_t>(raw.step_overhead_ms * 1e6));
  t.decode_per_seq = std::chrono::nanoseconds(static_cast<int64_t>(raw.decode_per_seq_us * 1e3));
  t.decode_per_context_token =
      std::chrono::nanoseconds(static_cast<int64_t>(raw.decode_per_ctx_ns));
  o.pd.role = *kvgate::mock::parse_pd_role(raw.pd_role);
  o.pd.room_timeout = std::chrono::milliseconds(static_cast<int64_t>(raw.pd_room_timeout_ms));
  o.pd.transfer_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(raw.pd_transfer_timeout_ms));
  o.pd.transfer_per_block =
      std::chrono::nanoseconds(static_cast<int64_t>(raw.pd_transfer_ms_per_block * 1e6));
}

// Logging set up and the options checked; false (with the reason on stderr) when either fails.
bool init_and_validate(const RawFlags& raw, const FleetOptions& o) {
  kvgate::log::Options lo;
  lo.level = raw.log_level;
  lo.format = *kvgate::log::parse_format(raw.log_format);
  if (auto s = kvgate::log::init(lo); !s.ok()) {
    std::cerr << "kvgate-mock: " << s << "\n";
    return false;
  }
  if (auto s = kvgate::mock::validate(o); !s.ok()) {
    std::cerr << "kvgate-mock: " << s.message() << "\n";
    return false;
  }
  return true;
}

// SIGINT and SIGTERM, blocked: they are taken by sigwait(), so this runs before any thread starts.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// The bound ports, on stdout and in --port-file.
void announce(const std::string& info, const std::string& port_file) {
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << info << "\n";
    std::rename(tmp.c_str(), port_file.c_str());  // readers never see a partial file
  }
  std::cout << "kvgate-mock ready " << info << std::endl;
}

int run(int argc, char** argv) {
  FleetOptions o;
  if (const char* seed = std::getenv("PYTHONHASHSEED"); seed != nullptr && *seed != '\0') {
    o.engine.vllm_hash_seed = seed;
  }
  RawFlags raw;
  CLI::App app{
      "kvgate-mock: a fleet of simulated vLLM / SGLang engine workers with real KV-cache events,\n"
      "engine truth and fault hooks. Worker i serves HTTP on --http-port + i; rank r of worker i\n"
      "(holder h = i * dp_size + r) publishes KV events on PUB --kv-port + 2h and answers replay\n"
      "requests on ROUTER --kv-port + 2h + 1. Port 0 picks free ports; the bound ports are "
      "printed\n"
      "on stdout as `kvgate-mock ready {json}` and written to --port-file. See docs/mock.md."};
  app.option_defaults()->always_capture_default();

  add_fleet_flags(app, o, raw);
  add_kv_flags(app, o, raw);
  add_scheduler_flags(app, o, raw);
  add_timing_flags(app, o, raw);
  add_pd_flags(app, o, raw);
  add_process_flags(app, o, raw);
  CLI11_PARSE(app, argc, argv);
  apply(raw, o);
  if (!init_and_validate(raw, o)) return 2;

  sigset_t signals = block_stop_signals();
  auto fleet = kvgate::mock::Fleet::start(o);
  if (!fleet.ok()) {
    std::cerr << "kvgate-mock: " << fleet.status().message() << "\n";
    kvgate::log::shutdown();
    return 1;
  }
  announce((*fleet)->info_json(), raw.port_file);

  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "kvgate-mock: signal " << sig << ", stopping\n";
  (*fleet)->stop();
  kvgate::log::shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
