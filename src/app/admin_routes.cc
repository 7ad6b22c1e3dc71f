// Routes that are not generation: the models the fleet serves, health for orchestrators,
// Prometheus metrics, and the operator's worker admin API.
//
//   GET  /v1/models   the union of the workers' models (OpenAI list shape)
//   GET  /v1/models/{id}  one model (404 for one no worker serves)
//   GET  /get_model_info, /get_server_info, /health_generate
//                     SGLang's routes, answered by the least busy routable worker (503 with
//                     none): clients written for one engine learn the model through them
//   GET  /version     {"version": ...}
//   GET  /liveness    200 while the process runs
//   GET  /readiness   200 when at least one worker is routable and the gateway is not draining,
//                     else 503
//   GET  /health      /readiness with a summary body
//   GET  /metrics     Prometheus text
//   GET  /workers     every worker with its state
//   POST /workers     {"url": "http://host:port", "kv_events_endpoints": [{"dp_rank": 0,
//                     "endpoint": "tcp://..", "replay_endpoint": "tcp://..", "topic": ""}]}
//                     (endpoints optional: discovered from the worker otherwise), and optionally
//                     "api_key": the worker's own key, sent as its Bearer token and never shown
//                     -> 201, 409 if present
//   DELETE /workers?url=http://host:port (or a body {"url": ...}) -> 200, 404 if absent
//   POST /admin/reload  reads the configuration again (as SIGHUP does; app/config_reload.h)
//                     -> 200 {"applied": [flags], "needs_restart": [flags]}, 400 with the error
#include <simdjson.h>

#include <algorithm>

#include "app/cache_report.h"
#include "app/gateway_impl.h"
#include "kvgate/app/gateway.h"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"

namespace kvgate::app {
namespace net = boost::asio;

namespace {

// A POST /workers body's "role" and "bootstrap_port". A disaggregated fleet (--pd-disaggregation)
// takes prefill and decode workers only, any other fleet regular ones only: a worker of the other
// kind would never be sent a request.
Result<WorkerSpec> role_of(simdjson::dom::element doc, bool pd) {
  WorkerSpec spec;
  spec.source = workers::WorkerSource::kApi;
  std::string_view name;
  if (doc["role"].get_string().get(name) == simdjson::SUCCESS) {
    const std::optional<workers::WorkerRole> role = workers::parse_worker_role(name);
    if (!role) return absl::InvalidArgumentError("\"role\" is regular, prefill or decode");
    spec.role = *role;
  }
  if (pd && spec.role == workers::WorkerRole::kRegular) {
    return absl::InvalidArgumentError(
        "this gateway runs prefill/decode disaggregation: give \"role\": \"prefill\" or "
        "\"decode\"");
  }
  if (!pd && spec.role != workers::WorkerRole::kRegular) {
    return absl::InvalidArgumentError(
        "a prefill or decode worker needs a gateway started with --pd-disaggregation");
  }
  uint64_t port = 0;
  if (doc["bootstrap_port"].get_uint64().get(port) == simdjson::SUCCESS) {
    if (spec.role != workers::WorkerRole::kPrefill || port == 0 || port > 65535) {
      return absl::InvalidArgumentError("\"bootstrap_port\" is a prefill worker's port (1-65535)");
    }
    spec.bootstrap_port = static_cast<uint16_t>(port);
  }
  return spec;
}

using Handler = std::function<http::Response(const http::Request&)>;

http::Handler sync(Handler h) {
  return
      [h = std::move(h)](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
        // A named response: g++ 12 may destroy a temporary inside a co_await twice.
        http::Response r = h(req);
        (void)co_await res.send(std::move(r));
      };
}

}  // namespace

size_t routable_workers(const workers::FleetSnapshot& f) {
  size_t n = 0;
  for (const auto& w : f.workers) n += w->routable() ? 1 : 0;
  return n;
}

bool GatewayImpl::ready(const workers::FleetSnapshot& fleet) const {
  // A draining gateway is not ready, whatever its workers: the load balancer stops sending.
  return !draining_.load(std::memory_order_relaxed) && routable_workers(fleet) > 0;
}

namespace {

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

}  // namespace

void GatewayImpl::add_info_routes() {
  route(http::Verb::get, "/v1/models", Access::kClient, sync([this](const http::Request&) {
          const auto fleet = workers_.snapshot();
          std::string body;
          JsonWriter w(&body);
          w.begin_object().member("object", "list").key("data").begin_array();
          for (const auto& m : fleet->models) {
            w.begin_object().member("id", m).member("object", "model").member("created", 0);
            w.member("owned_by", "kvgate").end_object();
          }
          w.end_array().end_object();
          return http::Response::json(200, std::move(body));
        }));
  // One model, as OpenAI's API answers GET /v1/models/{id} (ids may hold '/': "org/name").
  server_->route_prefix(
      http::Verb::get, "/v1/models/",
      guarded(Access::kClient, sync([this](const http::Request& req) {
                const std::string id =
                    percent_decode(req.path().substr(std::string_view("/v1/models/").size()));
                const auto fleet = workers_.snapshot();
                if (!fleet->knows_model(id)) {
                  return http::Response::error(404, "The model '" + id + "' does not exist",
                                               "not_found_error");
                }
                std::string body;
                JsonWriter w(&body);
                w.begin_object().member("id", id).member("object", "model").member("created", 0);
                w.member("owned_by", "kvgate").end_object();
                return http::Response::json(200, std::move(body));
              })));
  route(http::Verb::get, "/get_model_info", Access::kClient, worker_answer("/get_model_info"));
  route(http::Verb::get, "/get_server_info", Access::kClient, worker_answer("/get_server_info"));
  route(http::Verb::get, "/health_generate", Access::kClient, worker_answer("/health_generate"));
  route(http::Verb::get, "/version", Access::kOpen, sync([](const http::Request&) {
          return http::Response::json(200, std::string(R"({"version":")") + kVersion + "\"}");
        }));
  route(http::Verb::get, "/liveness", Access::kOpen, sync([](const http::Request&) {
          return http::Response::json(200, R"({"status":"alive"})");
        }));
  const auto readiness = [this](bool detailed) {
    return sync([this, detailed](const http::Request&) {
      const auto fleet = workers_.snapshot();
      const bool draining = draining_.load(std::memory_order_relaxed);
      const bool ready = this->ready(*fleet);
      std::string body;
      JsonWriter w(&body);
      w.begin_object().member("status", draining ? "draining"
                                        : ready  ? "ready"
                                                 : "no routable worker");
      if (detailed) {
        w.member("workers", fleet->workers.size())
            .member("routable_workers", routable_workers(*fleet));
      }
      // Why no worker yet, when the pods are where they would come from.
      if (!ready && !draining && discovery_) {
        const PodDiscovery::Snapshot d = discovery_->status();
        w.member("discovery", !d.last_error.empty()
                                  ? "cannot reach the Kubernetes API server: " + d.last_error
                              : d.connected ? "no serving pod matches the selector"
                                            : "listing the pods");
      }
      w.end_object();
      http::Response r = http::Response::json(ready ? 200 : 503, std::move(body));
      if (!ready) r.headers.emplace_back("retry-after", "1");
      return r;
    });
  };
  route(http::Verb::get, "/readiness", Access::kOpen, readiness(false));
  route(http::Verb::get, "/health", Access::kOpen, readiness(true));
  route(http::Verb::get, "/metrics", Access::kOpen, sync([this](const http::Request&) {
          return http::Response::text(200, metrics_text(), "text/plain; version=0.0.4");
        }));
}

http::Handler GatewayImpl::worker_answer(std::string path) {
  return [this, path = std::move(path)](const http::Request& req,
                                        http::Responder& res) -> net::awaitable<void> {
    const auto fleet = workers_.snapshot();
    std::shared_ptr<workers::Worker> pick;
    for (const auto& w : fleet->workers) {
      if (w->routable() && (!pick || w->in_flight() < pick->in_flight())) pick = w;
    }
    if (!pick) {
      http::Response r = http::Response::error(503, "no routable worker; retry later");
      r.headers.emplace_back("retry-after", "1");
      (void)co_await res.send(std::move(r));
      co_return;
    }
    auto lease = co_await upstream_->acquire(*pick, UpstreamPool::Source::kFresh);
    Result<http::ClientResponse> answer = absl::UnknownError("not sent");
    if (!lease.ok()) {
      answer = lease.status();
    } else {
      http::ClientRequest fwd;
      fwd.method = req.method();
      fwd.target = path;
      fwd.body_view = req.body();  // the request outlives this exchange
      const std::string auth = authorization_for(req, *pick, config_);
      if (!auth.empty()) fwd.headers.emplace_back("authorization", auth);
      answer = co_await lease->conn->send(fwd);
    }
    if (!answer.ok()) {
      http::Response r = http::Response::error(502, "the worker did not answer " + path + ": " +
                                                        std::string(message_of(answer.status())));
      (void)co_await res.send(std::move(r));
      co_return;
    }
    upstream_->release(pick->id(), std::move(lease->conn));
    http::Response r =
        forwarded(answer->status, *answer, std::move(answer->body),
                  config_.expose_worker_header ? pick->url() : std::string(), std::nullopt);
    (void)co_await res.send(std::move(r));
  };
}

std::string GatewayImpl::metrics_text() {
  metrics_->publish();
  process_metrics_->update();
  const auto s = raw_index_->stats();
  metrics_->set_index(s.holders, s.resident_blocks, s.memberships, s.bytes);
  // Held for the loop: the range-for's temporary would be released before the loop body runs.
  const auto fleet = workers_.snapshot();
  for (const auto& w : fleet->workers) metrics_->sync_worker(*w);
  metrics_->sync_roles(*fleet);
  metrics_->sync_upstream(upstream_->stats());
  metrics_->sync_admission(admission_->stats());
  policy::Policy::PendingStats pending = policy_->pending_stats();
  if (decode_policy_) pending += decode_policy_->pending_stats();
  metrics_->sync_pending(pending);
  metrics_->sync_front_end(server_->stats());
  if (answers_) metrics_->sync_answers(answers_->stats());
  if (follow_metrics_) follow_metrics_->sync(follower_->stats());
  if (sync_metrics_) sync_metrics_->sync(state_sync_->stats(), fleet_sync_->stats());
  if (discovery_metrics_) discovery_metrics_->sync(discovery_->status());
  return metrics::text_exposition(registry_);
}

void GatewayImpl::add_admin_routes() {
  route(
      http::Verb::get, "/workers", Access::kClient, sync([this](const http::Request&) {
        const auto fleet = workers_.snapshot();
        std::string body;
        JsonWriter w(&body);
        w.begin_object().key("workers").begin_array();
        for (const auto& wk : fleet->workers) {
          const auto info = wk->info();
          const auto load = wk->engine_load();
          w.begin_object().member("url", wk->url()).member("id", wk->id().value());
          w.member("routable", wk->routable());
          w.member("role", workers::worker_role_name(info->role));
          if (info->bootstrap_port != 0) w.member("bootstrap_port", info->bootstrap_port);
          w.member("source", workers::worker_source_name(info->source));
          // Its KV events apply on this node's lanes into its index shard (--numa).
          w.member("numa_node", wk->id().value() % numa_nodes());
          w.member("health", workers::health_name(wk->health().state()));
          w.member("circuit_breaker", workers::breaker_state_name(wk->breaker().state()));
          w.member("liveness", workers::liveness_name(wk->liveness().state()));
          w.member("requests", wk->dispatched());
          w.member("index_blocks", wk->index_blocks());
          w.member("warmup_diversions", wk->warmup_diversions());
          w.member("in_flight", wk->in_flight()).member("peer_in_flight", wk->peer_in_flight());
          w.member("queued_prompt_tokens", wk->queued_prompt_tokens());
          w.member("running", load.running);
          w.member("waiting", load.waiting).member("kv_usage", load.kv_usage);
          // Where the load figures come from and how old they are.
          const auto now = clock_.now();
          const bool pushed = now - wk->pushed_load_at() < workers::Worker::kPushedLoadFresh;
          w.member("load_source", pushed ? "pushed" : "polled");
          w.member(
              "load_age_ms",
              wk->engine_load_at() == MonoTime{}
                  ? -1.0
                  : std::chrono::duration<double, std::milli>(now - wk->engine_load_at()).count());
          w.member("discovered", info->discovered).member("block_size", info->block_size);
          w.member("kv_blocks", info->kv_blocks);
          write_cached_tokens(w, wk->cache_agreement());
          w.key("models").begin_array();
          for (const auto& m : info->models) w.value(m);
          w.end_array().key("kv_events_endpoints").begin_array();
          for (const auto& e : info->kv_endpoints) {
            w.begin_object().member("dp_rank", e.rank).member("endpoint", e.publisher);
            w.member("replay_endpoint", e.replay).member("topic", e.topic).end_object();
          }
          w.end_array().key("holders").begin_array();
          for (HolderId h : info->holders) w.value(h.value());
          w.end_array().end_object();
        }
        w.end_array().end_object();
        return http::Response::json(200, std::move(body));
      }));
  route(http::Verb::post, "/workers", Access::kControl, sync([this](const http::Request& req) {
          simdjson::dom::parser parser;
          simdjson::dom::element doc;
          std::string_view url;
          if (parser.parse(req.body()).get(doc) != simdjson::SUCCESS ||
              doc["url"].get_string().get(url) != simdjson::SUCCESS) {
            return http::Response::error(400,
                                         "expected a JSON body with \"url\": \"http://host:port\"");
          }
          std::vector<workers::KvEndpoint> eps;
          simdjson::dom::array arr;
          if (doc["kv_events_endpoints"].get_array().get(arr) == simdjson::SUCCESS) {
            for (auto e : arr) {
              workers::KvEndpoint k;
              std::string_view s;
              uint64_t rank = 0;
              if (e["endpoint"].get_string().get(s) != simdjson::SUCCESS) {
                return http::Response::error(400,
                                             "each kv_events_endpoints entry needs \"endpoint\"");
              }
              k.publisher = std::string(s);
              if (e["replay_endpoint"].get_string().get(s) == simdjson::SUCCESS)
                k.replay = std::string(s);
              if (e["topic"].get_string().get(s) == simdjson::SUCCESS) k.topic = std::string(s);
              if (e["dp_rank"].get_uint64().get(rank) == simdjson::SUCCESS)
                k.rank = static_cast<DpRank>(rank);
              eps.push_back(std::move(k));
            }
          }
          // The worker's own key: used, never shown, and not shared with peer replicas.
          std::string_view api_key;
          if (doc["api_key"].get_string().get(api_key) == simdjson::SUCCESS &&
              (api_key.empty() || !std::all_of(api_key.begin(), api_key.end(),
                                               [](char ch) { return ch > 0x20 && ch < 0x7f; }))) {
            return http::Response::error(400, "\"api_key\" must be printable ASCII without spaces");
          }
          const Result<WorkerSpec> role = role_of(doc, config_.pd_disaggregation);
          if (!role.ok()) return http::Response::error(400, message_of(role.status()));
          const Status s = add_worker(url, std::move(eps), api_key, *role);
          if (absl::IsAlreadyExists(s) || absl::IsResourceExhausted(s))
            return http::Response::error(409, message_of(s), "conflict_error");
          if (absl::IsFailedPrecondition(s)) return http::Response::error(503, message_of(s));
          if (!s.ok()) return http::Response::error(400, message_of(s));
          std::string body;
          JsonWriter(&body)
              .begin_object()
              .member("url", *workers::WorkerRegistry::normalize_url(url))
              .end_object();
          return http::Response::json(201, std::move(body));
        }));
  route(http::Verb::post, "/admin/reload", Access::kControl,
        sync([this](const http::Request&) { return reload_answer(reload()); }));
  route(http::Verb::delete_, "/workers", Access::kControl, sync([this](const http::Request& req) {
          std::string url;
          if (auto q = req.query_param("url")) url = percent_decode(*q);
          if (url.empty()) {
            simdjson::dom::parser parser;
            simdjson::dom::element doc;
            std::string_view u;
            if (!req.body().empty() && parser.parse(req.body()).get(doc) == simdjson::SUCCESS &&
                doc["url"].get_string().get(u) == simdjson::SUCCESS) {
              url = std::string(u);
            }
          }
          if (url.empty())
            return http::Response::error(400,
                                         "name the worker: DELETE /workers?url=http://host:port");
          if (!remove_worker(url))
            return http::Response::error(404, "no such worker: " + url, "not_found_error");
          return http::Response::json(200, R"({"removed":true})");
        }));
}

}  // namespace kvgate::app
