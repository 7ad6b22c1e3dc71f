// Fleet: a set of mock engine workers in one process, what `kvgate-mock` runs and what tests
// start in-process.
//
// Worker i serves HTTP on its own port and runs dp_size ranks; rank r of worker i is holder
// h = i * dp_size + r, and publishes KV events on its own PUB port and replay (ROUTER) port.
// Default layout, every port overridable and 0 meaning "any free port":
//   HTTP of worker i          http_port + i
//   KV PUB of holder h        kv_port + 2h
//   KV replay of holder h     kv_port + 2h + 1
//
// Threading: start() and stop() from one control thread; ports(), info_json() from any thread
// after start().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/events/wire.h"
#include "kvgate/mock/engine.h"

namespace kvgate::mock {

// Prefill/decode disaggregation as SGLang and vLLM's NixlConnector run it (docs/mock.md); each
// request says by its fields which protocol it follows. A regular worker serves whole requests
// and ignores the PD fields; a prefill worker computes the prompt, answers with one token and
// keeps its blocks for a decode to pull from its bootstrap server; a decode worker pulls them,
// receives the blocks it lacks and generates.
enum class PdRole : uint8_t { kRegular, kPrefill, kDecode };
std::string_view pd_role_name(PdRole role);
std::optional<PdRole> parse_pd_role(std::string_view name);

struct PdOptions {
  PdRole role = PdRole::kRegular;  // every worker of the fleet
  // Prefill: worker i's bootstrap server listens on bootstrap_port + i (0: any free port).
  // SGLang's default.
  uint16_t bootstrap_port = 8998;
  // Every duration below is divided by the timing model's speedup, as engine times are.
  // A prefill frees a ready room no decode pulled within this.
  std::chrono::milliseconds room_timeout{30'000};
  // A decode waits this long for its room to be ready, and for KV room to receive it, before
  // failing the request.
  std::chrono::milliseconds transfer_timeout{10'000};
  // Moving one block's KV from the prefill to the decode: a 16-token block of an 8B model is
  // 2 MiB (128 KiB per token), ~42 us over a 400 Gb/s RDMA link.
  Duration transfer_per_block = std::chrono::microseconds(50);
  // Decode: a request carrying no PD field at all (neither SGLang's bootstrap fields nor vLLM's
  // kv_transfer_params) is served whole, prefill included, as vLLM's kv_both engines do; a
  // gateway may send a prompt the decode mostly caches straight there. False: such a request is
  // refused (400), as an engine that cannot prefill would.
  bool decode_local_prefill = true;
};

struct FleetOptions {
  uint32_t workers = 1;
  uint32_t dp_size = 1;
  std::string model = "mock-8b";
  EngineConfig engine;
  // Worker i runs at worker_speeds[i % size] of the timing model (0.5: every step takes twice
  // as long): a fleet of unequal accelerators. Empty: all at 1.
  std::vector<double> worker_speeds;
  events::WireFormat wire = events::WireFormat::kVllmArray;

  std::string bind_address = "127.0.0.1";  // HTTP and ZMQ listen here
  std::string advertise_host;              // in /server_info endpoints; default: bind (or
                                           // 127.0.0.1 for a wildcard bind)
  uint16_t http_port = 8000;               // 0: any free port per worker
  std::vector<uint16_t> http_ports;        // per worker, overrides http_port
  uint16_t kv_port = 5557;                 // 0: any free ports
  std::vector<uint16_t> kv_pub_ports;      // per holder, override kv_port
  std::vector<uint16_t> kv_replay_ports;   // per holder, override kv_port
  bool replay = true;                      // replay sockets on
  std::string topic;                       // ZMQ topic frame (vLLM's default is empty)
  // Replay replies with the topic frame (vLLM >= 0.26) or without (older vLLM, SGLang).
  // Default: with topic for vLLM wires, without for SGLang wires.
  std::optional<bool> replay_with_topic;
  size_t replay_buffer_steps = 10'000;

  size_t threads = 2;                // io_contexts (threads) shared by the workers
  size_t request_records = 100'000;  // per worker, for /admin/requests
  size_t body_limit = 64 << 20;      // request bodies, bytes
  // An idle keep-alive connection is closed after this, as uvicorn (vLLM's and SGLang's server)
  // does after 5 s by default: a gateway must expect its pooled connections to vanish.
  std::chrono::milliseconds keep_alive_timeout{5'000};
  // Both set: every worker serves HTTPS with this PEM certificate chain and key (an engine behind
  // a TLS-terminating sidecar, as a gateway reaching workers across a network meets them).
  std::string tls_cert_path;
  std::string tls_key_path;
  // A model's tokenizer.json (or its folder): prompts' text becomes that model's token ids, as in
  // a real engine. Empty: the built-in test tokenizer.
  std::string tokenizer;
  // Push each rank's load on its KV-event socket after its steps and this often while quiet
  // (events/load_record.h); zero: off, loads are only polled (/load, /metrics).
  std::chrono::milliseconds push_loads_interval{0};
  uint64_t seed = 1;  // fault-hook randomness
  PdOptions pd;
};

struct RankPorts {
  uint32_t dp_rank = 0;
  uint16_t pub = 0;
  uint16_t replay = 0;          // 0: no replay socket
  std::string pub_endpoint;     // as advertised
  std::string replay_endpoint;  // as advertised, empty without replay
};

struct WorkerPorts {
  uint32_t worker = 0;
  uint16_t http = 0;
  uint16_t bootstrap = 0;  // the prefill role's bootstrap server; 0 in other roles
  std::vector<RankPorts> ranks;
};

namespace detail {
class FleetImpl;
}

class Fleet {
 public:
  // Validates the options, binds every port and starts serving.
  static Result<std::unique_ptr<Fleet>> start(FleetOptions options);
  ~Fleet();

  // Aborts in-flight requests, closes the servers and publishers, joins the threads.
  void stop();

  const FleetOptions& options() const;
  size_t size() const;
  const WorkerPorts& ports(size_t worker) const;
  // {"model":..,"pd_role":..,"workers":[{"worker":0,"http_port":..,"url":..,"pd_role":..,
  //   ("bootstrap_port":.., prefill only) "ranks":[{"dp_rank":0,"pub_port":..,"replay_port":..,
  //   "endpoint":..,"replay_endpoint":..}]}]}: the startup line and --port-file.
  std::string info_json() const;

 private:
  explicit Fleet(std::unique_ptr<detail::FleetImpl> impl);
  std::unique_ptr<detail::FleetImpl> impl_;
};

// Checks options a user can get wrong (speedup, sizes, port lists); the CLI and start() use it.
Status validate(const FleetOptions& options);

}  // namespace kvgate::mock
