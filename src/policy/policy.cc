#include "kvgate/policy/policy.h"

#include "policy/detail/simple_policies.h"

namespace kvgate::policy {

const char* branch_name(Branch b) {
  switch (b) {
    case Branch::kAffinity:
      return "affinity";
    case Branch::kFreshPrefix:
      return "fresh_prefix";
    case Branch::kWaitSpill:
      return "wait_spill";
    case Branch::kImbalanceSpill:
      return "imbalance_spill";
    case Branch::kWarmup:
      return "warmup";
    case Branch::kOverloadSteer:
      return "overload_steer";
    case Branch::kAllOverloaded:
      return "all_overloaded";
    case Branch::kShed:
      return "shed";
    case Branch::kNoWorker:
      return "no_worker";
    case Branch::kRandom:
      return "random";
    case Branch::kRoundRobin:
      return "round_robin";
    case Branch::kPowerOfTwo:
      return "power_of_two";
    case Branch::kLeastLoad:
      return "least_load";
    case Branch::kConsistentHash:
      return "consistent_hash";
    case Branch::kCount:
      break;
  }
  return "unknown";
}

std::string_view policy_kind_name(PolicyKind k) {
  switch (k) {
    case PolicyKind::kRandom:
      return "random";
    case PolicyKind::kRoundRobin:
      return "round_robin";
    case PolicyKind::kPowerOfTwo:
      return "power_of_two";
    case PolicyKind::kLeastLoad:
      return "least_load";
    case PolicyKind::kConsistentHashing:
      return "consistent_hashing";
    case PolicyKind::kCacheAware:
      return "cache_aware";
  }
  return "unknown";
}

Result<PolicyKind> parse_policy_kind(std::string_view s) {
  for (auto k : {PolicyKind::kRandom, PolicyKind::kRoundRobin, PolicyKind::kPowerOfTwo,
                 PolicyKind::kLeastLoad, PolicyKind::kConsistentHashing, PolicyKind::kCacheAware}) {
    if (policy_kind_name(k) == s) return k;
  }
  return absl::InvalidArgumentError(
      "unknown policy '" + std::string(s) +
      "' (random, round_robin, power_of_two, least_load, consistent_hashing, cache_aware)");
}

Result<std::unique_ptr<Policy>> make_policy(PolicyKind kind, const CacheAwareConfig& config,
                                            PolicyDeps deps) {
  switch (kind) {
    case PolicyKind::kRandom:
      return detail::make_random();
    case PolicyKind::kRoundRobin:
      return detail::make_round_robin();
    case PolicyKind::kPowerOfTwo:
      return detail::make_power_of_two();
    case PolicyKind::kLeastLoad:
      return detail::make_least_load();
    case PolicyKind::kConsistentHashing:
      return detail::make_consistent_hashing();
    case PolicyKind::kCacheAware:
      return detail::make_cache_aware(config, deps);
  }
  return absl::InvalidArgumentError("unknown policy kind");
}

}  // namespace kvgate::policy
