// kvgate's routing flags: the policy and the index, cache_aware's gates, the offload tiers'
// weights, the learned prefill rate and the blocks in flight.
#include <array>
#include <sstream>
#include <string>

#include "app/config_flags.h"
#include "app/flag_helpers.h"
#include "kvgate/index/indexer.h"
#include "kvgate/policy/policy.h"

namespace kvgate::app {
namespace {

// The policy, the index and what it hashes.
void add_routing_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option_function<std::string>(
         "--policy",
         [&c](const std::string& s) {
           auto k = policy::parse_policy_kind(s);
           if (!k.ok()) throw CLI::ValidationError("--policy", std::string(message_of(k.status())));
           c.policy = *k;
         },
         "Routing policy: cache_aware (prefix affinity with load gates), round_robin, random, "
         "power_of_two, least_load, consistent_hashing (on --routing-key-header)")
      ->default_str("cache_aware")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--kv-index",
         [&c](const std::string& s) {
           auto k = index::parse_index_kind(s);
           if (!k.ok())
             throw CLI::ValidationError("--kv-index", std::string(message_of(k.status())));
           c.kv_index = *k;
         },
         "KV index backend: chain (lock-free, compact), positional (the baseline) or reference "
         "(the obviously-correct definition, slow)")
      ->default_str("chain")
      ->group("Routing");
  app.add_flag_function(
         "--no-kv-events", [&c](int64_t) { c.kv_events = false; },
         "Do not subscribe to KV events; predict each worker's cache from the gateway's own "
         "routing "
         "decisions (approximate, see --prediction-ttl-secs)")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--kv-events-relay",
         [&c](const std::string& url) {
           constexpr std::string_view kScheme = "grpc://";
           if (url.rfind(kScheme, 0) != 0 || url.size() == kScheme.size() ||
               url.find(':', kScheme.size()) == std::string::npos) {
             throw CLI::ValidationError("--kv-events-relay",
                                        "expected grpc://HOST:PORT, got " + url);
           }
           c.kv_events_relay = url.substr(kScheme.size());
         },
         "Read every worker's KV events through a kvgate relay (`kvgate relay`), "
         "grpc://HOST:PORT, instead of subscribing to each engine; the relay's --engine URLs "
         "must be the workers' URLs. Streams resume from where they were after a break")
      ->group("Routing");
  app.add_option("--block-size", c.default_block_size,
                 "Tokens per KV block used for hashing until the workers report their own")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20))
      ->group("Routing");
  app.add_option("--hash-seed", c.hash_seed,
                 "Seed of the router's block hashes (every replica must agree)")
      ->capture_default_str()
      ->group("Routing");
  app.add_flag_function(
         "--dp-aware", [&c](int64_t) { c.dp_aware = true; },
         "Route to the data-parallel rank that holds the prefix, pinned with the "
         "X-Data-Parallel-Rank header vLLM and SGLang honour (the default for workers reporting "
         "more than one rank)")
      ->group("Routing");
  app.add_flag_function(
         "--no-dp-aware", [&c](int64_t) { c.dp_aware = false; },
         "Route to workers only and let each engine pick the rank (its own balancer ignores "
         "prefixes)")
      ->group("Routing");
  app.add_option("--routing-key-header", c.routing_key_header,
                 "Header consistent_hashing routes on (a session or user id the client sends)")
      ->capture_default_str()
      ->group("Routing");
}

// cache_aware's gates: balance, overload, warm-up, predictions.
void add_cache_aware_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option(
         "--balance-abs-threshold", c.cache_aware.balance_abs_threshold,
         "cache_aware spills off the deepest holder when its load exceeds the fleet mean by this "
         "many requests ...")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Routing");
  app.add_option("--balance-rel-threshold", c.cache_aware.balance_rel_threshold,
                 "... and by this factor (of the fleet mean; SGLang's router compares the most "
                 "loaded worker with the least)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Routing");
  app.add_option("--wait-spill-ratio", c.cache_aware.wait_spill_ratio,
                 "cache_aware sends a request elsewhere when the deepest holder's expected wait "
                 "exceeds the least by more than this many times the prefill its deeper match "
                 "saves (a few shared blocks never hold a request behind a long prefill; 0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Routing");
  app.add_option_function<std::string>(
         "--worker-overload-token-usage",
         [&c](const std::string& s) {
           if (s == "off") {
             c.cache_aware.overload.token_usage.reset();
             return;
           }
           double v = 0;
           try {
             v = std::stod(s);
           } catch (...) {
             throw CLI::ValidationError("--worker-overload-token-usage",
                                        "must be a fraction in (0, 1] or 'off'");
           }
           if (!(v > 0 && v <= 1))
             throw CLI::ValidationError("--worker-overload-token-usage",
                                        "must be in (0, 1] or 'off'");
           c.cache_aware.overload.token_usage = v;
         },
         "A worker whose KV cache usage reaches this fraction is overloaded and steered around "
         "('off' "
         "disables)")
      ->default_str("0.8")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--worker-overload-waiting-requests",
         count_or_off("--worker-overload-waiting-requests", 0,
                      c.cache_aware.overload.waiting_requests),
         "A worker with this many requests waiting in its queue is overloaded ('off' disables)")
      ->default_str("8")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--worker-overload-in-flight",
         count_or_off("--worker-overload-in-flight", 1, c.cache_aware.overload.in_flight_requests),
         "A worker (or data-parallel rank) with this many requests in flight from the gateway "
         "fleet is overloaded: this replica's own, plus its peers' with --state-sync. Set it near "
         "the engine's batch capacity plus its queue (vLLM --max-num-seqs plus "
         "--worker-overload-waiting-requests); 'off' disables")
      ->default_str("off")
      ->group("Routing");
  app.add_option_function<std::string>(
         "--worker-max-prefilling",
         count_or_off("--worker-max-prefilling", 1, c.cache_aware.overload.prefilling_requests),
         "Requests of this gateway that may wait for their first token at one worker. A worker "
         "with this many is overloaded (steered around), and when every worker that takes "
         "prompts has this many the next request waits in this gateway's queue, where "
         "--max-concurrent-requests' class and fair-share order hold, instead of in an engine's "
         "queue, where it would be computed beside the others. 1 keeps each engine's prompts "
         "one at a time: what a latency-sensitive tenant needs on a saturated fleet. A whole "
         "answer (not streamed) counts until it ends: the gateway sees no first token. 'off' "
         "disables")
      ->default_str("off")
      ->group("Routing");
  app.add_option("--reserved-critical-prefills", c.reserved_critical_prefills,
                 "Of the places --worker-max-prefilling gives (per worker, times the workers that "
                 "take prompts), those only critical requests take, never all of them: a critical "
                 "prompt that arrives while other classes' prompts fill the fleet starts at once "
                 "instead of after one of them. Size it to the critical prompts computed at once "
                 "(their rate times a prompt's time, with room); kvgate_admission_prefilling "
                 "shows the places taken")
      ->capture_default_str()
      ->group("Routing");
  app.add_flag(
         "--worker-overload-shed", c.cache_aware.shed_when_all_overloaded,
         "When every worker is overloaded, answer 503 instead of sending to the least-loaded one")
      ->group("Routing");
  app.add_option("--warmup-thin-ratio", c.cache_aware.warmup_thin_ratio,
                 "Warm-up: a worker whose index holds less than this share of the fleet's mean is "
                 "thin (an engine back with an empty cache, a new worker) and is sent a share of "
                 "the requests until it fills (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group("Routing");
  app.add_option("--warmup-miss-share", c.cache_aware.warmup_miss_share,
                 "Warm-up: the share of cache misses sent to a thin worker")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group("Routing");
  app.add_option("--warmup-hit-share", c.cache_aware.warmup_hit_share,
                 "Warm-up: the share of cache hits sent to a thin worker (each costs that hit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group("Routing");
  app.add_option("--warmup-max-diversions", c.cache_aware.warmup_max_diversions,
                 "Warm-up: requests a thin worker is sent at most before the rule gives up on it "
                 "(it starts again once the worker was not thin)")
      ->capture_default_str()
      ->group("Routing");
  add_seconds(app, "--prediction-ttl-secs", c.cache_aware.prediction_ttl,
              "Approximate mode: how long a routed prompt is assumed cached on a worker without KV "
              "events",
              "Routing");
}

// "host=0.8,disk=0.5": the named tiers' weights over `weights` (the others keep theirs);
// "off": every tier weighs as the device. Throws CLI::ValidationError naming the bad part.
void parse_tier_weights(const std::string& text, std::array<double, index::kTierCount>& weights) {
  const auto fail = [](const std::string& why) {
    throw CLI::ValidationError("--tier-weights", why);
  };
  if (text == "off") {
    weights.fill(1.0);
    return;
  }
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos) fail("'" + part + "' is not TIER=WEIGHT");
    const std::string name = part.substr(0, eq);
    size_t t = 0;
    while (t < index::kTierCount && index::tier_name(static_cast<index::Tier>(t)) != name) ++t;
    if (t == index::kTierCount) fail("'" + name + "' is not a tier (device, host, disk, external)");
    double w = -1;
    try {
      size_t used = 0;
      w = std::stod(part.substr(eq + 1), &used);
      if (used != part.size() - eq - 1) w = -1;
    } catch (...) {
      w = -1;
    }
    if (!(w >= 0 && w <= 1)) fail(name + "'s weight must be a number in [0, 1]");
    if (t == 0 && w != 1) fail("the device's weight is 1: the others are shares of it");
    weights[t] = w;
  }
}

// The cost model's prefill speed: a prior, and how fast each worker's own is learned.
void add_prefill_rate_flags(CLI::App& app, GatewayConfig& c) {
  app.add_option("--prefill-tokens-per-second", c.cache_aware.prefill_tokens_per_second,
                 "cache_aware's cost model: the prompt tokens per second a worker prefills")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9))
      ->group("Routing");
  app.add_flag("--measured-prefill-rate", c.cache_aware.measured_prefill_rate,
               "cache_aware costs each worker at the prefill rate its streamed requests' first "
               "tokens taught the gateway (kvgate_worker_prefill_tokens_per_second), not "
               "--prefill-tokens-per-second. Off by default: on a replay with half the workers "
               "at half speed it placed conversations worse (docs/benchmarks.md)")
      ->group("Routing");
  add_seconds(app, "--prefill-rate-half-life-secs", c.prefill_rate_half_life,
              "How fast a worker's learned prefill rate forgets its old samples (a worker that "
              "slows under decode-heavy batches is seen within a few half-lives); 0: not learned",
              "Routing");
}

void add_tier_weights_flag(CLI::App& app, GatewayConfig& c) {
  app.add_option_function<std::string>(
         "--tier-weights",
         [&c](const std::string& s) { parse_tier_weights(s, c.cache_aware.tier_weights); },
         "cache_aware: what a matched block held off the device saves, as a share of computing "
         "it (it must be loaded first): TIER=WEIGHT,... over device, host, disk and external; "
         "'off' weighs every tier as the device. A worker's blocks past its device depth count at "
         "the weight of the dearest tier its KV events store on")
      ->default_str("device=1,host=0.8,disk=0.5,external=0.3")
      ->group("Routing");
}

// Blocks in flight (cache_aware, workers with KV events): a dispatched prompt credited to its
// worker until its events can have confirmed it.
void add_pending_flags(CLI::App& app, GatewayConfig& c) {
  add_seconds(app, "--pending-blocks-max-age-secs", c.cache_aware.pending_max_age,
              "Blocks in flight: a routed prompt counts as cached on its worker (for the requests "
              "that share its prefix) until its KV events can have confirmed it, at most this "
              "long; 0: off, and a burst sharing a new prefix is spread before the first events "
              "arrive",
              "Routing");
  add_seconds(app, "--pending-blocks-grace-secs", c.cache_aware.pending_grace,
              "Blocks in flight: how long after its first token a request's prompt still counts "
              "(the KV events' lag; kvgate_events_apply_lag_seconds shows it)",
              "Routing");
  app.add_option("--pending-blocks-max-requests", c.cache_aware.pending_max_requests,
                 "Blocks in flight: requests credited at most (the oldest credit ends first)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group("Routing");
  app.add_option("--pending-blocks-depth-levels", c.cache_aware.pending_depth_levels,
                 "Blocks in flight: a decision counts the credits of the holders at this many of "
                 "the deepest depths credits reach (each level a binary search of the prompt)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group("Routing");
  app.add_option("--pending-blocks-capacity", c.cache_aware.pending_capacity_blocks,
                 "Blocks in flight: blocks credited at most, all requests together")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group("Routing");
}

}  // namespace

void add_routing_flag_groups(CLI::App& app, GatewayConfig& c) {
  add_routing_flags(app, c);
  add_cache_aware_flags(app, c);
  add_tier_weights_flag(app, c);
  add_prefill_rate_flags(app, c);
  add_pending_flags(app, c);
}

}  // namespace kvgate::app
