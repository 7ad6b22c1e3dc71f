// Routes that show an operator what the gateway sees and decides:
//
//   POST|GET /debug/route  a generation request's body -> the decision it would get now (the
//                       x-kvgate-decision fields in JSON), without sending it anywhere. The API
//                       is the body's: "messages" a chat completion, "prompt" a completion,
//                       else SGLang's /generate. A decision has its small effects all the same:
//                       round_robin's turn moves on, a warm-up diversion is counted.
//   GET /dashboard        one self-contained page (no external scripts or fonts) polling:
//   GET /dashboard/state  the fleet now and its recent history (app/fleet_pulse.h), JSON
#include <simdjson.h>

#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "app/cache_report.h"
#include "app/dashboard_page.h"
#include "app/gateway_impl.h"
#include "kvgate/core/json_writer.h"
#include "kvgate/policy/explain.h"

namespace kvgate::app {
namespace net = boost::asio;

namespace {

constexpr auto kPulsePeriod = std::chrono::seconds(1);

// The API a /debug/route body is shaped for.
ApiRoute api_of(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc) != simdjson::SUCCESS) return ApiRoute::kCompletions;
  if (doc["messages"].error() == simdjson::SUCCESS) return ApiRoute::kChatCompletions;
  if (doc["prompt"].error() == simdjson::SUCCESS) return ApiRoute::kCompletions;
  return ApiRoute::kGenerate;
}

}  // namespace

http::Response GatewayImpl::debug_route(const http::Request& req) {
  const auto fleet = workers_.snapshot();
  const ApiRoute api = api_of(req.body());
  ParsedRequest p;
  if (Status s =
          parse_request(api, req.body(), tokenizers_, routing_.max_prompt_tokens(*fleet), &p);
      !s.ok()) {
    return http::Response::error(400, message_of(s));
  }
  if (!p.model.empty() && !fleet->knows_model(p.model)) {
    return http::Response::error(404, "The model '" + p.model + "' does not exist",
                                 "not_found_error");
  }
  const uint32_t block_size = routing_.block_size(*fleet);
  policy::RouteRequest rr =
      routing_.route_request(req, p, routing_.prompt_chain(p, *fleet), *fleet);
  rr.explain = true;
  thread_local policy::Scratch scratch;
  const MonoTime t0 = clock_.now();
  const policy::Decision d = policy_->select(rr, *fleet, scratch);
  const double decision_us = to_seconds(clock_.now() - t0) * 1e6;
  const policy::Explanation e =
      policy::explain(rr, d, *fleet, scratch, routing_.cost_model(), kDebugTop);
  std::string body;
  JsonWriter w(&body);
  w.begin_object().member("api", api_route_name(api)).member("model", p.model);
  w.member("prompt_tokens", static_cast<uint64_t>(p.tokens.size()));
  w.member("block_size", block_size);
  w.member("predicted_cached_tokens",
           d.worker >= 0 ? predicted_cached_tokens(d.matched_blocks, p.tokens.size(), block_size)
                         : uint64_t{0});
  w.member("decision_us", decision_us);
  w.key("decision");
  write_decision_json(w, policy_->name(), e, *fleet);
  w.member("header", decision_text(policy_->name(), e, *fleet)).end_object();
  return http::Response::json(200, std::move(body));
}

void GatewayImpl::sample_pulse() {
  metrics_->publish();
  PulseTotals t = read_registry_totals(registry_);
  t.seconds = to_seconds(clock_.now().time_since_epoch());
  t.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  const auto fleet = workers_.snapshot();
  t.dispatched.reserve(fleet->workers.size());
  for (const auto& w : fleet->workers) t.dispatched.emplace_back(w->url(), w->dispatched());
  t.admission = admission_->stats();
  pulse_.sample(std::move(t));
}

void GatewayImpl::arm_pulse() {
  pulse_timer_->expires_after(kPulsePeriod);
  pulse_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // stopped
    sample_pulse();
    arm_pulse();
  });
}

void GatewayImpl::start_pulse() {
  started_at_ = clock_.now();
  pulse_timer_ = std::make_unique<net::steady_timer>(parse_context_);
  sample_pulse();
  arm_pulse();
}

std::string GatewayImpl::dashboard_state() {
  const auto fleet = workers_.snapshot();
  // The cards cover the last 10 s; the panels the last minute, where errors and latency
  // percentiles have observations enough to say something.
  const PulseWindow tiles = pulse_.window(10);
  const PulseWindow panels = pulse_.window(60);
  std::string body;
  JsonWriter w(&body);
  w.begin_object();
  w.member("generated_at_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  w.member("uptime_seconds", to_seconds(clock_.now() - started_at_));
  w.member("policy", policy_->name());
  w.member("ready", ready(*fleet)).member("draining", draining_.load(std::memory_order_relaxed));
  w.key("fleet").begin_object();
  w.member("workers", static_cast<uint64_t>(fleet->workers.size()));
  w.member("routable", static_cast<uint64_t>(routable_workers(*fleet)));
  write_fleet_window(w, tiles, *fleet);
  w.end_object();
  write_series(w, pulse_.series(), static_cast<double>(kPulsePeriod.count()));
  write_traffic(w, panels);
  write_admission(w, admission_->enabled(), admission_->stats(), panels);
  // Each worker's share of the window's decisions (none sent anywhere: null for all).
  const absl::flat_hash_map<std::string_view, double> shares(tiles.decision_share.begin(),
                                                             tiles.decision_share.end());
  w.key("workers").begin_array();
  for (const auto& wk : fleet->workers) {
    std::optional<double> share;
    if (!shares.empty()) {
      const auto it = shares.find(wk->url());
      share = it == shares.end() ? 0.0 : it->second;
    }
    write_worker_row(w, *wk, share);
  }
  w.end_array();
  write_tenants(w);
  w.end_object();
  return body;
}

void GatewayImpl::write_tenants(JsonWriter& w) const {
  w.key("tenants").begin_array();
  for (const TenantMetrics::Totals& t :
       tenant_metrics_ ? tenant_metrics_->totals() : std::vector<TenantMetrics::Totals>{}) {
    w.begin_object().member("tenant", t.tenant).key("requests").begin_object();
    for (size_t c = 0; c < t.requests.size(); ++c)
      w.member(priority_name(static_cast<Priority>(c)), t.requests[c]);
    w.end_object().member("prompt_tokens", t.prompt_tokens);
    w.member("output_tokens", t.output_tokens).member("rate_limited", t.rate_limited);
    w.end_object();
  }
  w.end_array();
  // The admission queue by class (null without --max-concurrent-requests).
  w.key("queued_by_class");
  if (!admission_) {
    w.null();
    return;
  }
  const AdmissionStats a = admission_->stats();
  w.begin_object();
  for (size_t c = 0; c < a.queued_by_class.size(); ++c)
    w.member(priority_name(static_cast<Priority>(c)), a.queued_by_class[c]);
  w.end_object();
}

void GatewayImpl::add_observe_routes() {
  for (const http::Verb verb : {http::Verb::post, http::Verb::get}) {
    route(verb, "/debug/route", Access::kClient,
          [this](const http::Request& req, http::Responder& res) -> net::awaitable<void> {
            http::Response r = debug_route(req);
            (void)co_await res.send(std::move(r));
          });
  }
  route(http::Verb::get, "/dashboard", Access::kOpen,
        [](const http::Request&, http::Responder& res) -> net::awaitable<void> {
          // The page holds no data: it asks /dashboard/state, under the client's key.
          http::Response r =
              http::Response::text(200, std::string(dashboard_page()), "text/html; charset=utf-8");
          r.headers.emplace_back("cache-control", "no-cache");
          (void)co_await res.send(std::move(r));
        });
  route(http::Verb::get, "/dashboard/state", Access::kClient,
        [this](const http::Request&, http::Responder& res) -> net::awaitable<void> {
          http::Response r = http::Response::json(200, dashboard_state());
          r.headers.emplace_back("cache-control", "no-store");
          (void)co_await res.send(std::move(r));
        });
}

}  // namespace kvgate::app
