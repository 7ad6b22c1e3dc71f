#include "kvgate/app/gateway.h"

#include <numa.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "app/gateway_impl.h"
#include "app/instrumented_index.h"
#include "boost/asio/post.hpp"
#include "kvgate/app/build_info.h"
#include "kvgate/core/log.h"

namespace kvgate::app {
namespace net = boost::asio;

namespace {

// After a drain's grace period, how long the requests it cut get to write their error answers.
constexpr std::chrono::seconds kShutdownAnswerTime{5};

// Pins each executor thread to one CPU, counting each pin that took in `pinned`. On several nodes
// context i runs on node i % nodes, on that node's (i / nodes)-th CPU; on one node thread i runs
// on the i-th CPU this process may use (those of one NUMA node before the next's). So with one
// thread per core every context owns a core. With more threads than CPUs (on any node) nothing is
// pinned and the OS places them (within their node's CPUs on several nodes).
void pin_threads(http::IoPool& io, metrics::Gauge& pinned) {
  std::vector<int> cpu_of(io.size());
  if (io.nodes() > 1) {
    for (size_t n = 0; n < io.nodes(); ++n) {
      const size_t contexts = (io.size() - n + io.nodes() - 1) / io.nodes();  // i % nodes == n
      if (contexts > io.cpus_of(n).size()) return;
    }
    for (size_t i = 0; i < io.size(); ++i) cpu_of[i] = io.cpus_of(i)[i / io.nodes()];
  } else {
    std::vector<int> cpus = current_thread_cpus();
    if (cpus.empty() || io.size() > cpus.size()) return;
    if (numa_available() >= 0 && numa_num_configured_nodes() > 1) {
      std::stable_sort(cpus.begin(), cpus.end(),
                       [](int a, int b) { return numa_node_of_cpu(a) < numa_node_of_cpu(b); });
    }
    for (size_t i = 0; i < io.size(); ++i) cpu_of[i] = cpus[i];
  }
  for (size_t i = 0; i < io.size(); ++i) {
    net::post(io.context(i), [cpu = cpu_of[i], &pinned] {
      if (pin_current_thread(std::span<const int>(&cpu, 1))) pinned.Increment();
    });
  }
}

size_t default_threads(size_t configured) {
  if (configured > 0) return configured;
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : n;
}

// --numa and --numa-topology: the nodes the gateway lays its pools out on (one: the plain layout).
Result<NumaTopology> numa_layout(const GatewayConfig& c) {
  if (!c.numa_topology.empty()) return parse_numa_topology(c.numa_topology);
  if (c.numa == "off") return single_numa_node();
  if (c.numa != "auto") {
    return absl::InvalidArgumentError("--numa must be auto or off, not '" + c.numa + "'");
  }
  return detect_numa_topology();
}

// Each node's CPUs, for pools split per node (none on one node).
std::vector<std::vector<int>> node_cpus(const Result<NumaTopology>& t) {
  std::vector<std::vector<int>> out;
  if (!t.ok() || t->size() < 2) return out;
  for (const NumaNode& n : t->nodes) out.push_back(n.cpus);
  return out;
}

std::string random_instance_id() {
  std::random_device rd;
  const uint64_t v = (uint64_t{rd()} << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

GatewayImpl::GatewayImpl(GatewayConfig config, const Clock& clock)
    : config_(std::move(config)),
      clock_(clock),
      instance_id_(random_instance_id()),
      access_(config_.api_key, config_.admin_api_key),
      cors_(config_.cors_allowed_origins),
      numa_(numa_layout(config_)),
      io_(default_threads(config_.threads), node_cpus(numa_)),
      holders_(static_cast<uint32_t>(numa_nodes())),
      workers_({.health = config_.health,
                .breaker = config_.breaker,
                .liveness = config_.liveness,
                .cache_agreement_warn_below = config_.cache_agreement_warn_below,
                .prefill_rate = {.prior_tokens_per_second =
                                     config_.cache_aware.prefill_tokens_per_second,
                                 .half_life = config_.prefill_rate_half_life}},
               clock),
      routing_(config_, BlockHasher(config_.hash_seed)) {
  MutexLock lock(&reload_mu_);
  live_config_ = config_;
}

// Client connections the descriptor limit allows: each request also holds an upstream connection,
// and the KV-event sockets and control connections need some.
size_t connections_for_descriptor_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 65536;
  const size_t fds = static_cast<size_t>(lim.rlim_cur);
  return fds > 512 ? (fds - 256) / 2 : 128;
}

// --access-log: its format, and where it goes (a rotating file under --log-dir unless the
// configuration brings its own sink).
Status GatewayImpl::init_access_log() {
  const GatewayConfig& c = config_;
  auto access_format = parse_access_log_format(c.access_log);
  if (!access_format.ok()) return access_format.status();
  AccessLog::Sink access_sink = c.access_log_sink;
  if (!access_sink && !c.log_dir.empty() && *access_format != AccessLogFormat::kOff) {
    auto file = rotating_access_log(c.log_dir + "/access.log");
    if (!file.ok()) return file.status();
    access_sink = std::move(*file);
  }
  access_log_ = std::make_unique<AccessLog>(*access_format, std::move(access_sink));
  return absl::OkStatus();
}

// --tokenizer and --chat-template: the models' own tokenizers, and the memory of answers encoded
// ahead of the next turn when a model has a chat template.
Status GatewayImpl::init_tokenizers() {
  const GatewayConfig& c = config_;
  if (c.tokenizers.empty()) {
    if (!c.chat_templates.empty()) {
      return absl::InvalidArgumentError("--chat-template needs the model's --tokenizer");
    }
    return absl::OkStatus();
  }
  auto toks = PromptTokenizers::load(c.tokenizers, c.chat_templates);
  if (!toks.ok()) return toks.status();
  tokenizers_ = std::move(*toks);
  for (const std::string& spec : tokenizers_.without_chat_template()) {
    log::get("gateway")->warn(
        "--tokenizer {}: the model ships no chat template (no chat_template.jinja, none in "
        "tokenizer_config.json), so its chat requests route on a prefix the engines do not "
        "share; give one with --chat-template",
        spec);
  }
  if (c.answer_prewarm && tokenizers_.without_chat_template().size() < c.tokenizers.size()) {
    answers_ = std::make_unique<AnswerMemory>(tokenizers_);
  }
  return absl::OkStatus();
}

// --numa and --pin-threads checked, and the gauges that say what they gave.
Status GatewayImpl::init_thread_layout() {
  const GatewayConfig& c = config_;
  if (!numa_.ok()) return numa_.status();
  if (c.pin_threads != "auto" && c.pin_threads != "on" && c.pin_threads != "off") {
    return absl::InvalidArgumentError("--pin-threads must be auto, on or off, not '" +
                                      c.pin_threads + "'");
  }
  metrics::gauge_family(registry_, "kvgate_numa_nodes",
                        "NUMA nodes the gateway runs one executor pool, index shard and set of "
                        "event lanes on (--numa; 1: the plain layout).")
      .Add({})
      .Set(static_cast<double>(numa_nodes()));
  threads_pinned_ =
      &metrics::gauge_family(registry_, "kvgate_executor_threads_pinned",
                             "Executor threads pinned to one CPU each (--pin-threads; 0: the OS "
                             "places them).")
           .Add({});
  return absl::OkStatus();
}

// The index (a shard per NUMA node), what routing reads of it, and what fills it: the KV-event
// ingest, or the relay follower with --kv-events-relay.
Status GatewayImpl::init_index() {
  const GatewayConfig& c = config_;
  index::IndexerOptions index_options{.hash_seed = c.hash_seed};
  if (numa_nodes() > 1) {
    if (c.kv_index != index::IndexKind::kChain) {
      return absl::InvalidArgumentError(
          "several NUMA nodes shard the index, which only the chain index does: use "
          "--kv-index chain, or --numa off");
    }
    for (const NumaNode& n : numa_->nodes)
      index_options.shard_memory_nodes.push_back(n.memory_node);
    log::get("gateway")->info(
        "NUMA: {} nodes, one executor pool, index shard and set of event "
        "lanes each ({})",
        numa_->size(), numa_->describe());
  }
  auto idx = index::make_indexer(c.kv_index, index_options);
  if (!idx.ok()) return idx.status();
  raw_index_ = index::make_synchronized(std::move(*idx));
  index_ = std::make_unique<InstrumentedIndex>(*raw_index_, *metrics_, clock_);
  if (c.kv_events && !c.kv_events_relay.empty()) {
    follower_ = std::make_unique<relay::RelayFollower>(
        *raw_index_, relay::FollowerOptions{.target = c.kv_events_relay});
    follow_metrics_ = std::make_unique<RelayFollowMetrics>(registry_);
  } else if (c.kv_events) {
    events::IngestOptions io;
    io.event_threads = c.event_threads;
    io.lanes = c.event_lanes;
    io.lane_cpus = node_cpus(numa_);
    io.subscription.hash_seed = c.hash_seed;
    apply_kv_event_bounds(c.kv_event_bounds, io);
    ingest_ = std::make_unique<events::EventIngest>(*raw_index_, registry_, clock_, io);
  }
  return absl::OkStatus();
}

// The policy, the pool of upstream connections, and the worker control that ties the fleet to
// both.
Status GatewayImpl::init_routing() {
  GatewayConfig& c = config_;
  // Replicas share what the approximate mode predicts on workers without KV events.
  c.cache_aware.journal_predictions = !c.state_sync_url.empty();
  // A disaggregated fleet: the policy chooses prefill workers (where the prompt's cache matters),
  // the decode policy decode workers.
  const policy::CacheAwareConfig routing = routing_figures(c);
  auto pol = policy::make_policy(c.pd_disaggregation ? c.prefill_policy : c.policy, routing,
                                 {.index = index_.get(), .clock = &clock_});
  if (!pol.ok()) return pol.status();
  policy_ = std::move(*pol);
  if (c.pd_disaggregation) {
    auto decode = policy::make_policy(c.decode_policy, c.cache_aware,
                                      {.index = index_.get(), .clock = &clock_});
    if (!decode.ok()) return decode.status();
    decode_policy_ = std::move(*decode);
  }
  // One context for every https worker: loading the roots is the costly part of it.
  auto worker_tls = http::make_client_tls(c.worker_ca_path);
  if (!worker_tls.ok()) return worker_tls.status();
  upstream_ = std::make_unique<UpstreamPool>(
      io_, UpstreamPoolOptions{.client = {.connect_timeout = c.connect_timeout,
                                          .request_timeout = c.request_timeout,
                                          .idle_timeout = c.stream_idle_timeout,
                                          .body_limit = c.max_answer_bytes},
                               .worker_tls = *worker_tls,
                               .idle_per_worker = c.idle_connections_per_worker,
                               .idle_timeout = c.upstream_idle_timeout});
  control_ =
      std::make_unique<WorkerControl>(WorkerControlDeps{.config = &c,
                                                        .registry = &workers_,
                                                        .holders = &holders_,
                                                        .ingest = ingest_.get(),
                                                        .follower = follower_.get(),
                                                        .follow_metrics = follow_metrics_.get(),
                                                        .policy = policy_.get(),
                                                        .upstream = upstream_.get(),
                                                        .metrics = metrics_.get(),
                                                        .clock = &clock_,
                                                        .worker_tls = *worker_tls});
  return absl::OkStatus();
}

// The client-facing server, and on it the generation, Responses and pooling routes: cache-aware
// on their prompt, proxied whole or streamed; the handler writes its own access-log line.
void GatewayImpl::init_server() {
  const GatewayConfig& c = config_;
  server_ = std::make_unique<http::Server>(
      io_, http::ServerOptions{.address = c.host,
                               .port = c.port,
                               .body_limit = c.max_payload_bytes,
                               .idle_timeout = c.client_idle_timeout,
                               .read_timeout = c.client_read_timeout,
                               .write_timeout = c.client_write_timeout,
                               .server_name = "kvgate",
                               .request_id_header = std::string(kRequestIdHeader),
                               .local_error_header = {std::string(kErrorSourceHeader), "gateway"},
                               .max_connections = c.max_connections,
                               .max_inflight_body_bytes = c.max_inflight_body_bytes,
                               .body_limit_name = "--max-payload-size",
                               .inflight_limit_name = "--max-inflight-body-bytes",
                               .tls_cert_path = c.tls_cert_path,
                               .tls_key_path = c.tls_key_path,
                               .tls_session_tickets = c.tls_session_tickets});
  // Orchestrators' probes and the scrape stay reachable at the connection limit.
  for (const char* path : {"/health", "/readiness", "/liveness", "/metrics"}) {
    server_->always_available(path);
  }
  for (const auto& [path, api] :
       {std::pair{"/v1/completions", ApiRoute::kCompletions},
        std::pair{"/v1/chat/completions", ApiRoute::kChatCompletions},
        std::pair{"/generate", ApiRoute::kGenerate},
        std::pair{"/v1/embeddings", ApiRoute::kEmbeddings},
        std::pair{"/v1/responses", ApiRoute::kResponses},
        std::pair{"/v1/rerank", ApiRoute::kRerank}, std::pair{"/v1/score", ApiRoute::kScore}}) {
    route(
        http::Verb::post, path, Access::kClient,
        [this, api = api](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
          co_await generation_->serve(api, req, res);
        },
        /*logs_own_access=*/true);
  }
}

// --prometheus-port: /metrics on a listener of its own.
void GatewayImpl::init_metrics_server() {
  const GatewayConfig& c = config_;
  if (c.prometheus_port == 0) return;
  metrics_server_ = std::make_unique<http::Server>(
      io_, http::ServerOptions{.address = c.prometheus_host.empty() ? c.host : c.prometheus_host,
                               .port = c.prometheus_port,
                               .server_name = "kvgate",
                               .tls_cert_path = c.tls_cert_path,
                               .tls_key_path = c.tls_key_path,
                               .tls_session_tickets = c.tls_session_tickets});
  metrics_server_->route(
      http::Verb::get, "/metrics",
      [this](const http::Request&, http::Responder& res) -> net::awaitable<void> {
        http::Response r = http::Response::text(200, metrics_text(), "text/plain; version=0.0.4");
        (void)co_await res.send(std::move(r));
      });
}

std::function<size_t()> GatewayImpl::prefill_capacity() {
  const std::optional<uint32_t> per_worker = config_.cache_aware.overload.prefilling_requests;
  if (!per_worker) return {};
  return [this, n = size_t{*per_worker}] {
    const std::shared_ptr<const workers::FleetSnapshot> fleet = workers_.snapshot();
    size_t takers = 0;
    for (size_t i = 0; i < fleet->workers.size(); ++i) {
      if (fleet->infos[i]->role != workers::WorkerRole::kDecode && fleet->workers[i]->routable()) {
        ++takers;
      }
    }
    // With none routable one request at a time goes on, to be answered by the router.
    return std::max<size_t>(takers, 1) * n;
  };
}

Status GatewayImpl::init() {
  if (Status s = init_access_log(); !s.ok()) return s;
  tenant_metrics_ = std::make_unique<TenantMetrics>(registry_, config_.tenant_series_limit);
  if (!config_.api_keys_file.empty()) {
    Result<std::shared_ptr<const KeyTable>> keys =
        KeyTable::load(config_.api_keys_file, nullptr, tenant_metrics_.get());
    if (!keys.ok()) return keys.status();
    access_.set_keys(config_.api_key, config_.admin_api_key, std::move(*keys));
  }
  auto decision_headers = parse_decision_headers(config_.decision_headers);
  if (!decision_headers.ok()) return decision_headers.status();
  decision_headers_ = *decision_headers;
  admission_ = std::make_unique<AdmissionGate>(
      AdmissionOptions{.max_concurrent = config_.max_concurrent_requests,
                       .queue_size = config_.queue_size,
                       .queue_timeout = config_.queue_timeout,
                       .reserved_critical = config_.reserved_critical_slots,
                       .starvation = config_.priority_starvation,
                       .prefill_capacity = prefill_capacity(),
                       .reserved_critical_prefills = config_.reserved_critical_prefills});
  if (config_.max_connections == 0) config_.max_connections = connections_for_descriptor_limit();
  metrics_ = std::make_unique<GatewayMetrics>(registry_, policy::policy_kind_name(config_.policy),
                                              config_.model_series_limit);
  reload_metrics_ = std::make_unique<ConfigReloadMetrics>(registry_);
  process_metrics_ = std::make_unique<metrics::ProcessMetrics>(registry_, "kvgate", build_info());
  if (Status s = init_tokenizers(); !s.ok()) return s;
  if (Status s = init_thread_layout(); !s.ok()) return s;
  if (Status s = init_index(); !s.ok()) return s;
  if (Status s = init_routing(); !s.ok()) return s;
  if (Status s = init_state_sync(); !s.ok()) return s;
  init_generation();
  init_server();
  add_info_routes();
  add_admin_routes();
  add_tokenize_routes();
  add_observe_routes();
  init_metrics_server();
  if (cors_.enabled()) {
    server_->route_every_path(
        http::Verb::options,
        [this](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
          http::Response r = cors_.preflight(req);
          (void)co_await res.send(std::move(r));
        });
  }
  return absl::OkStatus();
}

void GatewayImpl::route(http::Verb method, std::string path, Access access, http::Handler handler,
                        bool logs_own_access) {
  server_->route(method, std::move(path), guarded(access, std::move(handler), logs_own_access));
}

http::Handler GatewayImpl::guarded(Access access, http::Handler handler,
                                   bool logs_own_access) const {
  // CORS outermost: a browser reads a refusal (401) only when it carries the CORS headers.
  http::Handler h = cors_.wrap(access_.wrap(access, std::move(handler)));
  if (logs_own_access || !access_log_->enabled()) return h;
  return [this, h = std::move(h)](const http::Request& req,
                                  http::Responder& res) -> net::awaitable<void> {
    const MonoTime t0 = clock_.now();
    co_await h(req, res);
    const std::string client = peer_address(req);
    access_log_->write({.method = boost::beast::http::to_string(req.method()),
                        .path = req.path(),
                        .request_id = req.request_id,
                        .client = client,
                        .status = res.status(),
                        .duration_ms = to_seconds(clock_.now() - t0) * 1e3});
  };
}

Status GatewayImpl::start() {
  io_.start();
  // On one node a pinned thread cannot move off a core that another busy process (a sidecar, a
  // second gateway, a load generator) is using while another core idles: with two threads on two
  // shared cores that measured as a lower rate than the OS's placement (with one, the same). The
  // per-node layout pins: its point is locality.
  if (config_.pin_threads == "on" || (config_.pin_threads == "auto" && io_.nodes() > 1)) {
    pin_threads(io_, *threads_pinned_);
  }
  parse_work_.emplace(parse_context_.get_executor());
  parse_thread_ = std::thread([this] {
    // Large bodies parse here, whole seconds of CPU under a flood of huge prompts: at a lower
    // priority than the I/O threads, so health checks and ordinary requests keep their turn.
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 5);
    parse_context_.run();
  });
  start_pulse();
  upstream_->start();
  // A listener that cannot open (a port in use) ends the start: what started stops again, so the
  // gateway can be destroyed (a joinable thread would end the process) and the error reported.
  const auto undo = [this](Status s) {
    upstream_->stop();
    io_.stop();
    parse_work_.reset();
    parse_context_.stop();
    if (parse_thread_.joinable()) parse_thread_.join();
    return s;
  };
  if (Status s = server_->start(); !s.ok()) return undo(s);
  if (metrics_server_) {
    if (Status s = metrics_server_->start(); !s.ok()) {
      server_->stop(std::chrono::milliseconds(0));
      return undo(Status(s.code(), "--prometheus-port: " + std::string(message_of(s))));
    }
  }
  if (config_.grpc_port >= 0) {
    grpc_front_ = std::make_unique<GrpcFront>(
        GrpcFrontParts{.config = config_,
                       .workers = workers_,
                       .tokenizers = tokenizers_,
                       .access = access_,
                       .io = io_,
                       .generation = *generation_,
                       .ready = [this] { return ready(*workers_.snapshot()); },
                       .tokenize = tokenize_handler("/tokenize")});
    if (Status s = grpc_front_->start(); !s.ok()) {
      grpc_front_.reset();
      if (metrics_server_) metrics_server_->stop(std::chrono::milliseconds(0));
      server_->stop(std::chrono::milliseconds(0));
      return undo(s);
    }
  }
  started_ = true;
  // Every listener, so no worker URL leads back to any of them.
  control_->add_listener("HTTP", config_.host, server_->port());
  if (metrics_server_) {
    control_->add_listener("Prometheus",
                           config_.prometheus_host.empty() ? config_.host : config_.prometheus_host,
                           metrics_server_->port());
  }
  if (grpc_front_) {
    control_->add_listener("gRPC", config_.grpc_host.empty() ? config_.host : config_.grpc_host,
                           grpc_front_->port());
  }
  add_command_line_workers();
  if (config_.service_discovery) {
    auto d = PodDiscovery::create(config_, *control_);
    if (!d.ok()) return d.status();
    discovery_ = std::move(*d);
    discovery_metrics_ = std::make_unique<PodDiscoveryMetrics>(registry_);
    discovery_->start();
  }
  // After the command line's workers, so the first push shares them.
  if (state_sync_) state_sync_->start();
  return absl::OkStatus();
}

void GatewayImpl::init_generation() {
  generation_ =
      std::make_unique<GenerationPipeline>(GenerationParts{.config = config_,
                                                           .clock = clock_,
                                                           .instance_id = instance_id_,
                                                           .workers = workers_,
                                                           .policy = *policy_,
                                                           .decode_policy = decode_policy_.get(),
                                                           .upstream = *upstream_,
                                                           .routing = routing_,
                                                           .index = index_.get(),
                                                           .tokenizers = tokenizers_,
                                                           .parse_context = parse_context_,
                                                           .admission = *admission_,
                                                           .access = access_,
                                                           .metrics = *metrics_,
                                                           .access_log = *access_log_,
                                                           .decision_headers = decision_headers_,
                                                           .answers = answers_.get(),
                                                           .draining = draining_,
                                                           .shutting_down = shutting_down_,
                                                           .active = active_generations_});
}

void GatewayImpl::add_command_line_workers() {
  for (const StaticWorker& w : static_workers(config_)) {
    if (Status s = add_worker(w.url, w.kv_endpoints, {}, w.spec); !s.ok()) {
      log::get("gateway")->warn("worker {} not added: {}", workers::redact_url(w.url),
                                message_of(s));
    }
  }
}

Status GatewayImpl::add_worker(std::string_view url, std::vector<workers::KvEndpoint> kv_endpoints,
                               std::string_view api_key, const WorkerSpec& role) {
  std::vector<workers::KvEndpoint> shared = kv_endpoints;
  const Status s = control_->add(url, std::move(kv_endpoints), api_key, role);
  if (s.ok() && fleet_sync_) {
    fleet_sync_->added(url, shared, role);
    state_sync_->sync_soon();
  }
  return s;
}

bool GatewayImpl::remove_worker(std::string_view url) {
  if (!control_->remove(url)) return false;
  if (fleet_sync_) {
    fleet_sync_->removed(url);
    state_sync_->sync_soon();
  }
  return true;
}

namespace {

// The Redis password: a file, else the environment, else the URL's own.
Result<std::string> state_sync_password(const GatewayConfig& c, std::string from_url) {
  if (!c.state_sync_password_file.empty()) {
    std::ifstream f(c.state_sync_password_file);
    if (!f) {
      return absl::InvalidArgumentError("--state-sync-password-file: cannot read " +
                                        c.state_sync_password_file);
    }
    std::string password;
    std::getline(f, password);
    return password;
  }
  if (const char* env = std::getenv("KVGATE_STATE_SYNC_PASSWORD"); env != nullptr && *env != '\0')
    return std::string(env);
  return from_url;
}

std::string default_replica_id(uint16_t port) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "kvgate");
  std::mt19937_64 rng{std::random_device{}()};
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%06x", static_cast<unsigned>(rng() & 0xffffff));
  return std::string(host) + ":" + std::to_string(port) + "-" + suffix;
}

}  // namespace

Status GatewayImpl::init_state_sync() {
  if (config_.state_sync_url.empty()) return absl::OkStatus();
  sync::SyncConfig sc;
  auto target = sync::parse_redis_url(config_.state_sync_url);
  if (!target.ok()) return target.status();
  sc.redis = std::move(*target);
  auto password = state_sync_password(config_, sc.redis.password);
  if (!password.ok()) return password.status();
  sc.redis.password = std::move(*password);
  sc.ns = config_.state_sync_namespace;
  sc.replica_id = config_.state_sync_replica_id.empty() ? default_replica_id(config_.port)
                                                        : config_.state_sync_replica_id;
  sc.period = config_.state_sync_period;
  sc.ttl = config_.state_sync_ttl.count() > 0 ? config_.state_sync_ttl : sc.period * 3;
  fleet_sync_ = std::make_unique<FleetSync>(sc.replica_id, *control_, workers_, *policy_, clock_,
                                            sc.tombstone_ttl());
  limit_shares_ = std::make_unique<LimitShares>(
      sc.replica_id, [this] { return access_.key_table(); }, clock_);
  fleet_sync_->share_limits(limit_shares_.get());
  sync_metrics_ = std::make_unique<StateSyncMetrics>(registry_);
  state_sync_ = std::make_unique<sync::StateSync>(std::move(sc), *fleet_sync_, clock_);
  return absl::OkStatus();
}

size_t GatewayImpl::drain(std::chrono::milliseconds grace) {
  if (!started_) return 0;
  draining_.store(true);
  server_->begin_drain();
  if (grpc_front_) grpc_front_->drain_began();
  const auto wait_until = [this](std::chrono::steady_clock::time_point deadline) {
    while (active_generations_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  wait_until(std::chrono::steady_clock::now() + grace);
  const int64_t left = active_generations_.load();
  if (left <= 0) return 0;
  // The grace period is over: every attempt still at a worker is told (streams end with an error
  // event, the others answer 503), and a request between attempts stops at the next one.
  shutting_down_.store(true);
  const auto fleet = workers_.snapshot();
  for (const auto& w : fleet->workers) w->inflight().veto_all(workers::VetoKind::kShutdown);
  wait_until(std::chrono::steady_clock::now() + kShutdownAnswerTime);
  return static_cast<size_t>(left);
}

void GatewayImpl::stop(std::chrono::milliseconds grace) {
  if (!started_) return;
  started_ = false;
  // gRPC calls first, while the executors still run their handlers to the end.
  if (grpc_front_) grpc_front_->stop();
  server_->stop(grace);
  if (metrics_server_) metrics_server_->stop(std::chrono::milliseconds(0));
  // Before the control loops: the sync thread adds and removes workers through them.
  if (state_sync_) state_sync_->stop();
  if (discovery_) discovery_->stop();
  control_->stop();
  upstream_->stop();
  if (ingest_) ingest_->stop();
  if (follower_) follower_->stop();
  io_.stop();
  parse_work_.reset();
  parse_context_.stop();
  if (parse_thread_.joinable()) parse_thread_.join();
}

Result<std::unique_ptr<Gateway>> Gateway::create(GatewayConfig config, const Clock& clock) {
  auto impl = std::make_unique<GatewayImpl>(std::move(config), clock);
  if (Status s = impl->init(); !s.ok()) return s;
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

Gateway::Gateway(std::unique_ptr<GatewayImpl> impl) : impl_(std::move(impl)) {}
Gateway::~Gateway() {
  if (impl_) impl_->stop(std::chrono::milliseconds(1000));
}
Status Gateway::start() { return impl_->start(); }
size_t Gateway::drain(std::chrono::milliseconds grace) { return impl_->drain(grace); }
void Gateway::stop(std::chrono::milliseconds grace) { impl_->stop(grace); }
uint16_t Gateway::port() const { return impl_->server_->port(); }
uint16_t Gateway::grpc_port() const { return impl_->grpc_front_ ? impl_->grpc_front_->port() : 0; }
uint16_t Gateway::metrics_port() const {
  return impl_->metrics_server_ ? impl_->metrics_server_->port() : 0;
}
Status Gateway::add_worker(std::string_view url, std::vector<workers::KvEndpoint> kv_endpoints) {
  return impl_->add_worker(url, std::move(kv_endpoints));
}
bool Gateway::remove_worker(std::string_view url) { return impl_->remove_worker(url); }
const workers::WorkerRegistry& Gateway::registry() const { return impl_->workers_; }
const index::Indexer& Gateway::index() const { return *impl_->raw_index_; }
std::string Gateway::metrics_text() { return impl_->metrics_text(); }
void Gateway::set_config_reader(ConfigReader reader, FlagValues values) {
  impl_->set_config_reader(std::move(reader), std::move(values));
}
ReloadOutcome Gateway::reload() { return impl_->reload(); }
void Gateway::flush_events() {
  if (impl_->ingest_) impl_->ingest_->flush();
}

}  // namespace kvgate::app
