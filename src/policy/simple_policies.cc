// Policies that ignore the cache: random, round_robin, power_of_two, least_load,
// consistent_hashing.
#include "policy/detail/simple_policies.h"

#include <atomic>

#include "policy/detail/candidates.h"
#include "xxhash.h"

namespace kvgate::policy::detail {
namespace {

Decision none() { return {.worker = -1, .branch = Branch::kNoWorker}; }

// The decision for a candidate: its worker, and its rank when it is one.
Decision chose(const Candidate& c, Branch b) {
  return {.worker = c.index, .branch = b, .rank = c.rank};
}

class RandomPolicy final : public Policy {
 public:
  std::string_view name() const override { return "random"; }
  Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                  Scratch& s) override {
    const size_t n = collect_candidates(req, fleet, s);
    if (n == 0) return none();
    const size_t pick = std::uniform_int_distribution<size_t>(0, n - 1)(s.rng);
    return chose(s.candidates[pick], Branch::kRandom);
  }
};

class RoundRobinPolicy final : public Policy {
 public:
  std::string_view name() const override { return "round_robin"; }
  Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                  Scratch& s) override {
    const size_t n = collect_candidates(req, fleet, s);
    if (n == 0) return none();
    const uint64_t turn = next_.fetch_add(1, std::memory_order_relaxed);
    return chose(s.candidates[turn % n], Branch::kRoundRobin);
  }

 private:
  std::atomic<uint64_t> next_{0};
};

class PowerOfTwoPolicy final : public Policy {
 public:
  std::string_view name() const override { return "power_of_two"; }
  Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                  Scratch& s) override {
    const size_t n = collect_candidates(req, fleet, s);
    if (n == 0) return none();
    if (n == 1) return chose(s.candidates[0], Branch::kPowerOfTwo);
    std::uniform_int_distribution<size_t> d(0, n - 1);
    const size_t a = d(s.rng);
    size_t b = d(s.rng);
    while (b == a) b = d(s.rng);
    const auto& ca = s.candidates[a];
    const auto& cb = s.candidates[b];
    return chose(cb.load < ca.load ? cb : ca, Branch::kPowerOfTwo);
  }
};

class LeastLoadPolicy final : public Policy {
 public:
  std::string_view name() const override { return "least_load"; }
  Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                  Scratch& s) override {
    if (collect_candidates(req, fleet, s) == 0) return none();
    const int32_t i = pick_min(
        s.candidates, [](const Candidate&) { return true; },
        [](const Candidate& c) { return c.load; }, 0.0, s.rng);
    return chose(s.candidates[i], Branch::kLeastLoad);
  }
};

// Rendezvous (highest random weight) hashing: each key goes to the candidate with the highest
// hash(key, worker URL). Adding or removing a worker moves only the keys that worker wins or held,
// and there is no ring to rebuild. Requests without a key are spread uniformly.
class ConsistentHashPolicy final : public Policy {
 public:
  std::string_view name() const override { return "consistent_hashing"; }
  Decision select(const RouteRequest& req, const workers::FleetSnapshot& fleet,
                  Scratch& s) override {
    const size_t n = collect_candidates(req, fleet, s);
    if (n == 0) return none();
    if (req.routing_key.empty()) {
      const size_t pick = std::uniform_int_distribution<size_t>(0, n - 1)(s.rng);
      return chose(s.candidates[pick], Branch::kRandom);
    }
    const uint64_t key = XXH3_64bits(req.routing_key.data(), req.routing_key.size());
    const Candidate* best = nullptr;
    uint64_t best_score = 0;
    for (const auto& c : s.candidates) {
      // A rank scores as its worker's URL salted with the rank, so a key keeps its rank too.
      const auto& url = fleet.workers[c.index]->url();
      uint64_t score = XXH3_64bits_withSeed(url.data(), url.size(), key);
      if (c.rank >= 0) {
        const int32_t rank = c.rank;  // 32 bits: the score is stable across builds and replicas
        score = XXH3_64bits_withSeed(&rank, sizeof rank, score);
      }
      if (best == nullptr || score > best_score) {
        best = &c;
        best_score = score;
      }
    }
    return chose(*best, Branch::kConsistentHash);
  }
};

}  // namespace

std::unique_ptr<Policy> make_random() { return std::make_unique<RandomPolicy>(); }
std::unique_ptr<Policy> make_round_robin() { return std::make_unique<RoundRobinPolicy>(); }
std::unique_ptr<Policy> make_power_of_two() { return std::make_unique<PowerOfTwoPolicy>(); }
std::unique_ptr<Policy> make_least_load() { return std::make_unique<LeastLoadPolicy>(); }
std::unique_ptr<Policy> make_consistent_hashing() {
  return std::make_unique<ConsistentHashPolicy>();
}

}  // namespace kvgate::policy::detail
