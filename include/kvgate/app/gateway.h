// Gateway: the `kvgate` process as a library: everything wired together, for main() and for tests
// that run a real gateway in-process against a mock fleet.
//
// Threading: create(), start() and stop() from one control thread; the accessors from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/app/config.h"
#include "kvgate/core/clock.h"
#include "kvgate/core/result.h"
#include "kvgate/index/indexer.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {

class GatewayImpl;

// kvgate's version, as --version and GET /version give it.
inline constexpr const char* kVersion = "0.1.0";

// What a configuration reload did (SIGHUP, POST /admin/reload; app/config_reload.h).
struct ReloadOutcome {
  bool ok = false;
  std::string error;                      // why nothing changed (ok false)
  std::vector<std::string> applied;       // changed flags whose new values now hold
  std::vector<std::string> need_restart;  // changed flags that keep their running values
};
// Reads the configuration again: main's is load_config() on its own arguments.
using ConfigReader = std::function<Result<LoadedConfig>()>;

class Gateway {
 public:
  static Result<std::unique_ptr<Gateway>> create(GatewayConfig config,
                                                 const Clock& clock = Clock::real());
  ~Gateway();

  // Listens, then registers the configured workers (their discovery runs in the background).
  Status start();
  // Graceful shutdown, before stop(): /readiness and /health answer 503 "draining", new
  // generation requests are refused with 503 (a load balancer retries them on another replica),
  // every response closes its connection, and the requests in flight go on until they end or
  // `grace` passes. Then what still runs is ended: a stream with an SSE error event, a request
  // that has sent nothing yet with a 503. Returns how many were still running at `grace`.
  size_t drain(std::chrono::milliseconds grace);
  // Stops listening, lets in-flight requests end (up to `grace`), stops every background task.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

  uint16_t port() const;
  // The gRPC front end's port (--grpc-port), 0 when it is off.
  uint16_t grpc_port() const;
  // The metrics listener's port (--prometheus-port), 0 when there is none.
  uint16_t metrics_port() const;
  // How reload() reads the configuration again, and the flags' values the gateway was created
  // with (LoadedConfig::values). Any time; without it reload() refuses.
  void set_config_reader(ConfigReader reader, FlagValues values);
  // Reads the configuration and applies what changed and can change while serving. Any thread;
  // reloads take turns.
  ReloadOutcome reload();
  Status add_worker(std::string_view url, std::vector<workers::KvEndpoint> kv_endpoints = {});
  bool remove_worker(std::string_view url);
  const workers::WorkerRegistry& registry() const;
  const index::Indexer& index() const;
  // Waits until every KV-event batch received so far has been applied to the index: then, with
  // the fleet quiet, the index's content can be read (Indexer::memberships needs no writer).
  void flush_events();
  std::string metrics_text();

 private:
  explicit Gateway(std::unique_ptr<GatewayImpl> impl);
  std::unique_ptr<GatewayImpl> impl_;
};

}  // namespace kvgate::app
