// WorkerRegistry: the fleet, and the immutable snapshot of it that every routing decision reads.
//
// The request path calls snapshot() (one shared_ptr copy under a lock of its own, never the
// registry's lock; shared_cell.h) and works on a FleetSnapshot that never changes under it. The
// control path (worker add/remove, discovery) mutates under the registry's lock and publishes a
// new snapshot.
//
// Keep the returned pointer while using the snapshot: `for (auto& w : reg.snapshot()->workers)`
// walks a snapshot whose temporary pointer is already released, which the next publish frees.
//
// Threading: every method is safe from any thread.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/clock.h"
#include "kvgate/core/ids.h"
#include "kvgate/core/result.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/workers/shared_cell.h"
#include "kvgate/workers/worker.h"

namespace kvgate::workers {

struct FleetSnapshot {
  uint64_t version = 0;
  // Every registered worker, in registration order, and its description as of this snapshot
  // (decisions read `infos` instead of each Worker's info()).
  std::vector<std::shared_ptr<Worker>> workers;
  std::vector<std::shared_ptr<const WorkerInfo>> infos;
  // HolderId value -> index into `workers`, or -1 (holders of removed workers, unknown ids), and
  // the holder's data-parallel rank.
  std::vector<int32_t> worker_of_holder;
  std::vector<DpRank> rank_of_holder;
  // Union of the workers' models, sorted.
  std::vector<std::string> models;
  // LoRA adapters among them (requests naming one are salted by it, as the engines salt its
  // blocks).
  std::vector<std::string> lora_adapters;
  // The block size routing hashes with: the one most workers reported (0: none known yet).
  uint32_t block_size = 0;
  // The longest context any worker serves, in tokens (0: none reported): a prompt longer cannot
  // run anywhere in the fleet.
  uint32_t max_model_len = 0;

  // Per worker, dense, what a routing decision reads of its description (decisions visit every
  // worker; the descriptions live apart).
  struct Route {
    uint32_t dp_size = 1;
    bool has_events = false;  // it has KV holders (an event stream per rank)
    HolderId only_holder;     // its holder when it has exactly one
    uint64_t kv_tokens = 0;   // its KV pool per rank, in tokens (0: unknown)
  };
  std::vector<Route> routes;
  size_t max_candidates = 0;          // the sum of the workers' dp_size (at least 1 each)
  size_t workers_without_events = 0;  // whose depth routing predicts instead of looking up
  // Per model of `models`, the workers that serve it, as a bitset over `workers` (a worker that
  // reported no models serves any); and the workers that reported none.
  std::vector<std::vector<uint64_t>> servers_of_model;
  std::vector<uint64_t> servers_of_any_model;
  // Per role, its workers as a bitset over `workers`; has_roles: some worker is not regular.
  std::array<std::vector<uint64_t>, kWorkerRoleCount> workers_of_role;
  bool has_roles = false;

  // The workers of `role`, a bitset over `workers`; null: every worker (no worker has a role
  // other than regular, and regular is asked).
  const std::vector<uint64_t>* of_role(WorkerRole role) const {
    if (!has_roles && role == WorkerRole::kRegular) return nullptr;
    return &workers_of_role[static_cast<size_t>(role)];
  }

  // The workers that may serve `model`, a bitset over `workers`; null: any worker (no model).
  const std::vector<uint64_t>* servers_of(std::string_view model) const;
  static bool serves(const std::vector<uint64_t>& bits, size_t i) {
    return (bits[i >> 6] >> (i & 63)) & 1;
  }

  int32_t worker_index_of(HolderId h) const {
    return h.valid() && h.value() < worker_of_holder.size() ? worker_of_holder[h.value()] : -1;
  }
  // True if some worker serves `model` (or no worker has reported models yet: nothing to check).
  bool knows_model(std::string_view model) const;
  const Worker* find(std::string_view url) const;
};

// A worker's address as an operator gives it: http[s]://[user:password@]host:port[/]. The URL the
// gateway keys workers by, shows (/workers, metric labels, logs) and forwards to never carries the
// credentials; they become the Authorization header of the gateway's own requests to the worker.
struct WorkerAddress {
  std::string url;   // http[s]://host:port, scheme and host lower-cased
  bool tls = false;  // https: the gateway's connections to it verify its certificate
  std::string host;
  uint16_t port = 0;
  std::string authorization;  // "Basic <base64(user:password)>", or empty
};
Result<WorkerAddress> parse_worker_url(std::string_view url);
// `url` with any user:password@ part replaced by ***@, for messages about a URL.
std::string redact_url(std::string_view url);

class WorkerRegistry {
 public:
  WorkerRegistry(WorkerOptions options, const Clock& clock);

  // Registers a worker by URL (normalized: scheme and host lower-cased, no trailing slash, no
  // credentials). Fails with AlreadyExists if the URL is registered, InvalidArgument if it is not
  // http[s]://[user:password@]host:port. `authorization`, when given, is what the gateway's
  // requests to the worker carry instead of the URL's credentials.
  Result<std::shared_ptr<Worker>> add(std::string_view url, WorkerInfo info = {},
                                      std::string authorization = {});
  // Unregisters; returns the worker so the caller can tear down what hangs off it.
  std::shared_ptr<Worker> remove(std::string_view url);
  // Replaces a worker's description and republishes. False if the worker is gone.
  bool update_info(WorkerId id, const std::function<void(WorkerInfo&)>& edit);

  std::shared_ptr<const FleetSnapshot> snapshot() const { return snapshot_.load(); }
  std::shared_ptr<Worker> find(std::string_view url) const;
  std::shared_ptr<Worker> find(WorkerId id) const;

  // parse_worker_url(url)->url.
  static Result<std::string> normalize_url(std::string_view url);

 private:
  void publish_locked() KVGATE_REQUIRES(mu_);

  const WorkerOptions options_;
  const Clock& clock_;
  mutable Mutex mu_;
  std::vector<std::shared_ptr<Worker>> workers_ KVGATE_GUARDED_BY(mu_);
  uint32_t next_id_ KVGATE_GUARDED_BY(mu_) = 0;
  uint64_t version_ KVGATE_GUARDED_BY(mu_) = 0;
  SharedCell<FleetSnapshot> snapshot_;
};

}  // namespace kvgate::workers
