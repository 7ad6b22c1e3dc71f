// The gateway's parts and their wiring (gateway.cc), and the operator's routes (admin_routes.cc);
// generation requests go to its GenerationPipeline (app/generation/).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"

#include "app/access.h"
#include "app/access_log.h"
#include "app/admission_gate.h"
#include "app/answer_memory.h"
#include "app/config_reload.h"
#include "app/cors.h"
#include "app/decision_report.h"
#include "app/fleet_pulse.h"
#include "app/fleet_sync.h"
#include "app/gateway_metrics.h"
#include "app/generation/pipeline.h"
#include "app/grpc_front.h"
#include "app/limit_shares.h"
#include "app/pod_discovery.h"
#include "app/request_model.h"
#include "app/routing_input.h"
#include "app/state_sync_metrics.h"
#include "app/upstream_pool.h"
#include "app/worker_control.h"
#include "app/worker_exchange.h"
#include "kvgate/app/config.h"
#include "kvgate/core/holder_ids.h"
#include "kvgate/core/numa.h"
#include "kvgate/events/ingest.h"
#include "kvgate/http/io_pool.h"
#include "kvgate/http/server.h"
#include "kvgate/index/indexer.h"
#include "kvgate/metrics/metrics.h"
#include "kvgate/metrics/process.h"
#include "kvgate/policy/policy.h"
#include "kvgate/relay/follower.h"
#include "kvgate/sync/state_sync.h"
#include "kvgate/workers/registry.h"

namespace kvgate {
class JsonWriter;
}

namespace kvgate::app {

// admin_routes.cc: the workers routing may choose now.
size_t routable_workers(const workers::FleetSnapshot& fleet);

class GatewayImpl {
 public:
  GatewayImpl(GatewayConfig config, const Clock& clock);
  Status init();
  Status start();
  size_t drain(std::chrono::milliseconds grace);
  void stop(std::chrono::milliseconds grace);

  // A worker an operator adds or removes here (command line, POST / DELETE /workers, the
  // library): registered or unregistered, and, with state sync, shared with the peer replicas.
  // `api_key`: the worker's own credential (WorkerControl::add), kept on this replica only.
  Status add_worker(std::string_view url, std::vector<workers::KvEndpoint> kv_endpoints,
                    std::string_view api_key = {}, const WorkerSpec& role = {});
  bool remove_worker(std::string_view url);
  std::string metrics_text();
  // config_reload.cc
  void set_config_reader(ConfigReader reader, FlagValues values);
  ReloadOutcome reload();

 private:
  friend class Gateway;  // the public face reads its listeners' ports, the registry, the index

  // init()'s steps: the access log, the tokenizers, the executors' layout, the index, the
  // policy with its upstreams and worker control, the client-facing and metrics servers.
  Status init_access_log();
  Status init_tokenizers();
  Status init_thread_layout();
  Status init_index();
  Status init_routing();
  void init_server();
  void init_metrics_server();
  // The generation pipeline, built by init() from the parts it reads.
  void init_generation();
  // --worker-urls, --prefill and --decode, each added with its role.
  void add_command_line_workers();
  // The admission gate's bound on requests waiting for a first token: --worker-max-prefilling
  // times the routable workers that take prompts (empty without the flag).
  std::function<size_t()> prefill_capacity();
  // config_reload.cc: a reload's steps.
  ReloadOutcome reload_locked() KVGATE_REQUIRES(reload_mu_);
  void apply_static_workers(const GatewayConfig& next);
  void remember_live(const GatewayConfig& next) KVGATE_REQUIRES(reload_mu_);
  // observe_routes.cc: GET /debug/route, GET /dashboard and its JSON, and the pulse they read
  // (sampled once a second on the parse thread, off the executors).
  void add_observe_routes();
  http::Response debug_route(const http::Request& req);
  std::string dashboard_state();
  // The dashboard's tenants: each tenant series' counts and the admission queue by class.
  void write_tenants(JsonWriter& w) const;
  void start_pulse();
  void arm_pulse();
  void sample_pulse();
  // Registers a route behind the access rule for it (app/access.h). Unless the handler writes
  // its own access-log line (generation does, with the decision's fields), the route's is
  // written for it.
  void route(http::Verb method, std::string path, Access access, http::Handler handler,
             bool logs_own_access = false);
  // `handler` behind the access rule and the CORS answer (every route goes through it).
  http::Handler guarded(Access access, http::Handler handler, bool logs_own_access = false) const;
  // --state-sync: the fleet's sharing, built here and started by start().
  Status init_state_sync();
  // admin_routes.cc
  void add_admin_routes();
  // /readiness's rule (gRPC health follows it): a routable worker, and not draining.
  bool ready(const workers::FleetSnapshot& fleet) const;
  void add_info_routes();
  // The request (its method and body) sent on to `path` of the least busy routable worker, and
  // its answer forwarded.
  http::Handler worker_answer(std::string path);
  // tokenize_routes.cc: POST /tokenize and /detokenize (vLLM's shapes), answered here with the
  // model's tokenizer, else by a worker.
  void add_tokenize_routes();
  // POST /tokenize's (or /detokenize's) handler: the HTTP route's, and the gRPC API's Tokenize.
  http::Handler tokenize_handler(const char* path);

  GatewayConfig config_;
  const Clock& clock_;
  const std::string instance_id_;  // this process, in the hop header of forwarded requests
  AccessGuard access_;             // its keys rotate on a reload
  const Cors cors_;
  std::unique_ptr<AccessLog> access_log_;
  DecisionHeaders decision_headers_ = DecisionHeaders::kRequest;
  std::unique_ptr<AdmissionGate> admission_;  // --max-concurrent-requests
  // --numa / --numa-topology (an error here fails init()); nodes() is 1 on the plain layout.
  const Result<NumaTopology> numa_;
  size_t numa_nodes() const { return numa_.ok() ? numa_->size() : 1; }
  http::IoPool io_;
  // One thread for parsing large request bodies (parse_thread_ runs it).
  boost::asio::io_context parse_context_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      parse_work_;
  std::thread parse_thread_;
  metrics::Registry registry_;
  std::unique_ptr<GatewayMetrics> metrics_;
  metrics::Gauge* threads_pinned_ = nullptr;   // kvgate_executor_threads_pinned, set at start()
  std::unique_ptr<index::Indexer> raw_index_;  // what the event lanes apply to
  std::unique_ptr<index::Indexer> index_;      // what routing reads: raw_index_, instrumented
  HolderIdAllocator holders_;
  std::unique_ptr<events::EventIngest> ingest_;
  std::unique_ptr<relay::RelayFollower> follower_;      // --kv-events-relay (then no ingest_)
  std::unique_ptr<RelayFollowMetrics> follow_metrics_;  // with follower_
  workers::WorkerRegistry workers_;
  std::unique_ptr<policy::Policy> policy_;         // with --pd-disaggregation, the prefill side's
  std::unique_ptr<policy::Policy> decode_policy_;  // --pd-disaggregation only
  std::unique_ptr<UpstreamPool> upstream_;
  std::unique_ptr<WorkerControl> control_;
  std::unique_ptr<PodDiscovery> discovery_;                 // --service-discovery
  std::unique_ptr<PodDiscoveryMetrics> discovery_metrics_;  // with discovery_
  std::unique_ptr<LimitShares> limit_shares_;               // --state-sync
  std::unique_ptr<FleetSync> fleet_sync_;                   // --state-sync
  std::unique_ptr<sync::StateSync> state_sync_;             // with fleet_sync_
  std::unique_ptr<StateSyncMetrics> sync_metrics_;          // with fleet_sync_
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<http::Server> metrics_server_;  // --prometheus-port
  std::unique_ptr<GrpcFront> grpc_front_;         // --grpc-port
  std::unique_ptr<metrics::ProcessMetrics> process_metrics_;
  PromptTokenizers tokenizers_;            // --tokenizer (the test tokenizer without)
  std::unique_ptr<AnswerMemory> answers_;  // --no-answer-prewarm, or no chat template: none
  const RoutingInput routing_;  // what decisions are asked (the pipeline and /debug/route)
  std::unique_ptr<GenerationPipeline> generation_;
  bool started_ = false;
  // Graceful shutdown (drain()): draining_ refuses new generations and fails readiness;
  // shutting_down_ (the grace period ended) cuts what still runs.
  std::atomic<bool> draining_{false};
  std::atomic<bool> shutting_down_{false};
  std::atomic<int64_t> active_generations_{0};  // generation handlers running
  // The dashboard's history (observe_routes.cc); the timer runs on parse_context_.
  FleetPulse pulse_;
  // Reloads (config_reload.cc) take turns; live_config_ is config_ with what they applied.
  Mutex reload_mu_;
  ConfigReader config_reader_ KVGATE_GUARDED_BY(reload_mu_);
  FlagValues running_values_ KVGATE_GUARDED_BY(reload_mu_);
  GatewayConfig live_config_ KVGATE_GUARDED_BY(reload_mu_);
  std::unique_ptr<ConfigReloadMetrics> reload_metrics_;
  std::unique_ptr<TenantMetrics> tenant_metrics_;  // kvgate_tenant_*, filled by the keys file
  std::unique_ptr<boost::asio::steady_timer> pulse_timer_;
  MonoTime started_at_{};
};

}  // namespace kvgate::app
