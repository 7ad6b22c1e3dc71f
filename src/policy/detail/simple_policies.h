// Factories of the policies that ignore the cache (simple_policies.cc) and of cache_aware.
#pragma once

#include <memory>

#include "kvgate/policy/policy.h"

namespace kvgate::policy::detail {

std::unique_ptr<Policy> make_random();
std::unique_ptr<Policy> make_round_robin();
std::unique_ptr<Policy> make_power_of_two();
std::unique_ptr<Policy> make_least_load();
std::unique_ptr<Policy> make_consistent_hashing();
std::unique_ptr<Policy> make_cache_aware(const CacheAwareConfig& config, PolicyDeps deps);

}  // namespace kvgate::policy::detail
