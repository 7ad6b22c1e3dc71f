// Workers from Kubernetes pods (--service-discovery). One pod watcher per selector (--selector;
// in a disaggregated fleet --prefill-selector and --decode-selector) turns each pod that serves
// (Running, Ready, with an IP, not being deleted) into a worker at http://POD_IP:PORT
// (--service-discovery-port), and a pod that stops serving (NotReady, deleted, or being deleted)
// out of the fleet: it gets no new request and the requests it runs finish. A pod whose IP changed
// is a removal and an addition. Discovered workers sit beside --worker-urls and POST /workers;
// GET /workers names each one's source.
//
// What an engine cannot say itself comes from its pod's annotations (deploy/kubernetes/README.md):
//   kvgate.io/kv-events-endpoint         rank 0's KV-event publisher, tcp://HOST:PORT or a port
//                                        (on the pod's IP); rank r publishes on PORT + r
//   kvgate.io/kv-events-replay-endpoint  rank 0's replay socket, likewise
//   kvgate.io/dp-size                    its data-parallel ranks (default 1)
//   kvgate.io/bootstrap-port             a prefill pod's bootstrap port (SGLang); SGLang's own
//                                        sglang.ai/bootstrap-port is read too
//
// Threading: start() and stop() from the gateway's control thread; the watchers run on this
// part's own thread, which alone calls into WorkerControl; status() from any thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/worker_control.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "kvgate/app/config.h"
#include "kvgate/core/result.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/kube/api_server.h"
#include "kvgate/kube/pod.h"
#include "kvgate/kube/pod_watcher.h"
#include "kvgate/kube/selector.h"
#include "kvgate/metrics/metrics.h"

namespace kvgate::app {

// A pod as a worker: its URL, role and KV-event endpoints; nullopt while it does not serve.
struct PodWorker {
  std::string url;
  WorkerSpec spec;
  std::vector<workers::KvEndpoint> kv_endpoints;
};
// `problem`, when given, gets what was wrong with an annotation (the pod is still a worker,
// without what the annotation would have said).
std::optional<PodWorker> worker_of_pod(const kube::Pod& pod, workers::WorkerRole role,
                                       uint16_t port, std::string* problem = nullptr);

class PodDiscovery {
 public:
  // The API server from --kubeconfig, else the pod's own service account; the selectors and the
  // namespace from the flags. Fails naming what is missing (no credentials, a bad selector).
  static Result<std::unique_ptr<PodDiscovery>> create(const GatewayConfig& config,
                                                      WorkerControl& control);
  ~PodDiscovery();

  void start();
  void stop();  // idempotent; the discovered workers stay registered

  struct Snapshot {
    bool connected = false;       // every watcher has listed and is watching
    size_t workers = 0;           // discovered workers registered now
    std::string last_error;       // the latest failure to reach the API server ("" when none)
    kube::WatcherStats watchers;  // summed over the watchers
  };
  Snapshot status() const;

 private:
  struct Side {
    workers::WorkerRole role = workers::WorkerRole::kRegular;
    std::unique_ptr<kube::PodWatcher> watcher;
    std::map<std::string, PodWorker> serving;  // by URL: this side's serving pods (thread_)
  };
  PodDiscovery(const GatewayConfig& config, WorkerControl& control);
  // A watcher's pods: its side's serving set replaced, then the fleet reconciled (thread_).
  void on_pods(Side& side, const std::vector<kube::Pod>& pods);
  void reconcile();

  const GatewayConfig& config_;
  WorkerControl& control_;
  boost::asio::io_context ctx_;
  boost::asio::steady_timer retry_;  // reconciles again after a refused add (thread_)
  bool retry_armed_ = false;         // thread_
  std::thread thread_;
  std::vector<std::unique_ptr<Side>> sides_;
  std::map<std::string, PodWorker> registered_;  // what this part added (thread_)
  mutable Mutex mu_;
  size_t registered_count_ KVGATE_GUARDED_BY(mu_) = 0;
};

// The gateway's view of pod discovery in /metrics, one stats table: whether every watcher is
// connected, the discovered workers, and the watchers' lists, watches, relists after 410 Gone,
// reconnects, events, bookmarks, quiet watches renewed and token reloads.
// Threading: sync() from any thread (scrapes of both listeners take turns).
class PodDiscoveryMetrics {
 public:
  explicit PodDiscoveryMetrics(metrics::Registry& registry);
  void sync(const PodDiscovery::Snapshot& s);

 private:
  metrics::Gauge& connected_;
  metrics::Gauge& workers_;
  metrics::Family<metrics::Counter>& calls_;
  Mutex mu_;
};

}  // namespace kvgate::app
