#include "kvgate/app/config.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <optional>

#include "app/flag_helpers.h"
#include "boost/beast/core/string.hpp"
#include "kvgate/core/clock.h"
#include "kvgate/events/ingest.h"
#include "kvgate/http/message.h"
#include "kvgate/kube/selector.h"
#include "kvgate/sync/state_sync.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {
namespace {}  // namespace

GatewayConfig::PrefillWorker parse_prefill_worker(const std::vector<std::string>& spec) {
  GatewayConfig::PrefillWorker out;
  if (spec.empty() || spec.size() > 2) {
    throw CLI::ValidationError("--prefill", "expected URL [BOOTSTRAP_PORT]");
  }
  auto url = workers::WorkerRegistry::normalize_url(spec[0]);
  if (!url.ok()) throw CLI::ValidationError("--prefill", std::string(message_of(url.status())));
  out.url = spec[0];
  if (spec.size() == 2) {
    unsigned port = 0;
    const auto [end, ec] = std::from_chars(spec[1].data(), spec[1].data() + spec[1].size(), port);
    if (ec != std::errc() || end != spec[1].data() + spec[1].size() || port == 0 || port > 65535) {
      throw CLI::ValidationError("--prefill", "the bootstrap port '" + spec[1] + "' of " + spec[0] +
                                                  " is not a port (1-65535)");
    }
    out.bootstrap_port = static_cast<uint16_t>(port);
  }
  return out;
}

ExplicitKvEndpoint parse_kv_endpoint(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos) {
    throw CLI::ValidationError(
        "--kv-events-endpoint",
        "expected WORKER_URL=tcp://HOST:PORT[,replay=...][,topic=...][,rank=N]");
  }
  ExplicitKvEndpoint out;
  auto url = workers::WorkerRegistry::normalize_url(spec.substr(0, eq));
  if (!url.ok())
    throw CLI::ValidationError("--kv-events-endpoint", std::string(message_of(url.status())));
  out.worker_url = *url;
  std::string rest = spec.substr(eq + 1);
  size_t start = 0;
  bool first = true;
  while (start <= rest.size()) {
    const size_t comma = rest.find(',', start);
    const std::string part =
        rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (first) {
      out.endpoint.publisher = part;
      first = false;
    } else if (part.rfind("replay=", 0) == 0) {
      out.endpoint.replay = part.substr(7);
    } else if (part.rfind("topic=", 0) == 0) {
      out.endpoint.topic = part.substr(6);
    } else if (part.rfind("rank=", 0) == 0) {
      try {
        out.endpoint.rank = static_cast<DpRank>(std::stoul(part.substr(5)));
      } catch (...) {
        throw CLI::ValidationError("--kv-events-endpoint", "rank= must be a number: " + part);
      }
    } else if (!part.empty()) {
      throw CLI::ValidationError("--kv-events-endpoint",
                                 "unknown part '" + part + "' (replay=, topic=, rank=)");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.endpoint.publisher.rfind("tcp://", 0) != 0 &&
      out.endpoint.publisher.rfind("ipc://", 0) != 0) {
    throw CLI::ValidationError("--kv-events-endpoint",
                               "the publisher endpoint must be tcp://HOST:PORT or ipc://PATH");
  }
  return out;
}

// ---- KV-event intake bounds -------------------------------------------------------------------

KvEventBounds default_kv_event_bounds() {
  const events::IngestOptions io;
  const events::IntakeBounds& b = io.subscription.bounds;
  return {.live_hwm = b.live_hwm,
          .replay_hwm = b.replay_hwm,
          .max_message_bytes = b.max_message_bytes,
          .turn_messages = b.turn_messages,
          .turn_bytes = b.turn_bytes,
          .replay_interval = b.replay_pacing.min_interval,
          .replay_backoff_max = b.replay_pacing.max_interval,
          .hash_quarantine_ratio = b.quarantine.max_mismatch_ratio,
          .capacity_margin = io.capacity_margin,
          .max_holder_blocks = io.default_holder_blocks,
          .lag_window = io.lag_window};
}

void apply_kv_event_bounds(const KvEventBounds& k, events::SubscriptionOptions& o) {
  events::IntakeBounds& b = o.bounds;
  b.live_hwm = k.live_hwm;
  b.replay_hwm = k.replay_hwm;
  b.max_message_bytes = k.max_message_bytes;
  b.turn_messages = k.turn_messages;
  b.turn_bytes = k.turn_bytes;
  b.replay_pacing = {.min_interval = k.replay_interval,
                     .max_interval = std::max(k.replay_interval, k.replay_backoff_max)};
  b.quarantine.max_mismatch_ratio = k.hash_quarantine_ratio;
  // Nothing past the socket's limit reaches the decoder either.
  o.limits.max_payload_bytes =
      std::min(o.limits.max_payload_bytes, static_cast<size_t>(k.max_message_bytes));
}

void apply_kv_event_bounds(const KvEventBounds& k, events::IngestOptions& o) {
  apply_kv_event_bounds(k, o.subscription);
  o.capacity_margin = k.capacity_margin;
  o.default_holder_blocks = k.max_holder_blocks;
  o.lag_window = k.lag_window;
}

void add_kv_event_bound_flags(CLI::App& app, KvEventBounds& b, bool index_bounds) {
  const char* group = "KV event bounds";
  const auto secs = [&](const char* name, std::chrono::milliseconds& field, const char* help) {
    app.add_option_function<double>(
           name,
           [&field, name](double s) {
             positive_seconds(s, name);
             field = std::max(std::chrono::milliseconds(1), seconds(s));
           },
           help)
        ->default_str(CLI::detail::to_string(to_seconds(field)))
        ->group(group);
  };
  app.add_option("--kv-events-rcvhwm", b.live_hwm,
                 "KV-event messages one rank's socket queues; past it the engine's publisher drops "
                 "what its own queue cannot take and the gap is replayed "
                 "(kvgate_events_gaps_total), so a flood costs the engine's memory, not kvgate's")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000))
      ->group(group);
  app.add_option("--kv-events-replay-rcvhwm", b.replay_hwm,
                 "Messages one rank's replay socket queues: at least the engine's replay window "
                 "(vLLM keeps 10,000 batches), or the engine drops the rest of a replay")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000'000))
      ->group(group);
  app.add_option("--kv-events-max-message-bytes", b.max_message_bytes,
                 "A KV-event message larger than this drops the engine's connection before it is "
                 "read into memory (reconnected within a second, the gap replayed); a batch of a "
                 "million prompt tokens is about 5 MB")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 40))
      ->group(group);
  app.add_option("--kv-events-turn-messages", b.turn_messages,
                 "Messages one rank's socket is served per event-thread turn, before the "
                 "thread's other ranks have theirs (kvgate_events_turns_capped_total)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000))
      ->group(group);
  app.add_option("--kv-events-turn-bytes", b.turn_bytes,
                 "Bytes one rank's socket is served per turn, whichever of the two comes first")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1024}, size_t{1} << 40))
      ->group(group);
  secs("--kv-events-replay-interval-secs", b.replay_interval,
       "Replay requests to one rank at most this often; while gaps keep coming the spacing "
       "doubles up to --kv-events-replay-backoff-max-secs (kvgate_events_replays_deferred_total)");
  secs("--kv-events-replay-backoff-max-secs", b.replay_backoff_max,
       "The longest spacing between replay requests to a rank whose sequence keeps breaking");
  app.add_option("--kv-events-hash-quarantine-ratio", b.hash_quarantine_ratio,
                 "A rank whose engine hashes matched the scheme and then mismatch beyond this "
                 "share (over 256 checked blocks) is emptied and not indexed until they match "
                 "again; routing places requests there by load (kvgate_events_hash_quarantined; "
                 "0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(group);
  if (!index_bounds) return;
  app.add_option(
         "--kv-events-capacity-margin", b.capacity_margin,
         "A rank's index holds at most its engine's KV pool (/server_info) times this; "
         "past it its oldest blocks are evicted (kvgate_events_limit_evicted_blocks_total). "
         "Raise it for engines that also publish host or disk tiers")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0))
      ->group(group);
  app.add_option("--kv-events-max-holder-blocks", b.max_holder_blocks,
                 "The most blocks a rank's index holds when its engine does not say its KV pool")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 32))
      ->group(group);
  secs("--kv-events-lag-window-secs", b.lag_window,
       "Publisher timestamps further than this from kvgate's clock are left out of "
       "kvgate_events_apply_lag_seconds (kvgate_events_lag_ignored_total)");
}

namespace {

// The routing key's header must be a header name, and not one that frames the request or is
// unique to each request: consistent hashing on it would spread requests as randomly as
// round_robin. (authorization is allowed: routing by API key keeps a caller on one worker.)
Status check_routing_key_header(std::string_view name) {
  if (!http::is_token(name)) {
    return absl::InvalidArgumentError(
        "--routing-key-header must be an HTTP header name (letters, digits, '-', ...)");
  }
  for (std::string_view taken : {"content-type", "content-length", "host", "transfer-encoding",
                                 "connection", "x-request-id"}) {
    if (boost::beast::iequals(name, taken)) {
      return absl::InvalidArgumentError(
          "--routing-key-header cannot be " + std::string(taken) +
          ": it frames the request or differs on every request; name the header that carries a "
          "session or user id");
    }
  }
  return absl::OkStatus();
}

}  // namespace

static Status check_pd(const GatewayConfig& c) {
  if (!c.pd_disaggregation) {
    if (!c.prefill_workers.empty() || !c.decode_workers.empty()) {
      return absl::InvalidArgumentError(
          "--prefill and --decode need --pd-disaggregation (prefill/decode disaggregation)");
    }
    return absl::OkStatus();
  }
  if (!c.worker_urls.empty()) {
    return absl::InvalidArgumentError(
        "--worker-urls with --pd-disaggregation: a disaggregated fleet's workers are given by "
        "--prefill URL [BOOTSTRAP_PORT] and --decode URL");
  }
  for (const auto& url : c.decode_workers) {
    if (auto a = workers::parse_worker_url(url); !a.ok()) return a.status();
  }
  const bool local = c.pd_local_prefill_by_cache() || c.pd_local_prefill_by_wait();
  if (local && c.pd_protocol != GatewayConfig::PdProtocol::kVllm) {
    return absl::InvalidArgumentError(
        "--pd-local-prefill-tokens, --pd-local-prefill-share and --pd-local-prefill-wait-ratio "
        "need --pd-protocol vllm: a SGLang decode worker cannot prefill a prompt itself");
  }
  return absl::OkStatus();
}

static Status check_discovery(const GatewayConfig& c) {
  const bool any_selector =
      !c.selector.empty() || !c.prefill_selector.empty() || !c.decode_selector.empty();
  if (!c.service_discovery) {
    if (any_selector || !c.kubeconfig.empty()) {
      return absl::InvalidArgumentError(
          "--selector, --prefill-selector, --decode-selector and --kubeconfig need "
          "--service-discovery");
    }
    return absl::OkStatus();
  }
  if (c.pd_disaggregation && (c.prefill_selector.empty() || c.decode_selector.empty())) {
    return absl::InvalidArgumentError(
        "--service-discovery with --pd-disaggregation needs --prefill-selector and "
        "--decode-selector");
  }
  if (!c.pd_disaggregation && c.selector.empty()) {
    return absl::InvalidArgumentError("--service-discovery needs --selector (e.g. app=sglang)");
  }
  if (!c.pd_disaggregation && (!c.prefill_selector.empty() || !c.decode_selector.empty())) {
    return absl::InvalidArgumentError(
        "--prefill-selector and --decode-selector need --pd-disaggregation");
  }
  for (const std::string* s : {&c.selector, &c.prefill_selector, &c.decode_selector}) {
    if (s->empty()) continue;
    if (auto parsed = kube::Selector::parse(*s); !parsed.ok()) return parsed.status();
  }
  if (c.discovery_port == 0) return absl::InvalidArgumentError("--service-discovery-port is 0");
  return absl::OkStatus();
}

Status finish_config(GatewayConfig& c) {
  for (const auto& url : c.worker_urls) {
    if (auto a = workers::parse_worker_url(url); !a.ok()) return a.status();
  }
  if (Status s = check_pd(c); !s.ok()) return s;
  if (Status s = check_discovery(c); !s.ok()) return s;
  if (c.reserved_critical_prefills > 0 && !c.cache_aware.overload.prefilling_requests) {
    return absl::InvalidArgumentError(
        "--reserved-critical-prefills needs --worker-max-prefilling (the places it reserves)");
  }
  if (c.cache_aware.balance_rel_threshold < 1.0) {
    return absl::InvalidArgumentError("--balance-rel-threshold must be >= 1");
  }
  if (c.upstream_idle_timeout.count() <= 0)
    return absl::InvalidArgumentError("--upstream-idle-timeout-secs must be above 0");
  if (c.max_payload_bytes < 1024)
    return absl::InvalidArgumentError("--max-payload-size must be at least 1024");
  if (Status s = check_routing_key_header(c.routing_key_header); !s.ok()) return s;
  if (c.tls_cert_path.empty() != c.tls_key_path.empty()) {
    return absl::InvalidArgumentError(c.tls_cert_path.empty()
                                          ? "--tls-key-path needs --tls-cert-path"
                                          : "--tls-cert-path needs --tls-key-path");
  }
  if (!c.state_sync_url.empty()) {
    if (auto t = sync::parse_redis_url(c.state_sync_url); !t.ok())
      return absl::InvalidArgumentError("--state-sync: " + std::string(message_of(t.status())));
    if (!sync::validate_namespace(c.state_sync_namespace)) {
      return absl::InvalidArgumentError(
          "--state-sync-namespace must be 1-64 characters of letters, digits, '_', '.', '-'");
    }
    if (c.state_sync_ttl.count() == 0) c.state_sync_ttl = c.state_sync_period * 3;
    if (c.state_sync_ttl <= c.state_sync_period) {
      return absl::InvalidArgumentError(
          "--state-sync-ttl-secs must be longer than --state-sync-period-secs (entries would "
          "expire between refreshes)");
    }
  }
  return absl::OkStatus();
}

}  // namespace kvgate::app
