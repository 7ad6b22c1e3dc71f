#include "app/config_reload.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "app/gateway_impl.h"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"

namespace kvgate::app {
namespace {

std::shared_ptr<spdlog::logger> reload_log() {
  static auto l = log::get("config");
  return l;
}

// The flags a running gateway applies (the header says how), by their names without dashes.
const std::set<std::string, std::less<>> kLiveFlags = {
    // the command line's workers
    "worker-urls", "prefill", "decode",
    // cache_aware's figures (the warm-up rule's and the predictions' wait for a restart)
    "balance-abs-threshold", "balance-rel-threshold", "wait-spill-ratio", "tier-weights",
    "worker-overload-token-usage", "worker-overload-waiting-requests", "worker-overload-in-flight",
    "worker-overload-shed", "prefill-overload-waiting-requests",
    // keys and logging
    "api-key", "admin-api-key", "log-level"};

}  // namespace

policy::CacheAwareConfig routing_figures(const GatewayConfig& c) {
  policy::CacheAwareConfig routing = c.cache_aware;
  if (c.pd_disaggregation) routing.overload.waiting_requests = c.prefill_overload_waiting_requests;
  return routing;
}

std::vector<StaticWorker> static_workers(const GatewayConfig& c) {
  std::vector<StaticWorker> out;
  const auto add = [&](const std::string& url, const WorkerSpec& spec) {
    StaticWorker w{.url = workers::WorkerRegistry::normalize_url(url).value_or(url), .spec = spec};
    for (const auto& e : c.kv_endpoints) {
      if (e.worker_url == w.url) w.kv_endpoints.push_back(e.endpoint);
    }
    out.push_back(std::move(w));
  };
  for (const auto& url : c.worker_urls) add(url, {});
  for (const auto& p : c.prefill_workers) {
    add(p.url, {.role = workers::WorkerRole::kPrefill, .bootstrap_port = p.bootstrap_port});
  }
  for (const auto& url : c.decode_workers) add(url, {.role = workers::WorkerRole::kDecode});
  return out;
}

FlagChanges changed_flags(const FlagValues& before, const FlagValues& after,
                          const GatewayConfig& running, const GatewayConfig& next) {
  std::set<std::string> names;
  for (const auto& [name, v] : before) names.insert(name);
  for (const auto& [name, v] : after) names.insert(name);
  FlagChanges out;
  for (const std::string& name : names) {
    const auto b = before.find(name);
    const auto a = after.find(name);
    const bool same = b != before.end() && a != after.end() && b->second == a->second;
    if (same) continue;
    // Turning client keys on or off changes what reaches the engines (their Authorization); the
    // keys file is read again by every reload, but another file waits for a restart.
    const bool key_switch =
        (name == "api-key" && running.api_key.empty() != next.api_key.empty()) ||
        name == "api-keys-file";
    (kLiveFlags.count(name) != 0 && !key_switch ? out.live : out.restart).push_back(name);
  }
  return out;
}

http::Response reload_answer(const ReloadOutcome& outcome) {
  if (!outcome.ok) {
    return http::Response::error(400,
                                 "configuration reload refused, nothing changed: " + outcome.error);
  }
  std::string body;
  JsonWriter w(&body);
  w.begin_object().key("applied").begin_array();
  for (const auto& f : outcome.applied) w.value(f);
  w.end_array().key("needs_restart").begin_array();
  for (const auto& f : outcome.need_restart) w.value(f);
  w.end_array().end_object();
  return http::Response::json(200, std::move(body));
}

// ---- GatewayImpl -------------------------------------------------------------------------------

void GatewayImpl::set_config_reader(ConfigReader reader, FlagValues values) {
  MutexLock lock(&reload_mu_);
  config_reader_ = std::move(reader);
  running_values_ = std::move(values);
}

ReloadOutcome GatewayImpl::reload() {
  ReloadOutcome out;
  {
    MutexLock lock(&reload_mu_);
    out = reload_locked();
  }
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (reload_metrics_) reload_metrics_->record(out, now);
  if (!out.ok) {
    reload_log()->error("configuration reload refused, the running configuration stays: {}",
                        out.error);
    return out;
  }
  const auto joined = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& f : v) s.append(s.empty() ? "--" : ", --").append(f);
    return s.empty() ? std::string("nothing") : s;
  };
  reload_log()->info("configuration reloaded: applied {}", joined(out.applied));
  if (!out.need_restart.empty()) {
    reload_log()->warn("changed but kept until a restart: {}", joined(out.need_restart));
  }
  return out;
}

ReloadOutcome GatewayImpl::reload_locked() {
  ReloadOutcome out;
  if (!config_reader_) {
    out.error = "this gateway has no configuration to read again";
    return out;
  }
  Result<LoadedConfig> next = config_reader_();
  if (!next.ok() || next->exit_code) {
    out.error = next.ok() ? "the configuration asks for --help or --version"
                          : std::string(message_of(next.status()));
    return out;
  }
  const FlagChanges changes =
      changed_flags(running_values_, next->values, live_config_, next->config);
  // --worker-max-prefilling sized the admission gate at start: the routing rule keeps the same
  // figure until a restart applies both.
  next->config.cache_aware.overload.prefilling_requests =
      live_config_.cache_aware.overload.prefilling_requests;
  const auto changed = [&](std::initializer_list<std::string_view> names) {
    return std::any_of(names.begin(), names.end(), [&](std::string_view n) {
      return std::find(changes.live.begin(), changes.live.end(), n) != changes.live.end();
    });
  };
  // The keys file is read again whether or not its name changed (its content may have).
  std::shared_ptr<const KeyTable> table;
  if (!live_config_.api_keys_file.empty()) {
    const std::shared_ptr<const KeyTable> before = access_.key_table();
    Result<std::shared_ptr<const KeyTable>> keys =
        KeyTable::load(live_config_.api_keys_file, before.get(), tenant_metrics_.get());
    if (!keys.ok()) {
      out.error = std::string(message_of(keys.status()));
      return out;
    }
    table = std::move(*keys);
  }
  // Checked before anything applies, so a bad level leaves every other change out too.
  if (changed({"log-level"})) {
    if (Status s = log::set_level(next->config.log_level); !s.ok()) {
      out.error = "--log-level: " + std::string(message_of(s));
      return out;
    }
  }
  access_.set_keys(changed({"api-key"}) ? next->config.api_key : live_config_.api_key,
                   next->config.admin_api_key, std::move(table));
  if (changed({"balance-abs-threshold", "balance-rel-threshold", "wait-spill-ratio", "tier-weights",
               "worker-overload-token-usage", "worker-overload-waiting-requests",
               "worker-overload-in-flight", "worker-overload-shed",
               "prefill-overload-waiting-requests"})) {
    policy_->reconfigure(routing_figures(next->config));
    if (decode_policy_) decode_policy_->reconfigure(next->config.cache_aware);
  }
  if (changed({"worker-urls", "prefill", "decode"})) apply_static_workers(next->config);
  // What applied is the running configuration now; what waits for a restart keeps its old value,
  // so a later reload names it again.
  FlagValues values = next->values;
  for (const std::string& name : changes.restart) {
    const auto was = running_values_.find(name);
    if (was == running_values_.end()) {
      values.erase(name);
    } else {
      values[name] = was->second;
    }
  }
  running_values_ = std::move(values);
  remember_live(next->config);
  out.ok = true;
  out.applied = changes.live;
  if (!live_config_.api_keys_file.empty()) out.applied.push_back("api-keys-file");
  out.need_restart = changes.restart;
  return out;
}

void GatewayImpl::remember_live(const GatewayConfig& next) {
  live_config_.worker_urls = next.worker_urls;
  live_config_.prefill_workers = next.prefill_workers;
  live_config_.decode_workers = next.decode_workers;
  if (live_config_.api_key.empty() == next.api_key.empty()) live_config_.api_key = next.api_key;
  live_config_.admin_api_key = next.admin_api_key;
  live_config_.cache_aware = next.cache_aware;
  live_config_.prefill_overload_waiting_requests = next.prefill_overload_waiting_requests;
  live_config_.log_level = next.log_level;
}

// The workers the command line names made to match `next`'s: those it no longer names removed
// (their requests in flight finish), new ones added, a changed role removed and added again.
// Workers from other sources (POST /workers, peers, pods) are left alone.
void GatewayImpl::apply_static_workers(const GatewayConfig& next) {
  const std::vector<StaticWorker> wanted = static_workers(next);
  const auto fleet = workers_.snapshot();
  for (size_t i = 0; i < fleet->workers.size(); ++i) {
    const workers::WorkerInfo& info = *fleet->infos[i];
    if (info.source != workers::WorkerSource::kFlags) continue;
    const std::string& url = fleet->workers[i]->url();
    const auto want = std::find_if(wanted.begin(), wanted.end(),
                                   [&](const StaticWorker& w) { return w.url == url; });
    if (want != wanted.end() && want->spec.role == info.role) continue;
    remove_worker(url);
  }
  for (const StaticWorker& w : wanted) {
    if (workers_.find(w.url) != nullptr) continue;
    if (Status s = add_worker(w.url, w.kv_endpoints, {}, w.spec); !s.ok()) {
      reload_log()->warn("worker {} not added: {}", workers::redact_url(w.url), message_of(s));
    }
  }
}

// ---- metrics -----------------------------------------------------------------------------------

ConfigReloadMetrics::ConfigReloadMetrics(metrics::Registry& registry)
    : reloads_(metrics::counter_family(registry, "kvgate_config_reloads_total",
                                       "Configuration reloads (SIGHUP, POST /admin/reload) by "
                                       "result: applied, or refused (the file or line did not "
                                       "parse; nothing changed).")),
      applied_(reloads_.Add({{"result", "applied"}})),
      refused_(reloads_.Add({{"result", "refused"}})),
      last_time_(metrics::gauge_family(registry, "kvgate_config_last_reload_timestamp_seconds",
                                       "When the last reload ran (Unix time; 0: none yet).")
                     .Add({})),
      last_success_(metrics::gauge_family(registry, "kvgate_config_last_reload_success",
                                          "1 when the last reload applied, 0 when it was "
                                          "refused (1 before any).")
                        .Add({})),
      pending_restart_(
          metrics::gauge_family(registry, "kvgate_config_restart_pending_flags",
                                "Flags changed in the configuration that keep their running values "
                                "until a restart.")
              .Add({})) {
  last_success_.Set(1);
}

void ConfigReloadMetrics::record(const ReloadOutcome& outcome, double unix_seconds) {
  MutexLock lock(&mu_);
  (outcome.ok ? applied_ : refused_).Increment();
  last_time_.Set(unix_seconds);
  last_success_.Set(outcome.ok ? 1 : 0);
  if (outcome.ok) pending_restart_.Set(static_cast<double>(outcome.need_restart.size()));
}

}  // namespace kvgate::app
