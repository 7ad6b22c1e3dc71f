// The live dashboard's page (GET /dashboard): one HTML document with its CSS and JS inline and its
// charts drawn as inline SVG, so it works on a cluster with no way out to fetch anything else.
//
// The page polls dashboard/state every 2 s (a relative URL, so it works behind a path prefix) and
// draws fleet cards, sparklines of the recent series and one row per worker. A 401 asks for the
// API key (kept in the tab's sessionStorage, sent as a Bearer token); a failed poll keeps the last
// figures, greyed, under a "gateway unreachable, retrying" notice, never a blank page. Every
// string from the answer reaches the DOM as text, never as markup: worker URLs and model names
// are operator input.
//
// Hooks for tests: each worker is <tr class="worker" data-url=URL> (plus class "down" when it is
// not routable, unhealthy, unreachable, wedged or its breaker is open) with cells data-field=
// health, liveness, circuit_breaker, in_flight, waiting, kv_usage, index_blocks,
// cached_predicted, cached_reported, agreement, decision_share; the fleet figures are the elements
// with ids requests-per-second, decision-p50, decision-p99, hit-ratio, apply-lag-p50,
// apply-lag-p99, event-gaps, degraded-ranks, workers-routable, policy, state; with tenants (a
// keys file) or an admission queue, #tenants-panel shows, each tenant a <tr class="tenant"
// data-tenant=NAME> with cells data-field= requests_critical, requests_standard,
// requests_sheddable, requests_per_second, prompt_tokens, output_tokens, rate_limited, and
// #queued the queue by class; after each render body[data-updated] holds the answer's
// generated_at_ms.
#pragma once

#include <string_view>

namespace kvgate::app {

// The whole page: static bytes, the same on every call.
std::string_view dashboard_page();

}  // namespace kvgate::app
