// WorkerControl: the fleet's control path.
//
// Liveness: a timer on the control thread applies each worker's liveness rules (workers/
// liveness.h) every 100 ms; a veto (wedged, unreachable, or a health check turning the worker
// unhealthy) reaches the requests in flight there (workers/inflight.h), and a wedged worker gets a
// one-token probe generation now and then so that it can prove it generates again.
//
// Adding a worker registers it (not yet routable), then a per-worker loop on the control thread
// discovers it (GET /v1/models for its models and LoRA adapters; GET /server_info, else SGLang's
// /get_server_info, for its KV event endpoints per dp rank and its block size; explicit endpoints
// from the command line take precedence), subscribes its ranks' KV events, probes GET /health with
// hysteresis, and polls its load (GET /load, else the vLLM gauges on /metrics).
// Removing a worker leaves nothing behind: registry entry, control loop, KV subscriptions and index
// holders, holder ids, idle upstream connections, policy state and metric series.
//
// Threading: add(), remove() and stop() from any thread except the control thread; the loops run
// on the control thread (its own io_context), so slow workers never stall request handling.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "app/gateway_metrics.h"
#include "app/relay_follow_metrics.h"
#include "app/self_address.h"
#include "app/upstream_pool.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "kvgate/app/config.h"
#include "kvgate/app/discovery.h"
#include "kvgate/core/holder_ids.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/events/ingest.h"
#include "kvgate/policy/policy.h"
#include "kvgate/relay/follower.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {

// A worker's role in a prefill/decode disaggregated fleet, as the operator gives it.
// How a worker joins: its role in a prefill/decode fleet (regular: none), a prefill's bootstrap
// port, and where it came from.
struct WorkerSpec {
  workers::WorkerRole role = workers::WorkerRole::kRegular;
  uint16_t bootstrap_port = 0;  // a prefill worker's (SGLang), 0: none
  workers::WorkerSource source = workers::WorkerSource::kFlags;
};

struct WorkerControlDeps {
  const GatewayConfig* config = nullptr;
  workers::WorkerRegistry* registry = nullptr;
  HolderIdAllocator* holders = nullptr;
  events::EventIngest* ingest = nullptr;     // null without KV events, or with them from a relay
  relay::RelayFollower* follower = nullptr;  // --kv-events-relay
  RelayFollowMetrics* follow_metrics = nullptr;  // with follower
  policy::Policy* policy = nullptr;
  UpstreamPool* upstream = nullptr;
  GatewayMetrics* metrics = nullptr;
  const Clock* clock = nullptr;
  // Verifies https workers' certificates (--worker-ca-path, else the system's roots).
  std::shared_ptr<boost::asio::ssl::context> worker_tls;
};

// What the gateway's own requests to a worker carry as their Authorization: the credentials of
// its URL (user:password@), else its own `api_key` (POST /workers), else the fleet's
// (--worker-api-key); empty when it has none. Never a client's key (worker_exchange.h decides
// that).
std::string engine_authorization(const workers::WorkerAddress& address, std::string_view api_key,
                                 std::string_view fleet_api_key);

class WorkerControl {
 public:
  explicit WorkerControl(WorkerControlDeps deps);
  ~WorkerControl();

  // Registers the worker and starts its control loop. `kv_endpoints` (may be empty) replace
  // discovery of its KV event streams. The gateway's requests to it carry, as their
  // Authorization, the URL's credentials, else `api_key` (the worker's own), else
  // --worker-api-key (engine_authorization()). Refused: a URL that leads back to the gateway
  // (InvalidArgument), one that reaches an engine already registered under another name
  // (AlreadyExists), one past --max-workers (ResourceExhausted). Resolves the URL's host name
  // (blocking, once).
  // `role`: its role in a prefill/decode fleet (regular: none), and a prefill's bootstrap port.
  Status add(std::string_view url, std::vector<workers::KvEndpoint> kv_endpoints = {},
             std::string_view api_key = {}, const WorkerSpec& role = {});
  // False if the worker was not registered.
  bool remove(std::string_view url);
  // Probes the worker's health at its loop's next tick instead of at its interval (a peer
  // replica saw it fail). False if the worker is not registered.
  bool probe_soon(std::string_view url);
  // One of the gateway's own listeners (`name` says which: HTTP, Prometheus, gRPC): add()
  // refuses a worker URL that reaches it (self_address.h). Resolves `host` (blocking, once).
  void add_listener(std::string name, const std::string& host, uint16_t port);
  // Stops every loop (workers stay registered). Idempotent.
  void stop();

 private:
  struct Entry;
  boost::asio::awaitable<void> run(std::shared_ptr<Entry> e);
  boost::asio::awaitable<void> discover(Entry& e);
  // --kv-events-relay: follows the worker's ranks on the relay (with mu_ held).
  void follow(Entry& e, uint32_t ranks);
  boost::asio::awaitable<void> probe(Entry& e);
  boost::asio::awaitable<void> poll_load(Entry& e);
  // Every kLivenessTick: applies the liveness rules to every worker and acts on each change.
  boost::asio::awaitable<void> watch_liveness();
  void on_liveness(Entry& e, const workers::LivenessTransition& t);
  // While the worker is wedged: a one-token streamed generation now and then, whose token is the
  // progress that ends the veto once the engine generates again.
  boost::asio::awaitable<void> probe_wedged(std::shared_ptr<Entry> e);
  // The prefill/decode protocol, bootstrap port and role the engine's /server_info says, into
  // `info` (a role other than the registered one is logged once).
  static void note_disaggregation(Entry& e, const ServerInfo& si, workers::WorkerInfo& info);
  // `kv_blocks`: the engine's KV pool per rank (0: unknown), passed on as the index's size hint.
  void subscribe(Entry& e, const std::vector<workers::KvEndpoint>& endpoints, uint64_t kv_blocks)
      KVGATE_REQUIRES(mu_);
  // What the worker's event streams say: its block size, and which ranks are degraded.
  void refresh_from_events(Entry& e);

  WorkerControlDeps deps_;
  boost::asio::io_context ctx_;
  std::unique_ptr<boost::asio::steady_timer> liveness_timer_;  // control thread only
  std::thread thread_;
  Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> entries_ KVGATE_GUARDED_BY(mu_);
  bool stopped_ KVGATE_GUARDED_BY(mu_) = false;
  SelfAddresses self_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace kvgate::app
