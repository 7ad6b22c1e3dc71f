// kvgate's command line in parts, by --help group (config_flags.cc assembles them in order):
// routing (config_flags_routing.cc) and the fleet and its workers (config_flags_fleet.cc).
#pragma once

#include <CLI/CLI.hpp>

#include "kvgate/app/config.h"

namespace kvgate::app {

// The policy and the index, cache_aware's gates, the offload tiers' weights, the learned prefill
// rate and the blocks in flight ("Routing").
void add_routing_flag_groups(CLI::App& app, GatewayConfig& c);
// The workers and how they are found, prefill/decode pairs, pod discovery, state sync, the KV
// event intake, requests to the workers and each worker's state.
void add_fleet_flag_groups(CLI::App& app, GatewayConfig& c);

}  // namespace kvgate::app
