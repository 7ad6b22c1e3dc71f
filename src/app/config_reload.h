// Configuration reload (SIGHUP, POST /admin/reload): the flags read again, compared with those
// the gateway runs with, and the changes that can apply while serving applied.
//
// What applies while serving (kLiveFlags): the workers the command line or file names (added and
// removed; the requests in flight on a removed one finish), the cache-aware policy's balance,
// wait-spill and overload figures, a new client or admin key (rotation: turning --api-key on or
// off changes which headers reach the engines, so that waits for a restart), and the log level.
// Any other changed flag is named as waiting for a restart, and keeps its running value. A file
// or line that does not parse changes nothing; the error is logged and answered.
//
// Threading: ConfigReloadMetrics::record() from any thread (reloads are serialized by the
// gateway).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "app/worker_control.h"
#include "kvgate/app/config.h"
#include "kvgate/app/gateway.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/message.h"
#include "kvgate/metrics/metrics.h"

namespace kvgate::app {

// A worker the command line (or its file) names, as the gateway registers it.
struct StaticWorker {
  std::string url;  // normalized
  WorkerSpec spec;
  std::vector<workers::KvEndpoint> kv_endpoints;  // --kv-events-endpoint URL=... for it
};
std::vector<StaticWorker> static_workers(const GatewayConfig& config);

// The cache-aware figures the prefill side (or the only side) routes by: the fleet's, with
// --prefill-overload-waiting-requests as a disaggregated fleet's prefill gate. At start and on
// every reload.
policy::CacheAwareConfig routing_figures(const GatewayConfig& config);

// The flags whose changes differ between two sets of values, split into those a running gateway
// applies and those that wait for a restart (sorted). `before` and `after` are LoadedConfig's.
struct FlagChanges {
  std::vector<std::string> live;
  std::vector<std::string> restart;
};
FlagChanges changed_flags(const FlagValues& before, const FlagValues& after,
                          const GatewayConfig& running, const GatewayConfig& next);

// POST /admin/reload's answer: 200 naming the flags applied and those waiting for a restart, or
// 400 with the error.
http::Response reload_answer(const ReloadOutcome& outcome);

// kvgate_config_*: reloads by result, the last one's time and success, and how many changed
// flags wait for a restart.
class ConfigReloadMetrics {
 public:
  explicit ConfigReloadMetrics(metrics::Registry& registry);
  void record(const ReloadOutcome& outcome, double unix_seconds);

 private:
  Mutex mu_;
  metrics::Family<metrics::Counter>& reloads_;
  metrics::Counter& applied_;
  metrics::Counter& refused_;
  metrics::Gauge& last_time_;
  metrics::Gauge& last_success_;
  metrics::Gauge& pending_restart_;
};

}  // namespace kvgate::app
