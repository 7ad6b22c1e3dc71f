// The live dashboard: its page (GET /dashboard) and the sections of its state's JSON (GET
// /dashboard/state) that come from the pulse and the workers.
//
// The page is one HTML document with its CSS and JS inline and its charts drawn as inline SVG, so
// it works on a cluster with no way out to fetch anything else. It polls dashboard/state every
// 2 s (a relative URL, so it works behind a path prefix) and draws fleet cards, sparklines of the
// recent series, the errors, latency, tokens and admission panels and one row per worker. Every
// card, sparkline and panel says the window its figures cover, taken from the answer
// (window_seconds, series.span_seconds): the cards the last 10 s, the sparklines one point per
// second over the last minutes (their newest point the last second), the panels the last 60 s. A
// 401 asks for the API key (kept in the tab's sessionStorage, sent as a Bearer token); a failed
// poll keeps the last figures, greyed, under a "gateway unreachable, retrying" notice, never a
// blank page. Every string from the answer reaches the DOM as text, never as markup: worker URLs
// and model names are operator input. A worker's URL shows as host:port (shortened in the middle
// to fit the window), the whole URL in the title.
//
// Hooks for tests: each worker is <tr class="worker" data-url=URL> (plus class "down" when it is
// not routable, unhealthy, unreachable, wedged or its breaker is open, and "dead" when it is
// unhealthy or unreachable, the reasons written in its first cell) with cells data-field= worker,
// health, liveness, circuit_breaker, in_flight, waiting, kv_usage, index_blocks,
// cached_predicted, cached_reported, agreement, decision_share; the fleet figures are the
// elements with ids requests-per-second, decision-p50, decision-p99, hit-ratio, apply-lag-p50,
// apply-lag-p99, event-gaps, degraded-ranks, workers-routable, policy, state; every window label
// is an element with class "window" and data-window-for= the card, sparkline or panel it labels;
// the panels are #errors-panel (errors-per-second, errors-count, status-4xx, status-5xx, rows
// tr.error-reason data-reason=), #latency-panel (ttft-p50, ttft-p90, ttft-p99, ttft-count,
// e2e-p50, e2e-p90, e2e-p99, e2e-count, in ms), #tokens-panel (prompt-tokens-per-second,
// completion-tokens-per-second) and #admission-panel (admission-queued, admission-running,
// admission-queued-critical, -standard, -sheddable, admission-waited, admission-shed,
// admission-refused-full, admission-refused-timeout, admission-abandoned); with tenants (a keys
// file) or an admission queue, #tenants-panel shows, each tenant a <tr class="tenant"
// data-tenant=NAME> with cells data-field= requests_critical, requests_standard,
// requests_sheddable, requests_per_second, prompt_tokens, output_tokens, rate_limited, and
// #queued the queue by class; after each render body[data-updated] holds the answer's
// generated_at_ms.
//
// Threading: pure functions.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "app/admission_gate.h"
#include "app/fleet_pulse.h"
#include "kvgate/core/json_writer.h"
#include "kvgate/workers/registry.h"
#include "kvgate/workers/worker.h"

namespace kvgate::app {

// The whole page: static bytes, the same on every call.
std::string_view dashboard_page();

// The fleet card figures of `tiles` (members of the open "fleet" object): window_seconds, rates,
// decision and KV-event quantiles, event gaps and the fleet's degraded ranks.
void write_fleet_window(JsonWriter& w, const PulseWindow& tiles,
                        const workers::FleetSnapshot& fleet);

// "series": the one-second points, their period and the span they cover.
void write_series(JsonWriter& w, const std::vector<PulsePoint>& points, double period_seconds);

// "errors", "latency" and "tokens": the panels' figures over `panels`, each with its window.
void write_traffic(JsonWriter& w, const PulseWindow& panels);

// "admission": the gate's queue now (`now`) and what it did over `panels`.
void write_admission(JsonWriter& w, bool enabled, const AdmissionStats& now,
                     const PulseWindow& panels);

// One worker's row: state, load, cached tokens (agreement null, with the reason, while the worker
// is not live or nothing was predicted or reported there) and its share of the window's
// decisions.
void write_worker_row(JsonWriter& w, const workers::Worker& worker,
                      std::optional<double> decision_share);

}  // namespace kvgate::app
