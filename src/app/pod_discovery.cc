#include "app/pod_discovery.h"

#include <charconv>

#include "kvgate/core/log.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {
namespace {

std::shared_ptr<spdlog::logger> discovery_log() {
  static auto l = log::get("discovery");
  return l;
}

// How soon a pod's worker that the fleet refused (already registered from elsewhere, past
// --max-workers) is offered again.
constexpr std::chrono::seconds kRetryRefused{5};

constexpr std::string_view kEventsAnnotation = "kvgate.io/kv-events-endpoint";
constexpr std::string_view kReplayAnnotation = "kvgate.io/kv-events-replay-endpoint";
constexpr std::string_view kDpSizeAnnotation = "kvgate.io/dp-size";
constexpr std::string_view kBootstrapAnnotations[] = {"kvgate.io/bootstrap-port",
                                                      "sglang.ai/bootstrap-port"};

std::string_view annotation(const kube::Pod& pod, std::string_view name) {
  const auto it = pod.annotations.find(std::string(name));
  return it == pod.annotations.end() ? std::string_view() : std::string_view(it->second);
}

std::optional<uint32_t> number(std::string_view s, uint32_t most) {
  uint32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v == 0 || v > most) return std::nullopt;
  return v;
}

// An endpoint annotation: "tcp://HOST:PORT" (a wildcard host is the pod's IP) or a bare port on
// the pod's IP; its host and port apart, nullopt when it is neither.
struct HostPort {
  std::string host;
  uint32_t port = 0;
};
std::optional<HostPort> endpoint_of(std::string_view value, const std::string& pod_ip) {
  if (value.rfind("tcp://", 0) == 0) value.remove_prefix(6);
  const size_t colon = value.rfind(':');
  std::string host = colon == std::string_view::npos ? pod_ip : std::string(value.substr(0, colon));
  if (host.empty() || host == "*" || host == "0.0.0.0" || host == "[::]") host = pod_ip;
  const std::optional<uint32_t> port =
      number(colon == std::string_view::npos ? value : value.substr(colon + 1), 65535);
  if (!port) return std::nullopt;
  return HostPort{std::move(host), *port};
}

// The KV-event endpoints the annotations give, one per rank; empty when they give none.
std::vector<workers::KvEndpoint> kv_endpoints_of(const kube::Pod& pod, uint32_t ranks,
                                                 std::string* problem) {
  std::vector<workers::KvEndpoint> out;
  const std::string_view events = annotation(pod, kEventsAnnotation);
  if (events.empty()) return out;
  const std::optional<HostPort> pub = endpoint_of(events, pod.ip);
  const std::string_view replay_text = annotation(pod, kReplayAnnotation);
  const std::optional<HostPort> replay =
      replay_text.empty() ? std::nullopt : endpoint_of(replay_text, pod.ip);
  if (!pub || pub->port + ranks - 1 > 65535) {
    *problem = std::string(kEventsAnnotation) + " is not tcp://HOST:PORT or a port";
    return out;
  }
  if (!replay_text.empty() && (!replay || replay->port + ranks - 1 > 65535)) {
    *problem = std::string(kReplayAnnotation) + " is not tcp://HOST:PORT or a port";
  }
  for (uint32_t r = 0; r < ranks; ++r) {
    workers::KvEndpoint e;
    e.rank = static_cast<DpRank>(r);
    e.publisher = "tcp://" + pub->host + ":" + std::to_string(pub->port + r);
    if (replay && problem->empty()) {
      e.replay = "tcp://" + replay->host + ":" + std::to_string(replay->port + r);
    }
    out.push_back(std::move(e));
  }
  return out;
}

// The URL host of an IP: IPv6 in brackets.
std::string url_host(const std::string& ip) {
  return ip.find(':') == std::string::npos ? ip : "[" + ip + "]";
}

}  // namespace

std::optional<PodWorker> worker_of_pod(const kube::Pod& pod, workers::WorkerRole role,
                                       uint16_t port, std::string* problem) {
  if (!pod.serving()) return std::nullopt;
  std::string ignored;
  if (problem == nullptr) problem = &ignored;
  problem->clear();
  PodWorker w;
  w.url = "http://" + url_host(pod.ip) + ":" + std::to_string(port);
  w.spec.role = role;
  w.spec.source = workers::WorkerSource::kKubernetes;
  uint32_t ranks = 1;
  if (const std::string_view dp = annotation(pod, kDpSizeAnnotation); !dp.empty()) {
    const std::optional<uint32_t> n = number(dp, workers::kMaxDpRanks);
    if (n) ranks = *n;
    if (!n) *problem = std::string(kDpSizeAnnotation) + " is not a rank count";
  }
  std::string endpoint_problem;
  w.kv_endpoints = kv_endpoints_of(pod, ranks, &endpoint_problem);
  if (!endpoint_problem.empty()) *problem = endpoint_problem;
  for (std::string_view name : kBootstrapAnnotations) {
    const std::string_view value = annotation(pod, name);
    if (value.empty() || role != workers::WorkerRole::kPrefill) continue;
    const std::optional<uint32_t> p = number(value, 65535);
    if (p) w.spec.bootstrap_port = static_cast<uint16_t>(*p);
    if (!p) *problem = std::string(name) + " is not a port";
    break;
  }
  return w;
}

// ---- PodDiscovery ------------------------------------------------------------------------------

PodDiscovery::PodDiscovery(const GatewayConfig& config, WorkerControl& control)
    : config_(config), control_(control), retry_(ctx_) {}

PodDiscovery::~PodDiscovery() { stop(); }

Result<std::unique_ptr<PodDiscovery>> PodDiscovery::create(const GatewayConfig& config,
                                                           WorkerControl& control) {
  Result<kube::ApiServer> server = config.kubeconfig.empty()
                                       ? kube::in_cluster(config.service_account_dir)
                                       : kube::from_kubeconfig(config.kubeconfig);
  if (!server.ok()) {
    return absl::FailedPreconditionError(
        "--service-discovery: no way to reach the Kubernetes API server: " +
        std::string(message_of(server.status())) +
        " (run in a pod with a service account, or give --kubeconfig)");
  }
  std::unique_ptr<PodDiscovery> d(new PodDiscovery(config, control));
  const auto add_side = [&](const std::string& text, workers::WorkerRole role) -> Status {
    Result<kube::Selector> selector = kube::Selector::parse(text);
    if (!selector.ok()) return selector.status();
    auto side = std::make_unique<Side>();
    side->role = role;
    kube::WatcherOptions o;
    o.server = *server;
    // The flag's, else the account's or the kubeconfig context's, else "default".
    o.namespace_name = !config.discovery_namespace.empty() ? config.discovery_namespace
                       : !server->namespace_name.empty()   ? server->namespace_name
                                                           : "default";
    o.selector = std::move(*selector);
    Side* s = side.get();
    side->watcher = std::make_unique<kube::PodWatcher>(
        d->ctx_, std::move(o),
        [raw = d.get(), s](const std::vector<kube::Pod>& pods) { raw->on_pods(*s, pods); });
    d->sides_.push_back(std::move(side));
    return absl::OkStatus();
  };
  Status s = absl::OkStatus();
  if (config.pd_disaggregation) {
    s = add_side(config.prefill_selector, workers::WorkerRole::kPrefill);
    if (s.ok()) s = add_side(config.decode_selector, workers::WorkerRole::kDecode);
  } else {
    s = add_side(config.selector, workers::WorkerRole::kRegular);
  }
  if (!s.ok()) return s;
  return d;
}

void PodDiscovery::start() {
  for (auto& side : sides_) side->watcher->start();
  thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(ctx_);
    ctx_.run();
  });
}

void PodDiscovery::stop() {
  if (!thread_.joinable()) return;
  for (auto& side : sides_) side->watcher->stop();
  ctx_.stop();
  thread_.join();
}

void PodDiscovery::on_pods(Side& side, const std::vector<kube::Pod>& pods) {
  side.serving.clear();
  for (const kube::Pod& pod : pods) {
    std::string problem;
    std::optional<PodWorker> w = worker_of_pod(pod, side.role, config_.discovery_port, &problem);
    if (!problem.empty()) {
      KVGATE_LOG_EVERY_MS(discovery_log(), spdlog::level::warn, 5000, "pod {}/{}: {}",
                          pod.namespace_name, pod.name, problem);
    }
    if (w) side.serving.emplace(w->url, std::move(*w));
  }
  reconcile();
}

// The fleet made to match the serving pods: workers of pods gone or not serving removed (their
// requests in flight finish), new ones added, a pod whose role or endpoints changed re-added.
void PodDiscovery::reconcile() {
  std::map<std::string, const PodWorker*> wanted;
  for (const auto& side : sides_) {
    for (const auto& [url, w] : side->serving) wanted.emplace(url, &w);
  }
  for (auto it = registered_.begin(); it != registered_.end();) {
    const auto want = wanted.find(it->first);
    const bool same = want != wanted.end() && want->second->spec.role == it->second.spec.role &&
                      want->second->kv_endpoints == it->second.kv_endpoints;
    if (same) {
      ++it;
      continue;
    }
    control_.remove(it->first);
    discovery_log()->info("worker {} removed: its pod no longer serves", it->first);
    it = registered_.erase(it);
  }
  bool refused = false;
  for (const auto& [url, w] : wanted) {
    if (registered_.count(url) != 0) continue;
    const Status s = control_.add(url, w->kv_endpoints, {}, w->spec);
    if (!s.ok()) {
      refused = true;
      KVGATE_LOG_EVERY_MS(discovery_log(), spdlog::level::warn, 5000,
                          "pod worker {} not added (tried again every {} s): {}", url,
                          kRetryRefused.count(), message_of(s));
      continue;
    }
    registered_.emplace(url, *w);
  }
  // A refusal can pass without a pod event (the same engine registered under another source
  // leaves, --max-workers makes room): try again until every serving pod is a worker.
  if (refused && !retry_armed_) {
    retry_armed_ = true;
    retry_.expires_after(kRetryRefused);
    retry_.async_wait([this](const boost::system::error_code& ec) {
      retry_armed_ = false;
      if (!ec) reconcile();
    });
  }
  MutexLock lock(&mu_);
  registered_count_ = registered_.size();
}

PodDiscovery::Snapshot PodDiscovery::status() const {
  Snapshot out;
  out.connected = !sides_.empty();
  for (const auto& side : sides_) {
    const kube::WatcherStats s = side->watcher->stats();
    out.connected = out.connected && s.connected;
    if (!s.last_error.empty()) out.last_error = s.last_error;
    out.watchers.lists += s.lists;
    out.watchers.watches += s.watches;
    out.watchers.relists_gone += s.relists_gone;
    out.watchers.reconnects += s.reconnects;
    out.watchers.events += s.events;
    out.watchers.bookmarks += s.bookmarks;
    out.watchers.quiet_renewals += s.quiet_renewals;
    out.watchers.token_reloads += s.token_reloads;
  }
  MutexLock lock(&mu_);
  out.workers = registered_count_;
  return out;
}

// ---- PodDiscoveryMetrics -----------------------------------------------------------------------

PodDiscoveryMetrics::PodDiscoveryMetrics(metrics::Registry& registry)
    : connected_(metrics::gauge_family(registry, "kvgate_discovery_connected",
                                       "1 while every pod watcher has listed its pods and is "
                                       "watching them (--service-discovery).")
                     .Add({})),
      workers_(metrics::gauge_family(registry, "kvgate_discovery_workers",
                                     "Workers registered from serving pods.")
                   .Add({})),
      calls_(metrics::counter_family(
          registry, "kvgate_discovery_api_total",
          "What the pod watchers did with the API server, by kind: list, watch, relist_gone (a "
          "410: the watch's resourceVersion was too old), reconnect, event, bookmark, "
          "quiet_renewal (a watch silent past its timeout), token_reload.")) {}

void PodDiscoveryMetrics::sync(const PodDiscovery::Snapshot& s) {
  MutexLock lock(&mu_);
  connected_.Set(s.connected ? 1 : 0);
  workers_.Set(static_cast<double>(s.workers));
  const kube::WatcherStats& w = s.watchers;
  const std::pair<const char*, uint64_t> kinds[] = {{"list", w.lists},
                                                    {"watch", w.watches},
                                                    {"relist_gone", w.relists_gone},
                                                    {"reconnect", w.reconnects},
                                                    {"event", w.events},
                                                    {"bookmark", w.bookmarks},
                                                    {"quiet_renewal", w.quiet_renewals},
                                                    {"token_reload", w.token_reloads}};
  for (const auto& [kind, n] : kinds) metrics::advance(calls_.Add({{"kind", kind}}), n);
}

}  // namespace kvgate::app
