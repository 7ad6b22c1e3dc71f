#include "app/worker_control.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/app/discovery.h"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"
#include "kvgate/http/sse.h"
#include "kvgate/index/indexer.h"

namespace kvgate::app {
namespace net = boost::asio;

namespace {

enum class LoadSource { kUnknown, kLoadEndpoint, kMetrics, kNone };

std::shared_ptr<spdlog::logger> control_log() {
  static auto l = log::get("workers");
  return l;
}

}  // namespace

struct WorkerControl::Entry {
  std::shared_ptr<workers::Worker> worker;
  std::string host;
  uint16_t port = 0;
  std::shared_ptr<boost::asio::ssl::context> tls;  // set for an https worker
  std::vector<std::string> ips;                    // what host resolved to when added, sorted
  std::vector<workers::KvEndpoint> explicit_endpoints;
  std::atomic<bool> stop{false};
  std::atomic<bool> probe_soon{false};  // probe at the next tick (probe_soon())
  std::unique_ptr<net::steady_timer> timer;
  std::unique_ptr<http::Connection> conn;  // control thread only
  LoadSource load_source = LoadSource::kUnknown;
  std::vector<HolderKey> subscribed;  // under WorkerControl::mu_
  bool warned_no_events = false;
  bool warned_role = false;
  bool probing_wedged = false;  // control thread only
};

namespace {
constexpr std::chrono::milliseconds kLivenessTick{100};
constexpr std::chrono::seconds kIdleLoadPoll{5};
// How often a worker out of rotation (unhealthy or vetoed) is probed, at most.
constexpr std::chrono::milliseconds kOutOfRotationProbe{500};
}  // namespace

WorkerControl::WorkerControl(WorkerControlDeps deps) : deps_(deps) {
  liveness_timer_ = std::make_unique<net::steady_timer>(ctx_);
  net::co_spawn(ctx_, watch_liveness(), net::detached);
  thread_ = std::thread([this] {
    auto guard = net::make_work_guard(ctx_);
    ctx_.run();
  });
}

WorkerControl::~WorkerControl() {
  stop();
  ctx_.stop();
  if (thread_.joinable()) thread_.join();
}

void WorkerControl::stop() {
  MutexLock lock(&mu_);
  stopped_ = true;
  net::post(ctx_, [this] { liveness_timer_->cancel(); });
  for (auto& entry : entries_) {
    // (Not a structured binding: clang 14 cannot capture one in a lambda.)
    auto& e = entry.second;
    e->stop = true;
    net::post(ctx_, [e] {
      if (e->timer) e->timer->cancel();
    });
  }
}

namespace {

// The numeric addresses `host` resolves to (empty when it does not resolve now).
std::vector<std::string> resolve_host(const std::string& host) {
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<std::string> out;
  if (getaddrinfo(h.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* addr =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(a->ai_family, addr, buf, sizeof buf) == nullptr) continue;
    // One spelling per address: an IPv4-mapped IPv6 address as its IPv4 address.
    boost::system::error_code ec;
    const net::ip::address parsed = net::ip::make_address(buf, ec);
    out.push_back(ec ? std::string(buf) : canonical(parsed).to_string());
  }
  freeaddrinfo(res);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::string engine_authorization(const workers::WorkerAddress& address, std::string_view api_key,
                                 std::string_view fleet_api_key) {
  if (!address.authorization.empty()) return address.authorization;
  if (!api_key.empty()) return "Bearer " + std::string(api_key);
  if (!fleet_api_key.empty()) return "Bearer " + std::string(fleet_api_key);
  return {};
}

void WorkerControl::add_listener(std::string name, const std::string& host, uint16_t port) {
  // A listener's host as the server bound it: an address, or a name bound at its first address.
  std::vector<std::string> addresses = resolve_host(host);
  MutexLock lock(&mu_);
  for (const std::string& a : addresses) {
    boost::system::error_code ec;
    const net::ip::address address = net::ip::make_address(a, ec);
    if (!ec) self_.add({.name = name, .address = address, .port = port});
  }
}

Status WorkerControl::add(std::string_view url, std::vector<workers::KvEndpoint> kv_endpoints,
                          std::string_view api_key, const WorkerSpec& role) {
  auto address = workers::parse_worker_url(url);
  if (!address.ok()) return address.status();
  // Where the URL leads, resolved once here: the same engine under two names is one worker, and
  // the gateway itself is none (a request sent to it would come back, and again).
  const std::vector<std::string> ips = resolve_host(address->host);
  auto e = std::make_shared<Entry>();
  {
    MutexLock lock(&mu_);
    if (stopped_) return absl::FailedPreconditionError("the gateway is stopping");
    for (const std::string& ip : ips) {
      boost::system::error_code ec;
      const Listener* self = self_.reached(net::ip::make_address(ip, ec), address->port);
      if (!ec && self != nullptr) {
        return absl::InvalidArgumentError(
            address->url + " reaches this gateway's own " + self->name + " listener (" + ip + ":" +
            std::to_string(address->port) + "): a worker must be an engine, not the gateway");
      }
    }
    if (entries_.size() >= deps_.config->max_workers) {
      return absl::ResourceExhaustedError("the fleet already has " +
                                          std::to_string(entries_.size()) +
                                          " workers, the most --max-workers allows");
    }
    for (const auto& [other_url, other] : entries_) {
      if (other_url == address->url) {
        return absl::AlreadyExistsError("worker already registered: " + address->url);
      }
      if (other->port != address->port) continue;
      for (const std::string& ip : ips) {
        if (std::binary_search(other->ips.begin(), other->ips.end(), ip)) {
          return absl::AlreadyExistsError(address->url + " is the same engine as " + other_url +
                                          " (both reach " + ip + ":" +
                                          std::to_string(address->port) + ")");
        }
      }
    }
    auto worker = deps_.registry->add(
        url, {.role = role.role, .bootstrap_port = role.bootstrap_port, .source = role.source},
        engine_authorization(*address, api_key, deps_.config->worker_api_key));
    if (!worker.ok()) return worker.status();
    e->worker = *worker;
    e->host = address->host;
    e->port = address->port;
    if (address->tls) e->tls = deps_.worker_tls;
    e->ips = ips;
    e->explicit_endpoints = std::move(kv_endpoints);
    if (deps_.config->health_check_interval.count() == 0)
      e->worker->health().force(workers::Health::kHealthy);
    deps_.metrics->add_worker(e->worker->url(), workers::worker_role_name(role.role));
    entries_[address->url] = e;
  }
  net::co_spawn(ctx_, run(e), net::detached);
  control_log()->info("worker {} added", e->worker->url());
  return absl::OkStatus();
}

bool WorkerControl::probe_soon(std::string_view url) {
  auto normalized = workers::WorkerRegistry::normalize_url(url);
  if (!normalized.ok()) return false;
  MutexLock lock(&mu_);
  auto it = entries_.find(*normalized);
  if (it == entries_.end()) return false;
  it->second->probe_soon = true;
  return true;
}

bool WorkerControl::remove(std::string_view url) {
  auto normalized = workers::WorkerRegistry::normalize_url(url);
  if (!normalized.ok()) return false;
  std::shared_ptr<Entry> e;
  std::vector<HolderKey> subscribed;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(*normalized);
    if (it == entries_.end()) return false;
    e = it->second;
    entries_.erase(it);
    e->stop = true;
    subscribed.swap(e->subscribed);
  }
  net::post(ctx_, [e] {
    if (e->timer) e->timer->cancel();
  });
  // Out of routing first, then everything that hangs off the worker.
  deps_.registry->remove(*normalized);
  deps_.policy->on_worker_removed(e->worker->id());
  for (const HolderKey& key : subscribed) {
    // Both also remove the holder from the index.
    if (deps_.ingest != nullptr) deps_.ingest->remove(key);
    if (deps_.follower != nullptr) deps_.follower->remove(*normalized, key.rank);
    deps_.holders->release(key);
  }
  deps_.upstream->forget(e->worker->id());
  deps_.metrics->remove_worker(*normalized);
  control_log()->info("worker {} removed", *normalized);
  return true;
}

net::awaitable<void> WorkerControl::run(std::shared_ptr<Entry> e) {
  const GatewayConfig& c = *deps_.config;
  e->timer = std::make_unique<net::steady_timer>(ctx_);
  auto tick = std::chrono::milliseconds(1000);
  for (auto iv : {c.health_check_interval, c.load_poll_interval, c.discovery_retry}) {
    if (iv.count() > 0) tick = std::min(tick, iv);
  }
  if (c.health_check_interval.count() > 0) tick = std::min(tick, kOutOfRotationProbe);
  tick = std::max(tick, std::chrono::milliseconds(20));
  MonoTime next_probe{}, next_poll{}, next_discovery{};
  uint64_t dispatched_at_poll = 0;
  while (!e->stop) {
    const MonoTime now = deps_.clock->now();
    if (!e->worker->info()->discovered && now >= next_discovery) {
      co_await discover(*e);
      next_discovery = now + c.discovery_retry;
    }
    if (e->stop) break;
    if (c.health_check_interval.count() > 0 &&
        (now >= next_probe || e->probe_soon.exchange(false))) {
      co_await probe(*e);
      // A worker out of rotation is probed faster, so one that returns is back within a second
      // (its success threshold of probes) rather than a few intervals.
      const bool out = e->worker->health().state() != workers::Health::kHealthy ||
                       e->worker->liveness().state() != workers::Liveness::kLive;
      next_probe = now + (out ? std::min<Duration>(c.health_check_interval, kOutOfRotationProbe)
                              : c.health_check_interval);
    }
    if (e->stop) break;
    // A worker this gateway sends nothing to, and that reports nothing running, is polled ten
    // times less often (at least every kIdleLoadPoll): an idle fleet of hundreds costs no CPU.
    // The first request sent there brings the poll back to its interval.
    const uint64_t dispatched = e->worker->dispatched();
    const auto load = e->worker->engine_load();
    const bool busy = e->worker->fleet_in_flight() > 0 || dispatched != dispatched_at_poll ||
                      load.running + load.waiting > 0;
    if (busy && next_poll > now + c.load_poll_interval) next_poll = now;
    // Pushed loads, while fresh, make the poll redundant.
    const bool pushed = now - e->worker->pushed_load_at() < workers::Worker::kPushedLoadFresh;
    if (c.load_poll_interval.count() > 0 && now >= next_poll && !pushed &&
        e->load_source != LoadSource::kNone) {
      co_await poll_load(*e);
      dispatched_at_poll = dispatched;
      next_poll = now + (busy ? c.load_poll_interval
                              : std::max<Duration>(c.load_poll_interval * 10, kIdleLoadPoll));
    }
    refresh_from_events(*e);
    boost::system::error_code ec;
    e->timer->expires_after(tick);
    co_await e->timer->async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  if (e->conn) e->conn->close();
}

namespace {

// (No temporaries inside co_await expressions anywhere in kvgate: g++ 12 destroys some of them
// twice; docs/architecture.md, "Build".)
// One GET over the entry's control connection (reconnecting as needed). What it learns of the
// worker's liveness goes to `liveness`: an answer is contact, a refused connection a failure.
net::awaitable<Result<http::ClientResponse>> control_get(std::unique_ptr<http::Connection>& conn,
                                                         const std::string& host, uint16_t port,
                                                         const http::ClientOptions& options,
                                                         const char* target,
                                                         workers::Worker& worker) {
  workers::LivenessTracker& liveness = worker.liveness();
  http::ClientRequest request;
  request.method = http::Verb::get;
  request.target = target;
  request.content_type = "";
  if (!worker.authorization().empty()) {
    request.headers.emplace_back("authorization", worker.authorization());
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = conn != nullptr && conn->idle_and_open();
    if (!reused) {
      conn.reset();
      auto c = co_await http::Connection::connect(host, port, options);
      if (!c.ok()) {
        liveness.note_connect_failed();
        co_return c.status();
      }
      conn = std::move(*c);
    }
    auto res = co_await conn->send(request);
    if (res.ok()) liveness.note_contact();
    if (!res.ok() || !conn->reusable()) {
      const bool retry = reused && !res.ok() && conn->closed_by_peer();
      conn.reset();
      if (retry) continue;  // the worker closed an idle control connection
    }
    co_return res;
  }
  co_return absl::UnavailableError("unreachable");
}

}  // namespace

net::awaitable<void> WorkerControl::discover(Entry& e) {
  const GatewayConfig& c = *deps_.config;
  const http::ClientOptions opts{.tls = e.tls,
                                 .connect_timeout = c.connect_timeout,
                                 .request_timeout = c.health_check_timeout,
                                 .idle_timeout = c.health_check_timeout};
  auto models = co_await control_get(e.conn, e.host, e.port, opts, "/v1/models", *e.worker);
  if (!models.ok() || models->status != 200) co_return;  // not up yet: retried later
  workers::WorkerInfo info = *e.worker->info();
  ModelList list = parse_models(models->body);
  info.models = std::move(list.models);
  info.lora_adapters = std::move(list.lora_adapters);
  info.max_model_len = list.max_model_len;
  ServerInfo si;
  for (const char* target : {"/server_info", "/get_server_info"}) {
    auto res = co_await control_get(e.conn, e.host, e.port, opts, target, *e.worker);
    if (res.ok() && res->status == 200) {
      si = parse_server_info(res->body, e.host);
      break;
    }
  }
  if (e.stop) co_return;
  if (si.kv_blocks > index::kMaxCapacityHint) {
    control_log()->warn(
        "worker {} says its KV pool holds {} blocks per rank; not believed (more than {}): the "
        "index grows its structures for it as the cache fills instead",
        e.worker->url(), si.kv_blocks, index::kMaxCapacityHint);
  }
  std::vector<workers::KvEndpoint> endpoints =
      e.explicit_endpoints.empty() ? si.endpoints : e.explicit_endpoints;
  info.kv_endpoints = endpoints;
  if (si.block_size > 0) info.block_size = si.block_size;
  info.kv_blocks = si.kv_blocks <= index::kMaxCapacityHint ? si.kv_blocks : 0;
  // Its ranks: what it says, or as many as it has event streams.
  info.dp_size = std::max<uint32_t>(si.dp_size, 1);
  for (const auto& ep : endpoints) info.dp_size = std::max<uint32_t>(info.dp_size, ep.rank + 1);
  info.discovered = true;
  note_disaggregation(e, si, info);
  {
    MutexLock lock(&mu_);
    if (e.stop) co_return;
    if (deps_.follower != nullptr || (deps_.ingest != nullptr && !endpoints.empty())) {
      if (deps_.follower != nullptr) {
        follow(e, info.dp_size);
      } else {
        subscribe(e, endpoints, si.kv_blocks);
      }
      info.holders.clear();
      info.holder_ranks.clear();
      for (const HolderKey& k : e.subscribed) {
        if (auto h = deps_.holders->find(k)) {
          info.holders.push_back(*h);
          info.holder_ranks.push_back(k.rank);
        }
      }
    } else if (deps_.ingest != nullptr && !e.warned_no_events) {
      e.warned_no_events = true;
      control_log()->warn(
          "worker {} advertises no KV event endpoints (no /server_info endpoints and no "
          "--kv-events-endpoint): "
          "routing to it predicts its cache from past decisions",
          e.worker->url());
    }
    deps_.registry->update_info(e.worker->id(), [&](workers::WorkerInfo& i) { i = info; });
  }
  control_log()->info(
      "worker {} discovered: {} models, {} KV event streams, block size {}, KV pool {} blocks",
      e.worker->url(), info.models.size(), info.kv_endpoints.size(), info.block_size, si.kv_blocks);
}

// What the engine says of prefill/decode disaggregation: its protocol, a prefill's bootstrap port
// when none was given, and a role other than the one it was registered with (warned once: an
// SGLang prefill engine sent whole requests never finishes them).
void WorkerControl::note_disaggregation(Entry& e, const ServerInfo& si, workers::WorkerInfo& info) {
  info.pd_wire = si.pd_wire;
  if (info.role == workers::WorkerRole::kPrefill && info.bootstrap_port == 0) {
    info.bootstrap_port = si.bootstrap_port;
  }
  if (!si.pd_role || *si.pd_role == info.role || e.warned_role) return;
  e.warned_role = true;
  control_log()->warn(
      "worker {} says it is a {} engine (its disaggregation_mode) but is a {} worker here: {}",
      e.worker->url(), workers::worker_role_name(*si.pd_role), workers::worker_role_name(info.role),
      info.role == workers::WorkerRole::kRegular
          ? "start kvgate with --pd-disaggregation and give it as --prefill or --decode"
          : "check the --prefill and --decode lists");
}

void WorkerControl::subscribe(Entry& e, const std::vector<workers::KvEndpoint>& endpoints,
                              uint64_t kv_blocks) {
  for (const workers::KvEndpoint& ep : endpoints) {
    const HolderKey key{e.worker->id(), ep.rank};
    if (std::find(e.subscribed.begin(), e.subscribed.end(), key) != e.subscribed.end()) continue;
    const HolderId holder = deps_.holders->acquire(key);
    events::SubscriptionSpec spec;
    spec.key = key;
    spec.holder = holder;
    spec.worker_name = e.worker->url();
    spec.endpoint = ep.publisher;
    spec.replay_endpoint = ep.replay;
    spec.topic = ep.topic;
    spec.kv_capacity_blocks = kv_blocks;
    // Loads the engine pushes on this stream (load_record.h): a rank's load, and a sign of life.
    spec.on_load = [worker = e.worker, rank = ep.rank,
                    clock = deps_.clock](const events::LoadRecord& l) {
      worker->set_pushed_load(rank,
                              {.running = l.running,
                               .waiting = l.waiting,
                               .kv_usage = l.kv_usage,
                               .queued_prefill_tokens = l.queued_prefill_tokens},
                              clock->now());
      worker->liveness().note_contact();
    };
    if (Status s = deps_.ingest->add(spec); !s.ok()) {
      control_log()->warn("worker {} rank {}: cannot subscribe to {}: {}", e.worker->url(), ep.rank,
                          ep.publisher, message_of(s));
      deps_.holders->release(key);
      continue;
    }
    e.subscribed.push_back(key);
  }
}

void WorkerControl::follow(Entry& e, uint32_t ranks) {
  for (uint32_t rank = 0; rank < ranks; ++rank) {
    const HolderKey key{e.worker->id(), rank};
    if (std::find(e.subscribed.begin(), e.subscribed.end(), key) != e.subscribed.end()) continue;
    const HolderId holder = deps_.holders->acquire(key);
    // The relay repeats the engine's last pushed load with every batch and heartbeat: a record is
    // taken once, when it is new (an engine that pushes none has ts 0), and a new one is a sign
    // of the engine's life as it is when it comes straight from the engine. (The relay's own
    // heartbeats say nothing of the engine.)
    relay::FollowCallbacks callbacks;
    callbacks.on_load = [worker = e.worker, rank, clock = deps_.clock,
                         last_ts = 0.0](const relay::v1::Load& l) mutable {
      if (l.ts() <= 0 || l.ts() == last_ts) return;
      last_ts = l.ts();
      worker->set_pushed_load(rank,
                              {.running = l.running(),
                               .waiting = l.waiting(),
                               .kv_usage = l.kv_usage(),
                               .queued_prefill_tokens = l.queued_prefill_tokens()},
                              clock->now());
      worker->liveness().note_contact();
    };
    if (deps_.follow_metrics != nullptr) {
      callbacks.on_batch = [m = deps_.follow_metrics](double engine_ts) {
        m->observe_apply_lag(engine_ts);
      };
    }
    if (Status s = deps_.follower->add(e.worker->url(), rank, holder, std::move(callbacks));
        !s.ok()) {
      control_log()->warn("worker {} rank {}: cannot follow it on the relay: {}", e.worker->url(),
                          rank, message_of(s));
      deps_.holders->release(key);
      continue;
    }
    e.subscribed.push_back(key);
  }
}

void WorkerControl::refresh_from_events(Entry& e) {
  if (deps_.ingest == nullptr && deps_.follower == nullptr) return;
  std::vector<HolderKey> keys;
  {
    MutexLock lock(&mu_);
    keys = e.subscribed;
  }
  if (deps_.follower != nullptr) {
    for (const HolderKey& k : keys) {
      if (auto st = deps_.follower->stats(e.worker->url(), k.rank)) {
        e.worker->set_index_blocks(k.rank, st->blocks);
      }
    }
    return;
  }
  bool block_size_known = false;
  uint8_t offload_tiers = 0;
  for (const HolderKey& k : keys) {
    auto st = deps_.ingest->state(k);
    if (!st) continue;
    // A rank whose stream lost events holds a partial index: routing prefers its siblings.
    e.worker->set_rank_degraded(k.rank, st->degraded);
    e.worker->set_index_blocks(k.rank, st->blocks);
    offload_tiers |= st->tiers & ~index::tier_bit(index::Tier::kDevice);
    if (block_size_known || st->block_size == 0) continue;
    block_size_known = true;
    if (st->block_size != e.worker->info()->block_size) {
      const uint32_t bs = st->block_size;
      deps_.registry->update_info(e.worker->id(),
                                  [bs](workers::WorkerInfo& i) { i.block_size = bs; });
    }
  }
  e.worker->set_offload_tiers(offload_tiers);
}

net::awaitable<void> WorkerControl::probe(Entry& e) {
  const GatewayConfig& c = *deps_.config;
  const http::ClientOptions opts{
      .tls = e.tls,
      .connect_timeout = std::min(c.connect_timeout, c.health_check_timeout),
      .request_timeout = c.health_check_timeout,
      .idle_timeout = c.health_check_timeout};
  auto res = co_await control_get(e.conn, e.host, e.port, opts, "/health", *e.worker);
  const bool ok = res.ok() && res->status == 200;
  if (e.worker->health().record(ok)) {
    const auto h = e.worker->health().state();
    if (h == workers::Health::kHealthy) {
      e.worker->breaker().reset();  // a returned worker starts with a closed breaker
      control_log()->info("worker {} is healthy", e.worker->url());
    } else {
      // Requests waiting there for a first token go elsewhere now, not at their timeouts.
      const size_t moved = e.worker->inflight().veto_all(workers::VetoKind::kUnhealthy);
      control_log()->warn("worker {} is unhealthy: {} ({} requests in flight told)",
                          e.worker->url(),
                          res.ok() ? "status " + std::to_string(res->status)
                                   : std::string(message_of(res.status())),
                          moved);
    }
  }
}

net::awaitable<void> WorkerControl::poll_load(Entry& e) {
  const GatewayConfig& c = *deps_.config;
  const http::ClientOptions opts{.tls = e.tls,
                                 .connect_timeout = c.connect_timeout,
                                 .request_timeout = c.health_check_timeout,
                                 .idle_timeout = c.health_check_timeout};
  if (e.load_source == LoadSource::kUnknown || e.load_source == LoadSource::kLoadEndpoint) {
    auto res = co_await control_get(e.conn, e.host, e.port, opts, "/load", *e.worker);
    if (!res.ok()) co_return;
    if (res->status == 200) {
      const LoadReport report = parse_load_report(res->body);
      if (report.found) {
        e.worker->set_engine_load(report.total, deps_.clock->now());
        for (const auto& [rank, load] : report.ranks) e.worker->set_rank_load(rank, load);
        e.load_source = LoadSource::kLoadEndpoint;
      }
      co_return;
    }
    e.load_source = LoadSource::kMetrics;
  }
  auto res = co_await control_get(e.conn, e.host, e.port, opts, "/metrics", *e.worker);
  if (!res.ok() || res->status != 200) co_return;
  const LoadReport report = parse_vllm_metrics(res->body);
  if (!report.found) {
    e.load_source = LoadSource::kNone;  // nothing to read: the gateway's own in-flight counts serve
    control_log()->info("worker {} reports no load; routing uses the gateway's in-flight counts",
                        e.worker->url());
    co_return;
  }
  e.worker->set_engine_load(report.total, deps_.clock->now());
  for (const auto& [rank, load] : report.ranks) e.worker->set_rank_load(rank, load);
}

net::awaitable<void> WorkerControl::watch_liveness() {
  for (;;) {
    liveness_timer_->expires_after(kLivenessTick);
    boost::system::error_code ec;
    co_await liveness_timer_->async_wait(net::redirect_error(net::use_awaitable, ec));
    std::vector<std::shared_ptr<Entry>> entries;
    {
      MutexLock lock(&mu_);
      if (stopped_) co_return;
      entries.reserve(entries_.size());
      for (const auto& entry : entries_) entries.push_back(entry.second);
    }
    for (const auto& e : entries) {
      if (auto t = e->worker->liveness().evaluate()) on_liveness(*e, *t);
      if (e->worker->liveness().state() == workers::Liveness::kWedged && !e->probing_wedged &&
          !e->stop) {
        e->probing_wedged = true;
        net::co_spawn(ctx_, probe_wedged(e), net::detached);
      }
    }
  }
}

void WorkerControl::on_liveness(Entry& e, const workers::LivenessTransition& t) {
  deps_.metrics->liveness_transition(t);
  const char* to = workers::liveness_name(t.to);
  const char* why = workers::liveness_reason_name(t.reason);
  if (t.to == workers::Liveness::kLive) {
    control_log()->info("worker {} is live again ({}): routed to as before", e.worker->url(), why);
    return;
  }
  const workers::VetoKind kind = t.to == workers::Liveness::kWedged
                                     ? workers::VetoKind::kWedged
                                     : workers::VetoKind::kUnreachable;
  const size_t told = e.worker->inflight().veto_all(kind);
  control_log()->warn(
      "worker {} vetoed as {} ({}): routing avoids it while others can serve; {} requests in "
      "flight there told",
      e.worker->url(), to, why, told);
}

namespace {

// Whether a stream's body brings an event with data before `deadline`: a token, not a byte (a
// worker that trickles bytes or sends junk makes no progress, as on the request path).
net::awaitable<bool> first_event(http::Connection& conn,
                                 std::chrono::steady_clock::time_point deadline) {
  http::SseEventCounter events;
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) co_return false;
    auto piece = co_await conn.next_piece(left);
    if (!piece.ok() || piece->empty()) co_return false;
    if (events.feed(*piece) > 0) co_return true;
  }
}

}  // namespace

net::awaitable<void> WorkerControl::probe_wedged(std::shared_ptr<Entry> e) {
  const GatewayConfig& c = *deps_.config;
  workers::LivenessTracker& liveness = e->worker->liveness();
  const auto wait = std::max<std::chrono::milliseconds>(
      std::chrono::duration_cast<std::chrono::milliseconds>(liveness.config().wedge),
      std::chrono::milliseconds(200));
  const http::ClientOptions opts{.tls = e->tls,
                                 .connect_timeout = c.connect_timeout,
                                 .request_timeout = wait,
                                 .idle_timeout = wait};
  net::steady_timer pause(ctx_);
  while (!e->stop && liveness.state() == workers::Liveness::kWedged) {
    const auto info = e->worker->info();
    http::ClientRequest req;
    req.method = http::Verb::post;
    req.target = "/v1/completions";
    if (!e->worker->authorization().empty()) {
      req.headers.emplace_back("authorization", e->worker->authorization());
    }
    std::string body;
    JsonWriter w(&body);
    w.begin_object();
    if (!info->models.empty()) w.member("model", info->models.front());
    w.member("prompt", "ping").member("max_tokens", 1).member("stream", true).end_object();
    req.body = std::move(body);
    auto conn = co_await http::Connection::connect(e->host, e->port, opts);
    if (conn.ok()) {
      auto head = co_await (*conn)->start_streaming(req);
      if (head.ok() && head->status == 200 &&
          co_await first_event(**conn, std::chrono::steady_clock::now() + wait)) {
        liveness.note_progress();  // a token: the engine generates again
      }
      (*conn)->close();
    } else {
      liveness.note_connect_failed();
    }
    if (liveness.state() != workers::Liveness::kWedged) break;
    pause.expires_after(wait / 2);
    boost::system::error_code ec;
    co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  e->probing_wedged = false;
}

}  // namespace kvgate::app
