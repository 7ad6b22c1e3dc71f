#include "kvgate/mock/fleet.h"

#include "kvgate/tokenizer/prompt_tokenizer.h"

#include <cmath>

#include "kvgate/core/json_writer.h"
#include "kvgate/http/io_pool.h"
#include "mock/detail/publisher.h"
#include "mock/detail/worker.h"

namespace kvgate::mock {
namespace detail {

class FleetImpl {
 public:
  explicit FleetImpl(FleetOptions o)
      : options(std::move(o)),
        oracle(options.engine.block_size, options.engine.router_hash_seed),
        pool(options.threads) {}
  ~FleetImpl() { stop(); }

  void stop() {
    if (stopped) return;
    stopped = true;
    // A fleet that failed to start never ran its pool: nothing is in flight to abort.
    if (pool_started) {
      for (auto& w : workers) w->shutdown();
    }
    hub.stop();
    pool.stop();
  }

  FleetOptions options;
  FleetOracle oracle;  // outlives the workers that feed it
  // Destroyed in reverse: workers (their timers and sockets) before the pool's contexts.
  http::IoPool pool;
  PublisherHub hub;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<WorkerPorts> ports;
  bool pool_started = false;
  bool stopped = false;
};

}  // namespace detail

namespace {

std::string zmq_endpoint(const std::string& host, uint16_t port) {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return "tcp://" + h + ":" + (port == 0 ? std::string("*") : std::to_string(port));
}

uint16_t layout_port(uint16_t base, size_t offset) {
  return base == 0 ? 0 : static_cast<uint16_t>(base + offset);
}

}  // namespace

Status validate(const FleetOptions& o) {
  const TimingModel& t = o.engine.timing;
  if (!(t.speedup > 0) || !std::isfinite(t.speedup)) {
    return absl::InvalidArgumentError("--speedup must be positive and finite");
  }
  if (!(t.prefill_tokens_per_s > 0) || !std::isfinite(t.prefill_tokens_per_s)) {
    return absl::InvalidArgumentError("--prefill-tokens-per-s must be positive and finite");
  }
  for (double speed : o.worker_speeds) {
    if (!(speed > 0) || !std::isfinite(speed)) {
      return absl::InvalidArgumentError("--worker-speeds must be positive and finite");
    }
  }
  if (o.workers == 0 || o.dp_size == 0) {
    return absl::InvalidArgumentError("--workers and --dp-size must be at least 1");
  }
  if (o.engine.block_size == 0 || o.engine.num_blocks == 0 || o.engine.max_num_seqs == 0 ||
      o.engine.max_num_batched_tokens == 0 || o.engine.max_model_len == 0) {
    return absl::InvalidArgumentError(
        "block size, blocks, sequences and token budgets must be > 0");
  }
  const size_t holders = size_t{o.workers} * o.dp_size;
  if (!o.http_ports.empty() && o.http_ports.size() != o.workers) {
    return absl::InvalidArgumentError("--http-ports needs one port per worker");
  }
  if (!o.kv_pub_ports.empty() && o.kv_pub_ports.size() != holders) {
    return absl::InvalidArgumentError("--kv-pub-ports needs one port per worker and rank");
  }
  if (!o.kv_replay_ports.empty() && o.kv_replay_ports.size() != holders) {
    return absl::InvalidArgumentError("--kv-replay-ports needs one port per worker and rank");
  }
  if (o.http_ports.empty() && o.http_port != 0 && o.http_port + o.workers - 1 > 65535) {
    return absl::InvalidArgumentError("HTTP ports run past 65535");
  }
  if (o.kv_pub_ports.empty() && o.kv_port != 0 && o.kv_port + 2 * holders - 1 > 65535) {
    return absl::InvalidArgumentError("KV ports run past 65535");
  }
  if (o.threads == 0) return absl::InvalidArgumentError("--threads must be at least 1");
  if (o.replay_buffer_steps == 0) {
    return absl::InvalidArgumentError("--replay-buffer-steps must be at least 1");
  }
  if (o.pd.role == PdRole::kPrefill && o.pd.bootstrap_port != 0 &&
      o.pd.bootstrap_port + o.workers - 1 > 65535) {
    return absl::InvalidArgumentError("bootstrap ports run past 65535");
  }
  if (o.pd.room_timeout.count() <= 0 || o.pd.transfer_timeout.count() <= 0 ||
      o.pd.transfer_per_block.count() < 0) {
    return absl::InvalidArgumentError(
        "--pd-room-timeout-ms and --pd-transfer-timeout-ms must be positive, "
        "--pd-transfer-ms-per-block not negative");
  }
  return Status();
}

Fleet::Fleet(std::unique_ptr<detail::FleetImpl> impl) : impl_(std::move(impl)) {}
Fleet::~Fleet() = default;

Result<std::unique_ptr<Fleet>> Fleet::start(FleetOptions options) {
  if (Status s = validate(options); !s.ok()) return s;
  if (options.advertise_host.empty()) {
    const std::string& b = options.bind_address;
    options.advertise_host = (b == "0.0.0.0" || b == "::" || b == "*") ? "127.0.0.1" : b;
  }
  options.engine.hash_scheme = hash_scheme_for(options.wire);
  auto impl = std::make_unique<detail::FleetImpl>(std::move(options));
  const FleetOptions& o = impl->options;
  const bool with_topic =
      o.replay_with_topic.value_or(hash_scheme_for(o.wire) == HashScheme::kVllmSha256Cbor);
  const std::string zmq_bind = o.bind_address == "0.0.0.0" ? "*" : o.bind_address;
  // One tokenizer for every worker (a model's takes tens of megabytes).
  std::shared_ptr<const tokenizer::PromptTokenizer> tokenizer;
  if (!o.tokenizer.empty()) {
    auto loaded = tokenizer::load_prompt_tokenizer(o.tokenizer);
    if (!loaded.ok()) {
      return Status(loaded.status().code(),
                    "--tokenizer " + o.tokenizer + ": " + std::string(loaded.status().message()));
    }
    tokenizer = std::move(*loaded);
  }

  for (uint32_t i = 0; i < o.workers; ++i) {
    detail::WorkerOptions wo;
    wo.index = i;
    wo.dp_size = o.dp_size;
    wo.model = o.model;
    wo.engine = o.engine;
    if (!o.worker_speeds.empty()) {
      wo.engine.timing.speedup *= o.worker_speeds[i % o.worker_speeds.size()];
    }
    wo.wire = o.wire;
    wo.topic = o.topic;
    wo.replay_shape = with_topic ? detail::ReplayShape::kWithTopic : detail::ReplayShape::kLegacy;
    wo.replay_buffer_steps = o.replay_buffer_steps;
    wo.request_records = o.request_records;
    wo.seed = o.seed;
    wo.oracle = &impl->oracle;
    wo.advertise_host = o.advertise_host;
    wo.http.address = o.bind_address;
    wo.http.port = o.http_ports.empty() ? layout_port(o.http_port, i) : o.http_ports[i];
    wo.http.body_limit = o.body_limit;
    wo.http.idle_timeout = o.keep_alive_timeout;
    wo.tokenizer = tokenizer;
    wo.http.tls_cert_path = o.tls_cert_path;
    wo.http.tls_key_path = o.tls_key_path;
    wo.push_loads_interval = o.push_loads_interval;
    wo.pd = o.pd;
    wo.bootstrap_port = layout_port(o.pd.bootstrap_port, i);
    wo.http.pin_context = i % o.threads;
    WorkerPorts wp;
    wp.worker = i;
    for (uint32_t r = 0; r < o.dp_size; ++r) {
      const size_t h = size_t{i} * o.dp_size + r;
      detail::StreamSpec spec;
      spec.topic = o.topic;
      spec.shape = wo.replay_shape;
      spec.buffer_steps = o.replay_buffer_steps;
      uint16_t pub = o.kv_pub_ports.empty() ? layout_port(o.kv_port, 2 * h) : o.kv_pub_ports[h];
      spec.pub_endpoint = zmq_endpoint(zmq_bind, pub);
      if (o.replay) {
        uint16_t rep =
            o.kv_replay_ports.empty() ? layout_port(o.kv_port, 2 * h + 1) : o.kv_replay_ports[h];
        spec.replay_endpoint = zmq_endpoint(zmq_bind, rep);
      }
      auto stream = impl->hub.add_stream(spec);
      if (!stream.ok()) return stream.status();
      detail::StreamEndpoints ep = impl->hub.endpoints(*stream);
      detail::StreamEndpoints adv;
      adv.pub_port = ep.pub_port;
      adv.replay_port = ep.replay_port;
      adv.pub = zmq_endpoint(o.advertise_host, ep.pub_port);
      if (ep.replay_port != 0) adv.replay = zmq_endpoint(o.advertise_host, ep.replay_port);
      wo.streams.push_back(*stream);
      wo.advertised.push_back(adv);
      wp.ranks.push_back({r, ep.pub_port, ep.replay_port, adv.pub, adv.replay});
    }
    impl->workers.push_back(std::make_unique<detail::Worker>(impl->pool, impl->hub, wo));
    impl->ports.push_back(std::move(wp));
  }
  for (size_t i = 0; i < impl->workers.size(); ++i) {
    if (Status s = impl->workers[i]->start(); !s.ok()) return s;
    impl->ports[i].http = impl->workers[i]->http_port();
    impl->ports[i].bootstrap = impl->workers[i]->bootstrap_port();
  }
  if (Status s = impl->hub.start(); !s.ok()) return s;
  impl->pool.start();
  impl->pool_started = true;
  return std::unique_ptr<Fleet>(new Fleet(std::move(impl)));
}

void Fleet::stop() { impl_->stop(); }
const FleetOptions& Fleet::options() const { return impl_->options; }
size_t Fleet::size() const { return impl_->workers.size(); }
const WorkerPorts& Fleet::ports(size_t worker) const { return impl_->ports[worker]; }

std::string Fleet::info_json() const {
  const FleetOptions& o = impl_->options;
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("model", o.model).member("wire", events::wire_format_name(o.wire));
  w.member("block_size", o.engine.block_size).member("dp_size", o.dp_size);
  w.member("pd_role", pd_role_name(o.pd.role));
  w.key("workers").begin_array();
  for (const WorkerPorts& p : impl_->ports) {
    w.begin_object().member("worker", p.worker).member("http_port", p.http);
    w.member("url", (o.tls_cert_path.empty() ? "http://" : "https://") + o.advertise_host + ":" +
                        std::to_string(p.http));
    w.member("pd_role", pd_role_name(o.pd.role));
    if (o.pd.role == PdRole::kPrefill) w.member("bootstrap_port", p.bootstrap);
    w.key("ranks").begin_array();
    for (const RankPorts& r : p.ranks) {
      w.begin_object().member("dp_rank", r.dp_rank).member("pub_port", r.pub);
      w.member("replay_port", r.replay).member("endpoint", r.pub_endpoint);
      w.member("replay_endpoint", r.replay_endpoint).end_object();
    }
    w.end_array().end_object();
  }
  w.end_array().end_object();
  return out;
}

}  // namespace kvgate::mock
