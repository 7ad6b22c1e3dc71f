// LimitShares: the keys' rate limits (--api-keys-file) held across gateway replicas that share
// state through Redis (--state-sync-url), with no request ever waiting on Redis.
//
// Each replica enforces a share of every limit in its own buckets (tenants.h). Every sync period
// it publishes how much each limited key asked of it lately (requests and tokens per second,
// admitted or refused, averaged over about five seconds), reads what the other replicas published,
// and sets its shares so that the replicas' shares of a limit sum to one: max-min fair over the
// replicas' demands (a replica that asks less than an even split gets what it asks; the rest split
// what is left), after a small reserve spread evenly, so a replica whose clients arrive later is
// not at zero until the next period. Capacity nobody asks for is spread evenly too.
//
// When Redis has been unreachable longer than the entries' TTL, each replica enforces limit / N,
// N the replicas it last saw publishing; before a replica has ever heard from Redis it enforces
// the whole limit (it cannot know of peers). A key's id in Redis is a hash of the key's SHA-256
// (never the key; KeyEntry::limit_id, made at load).
//
// Threading: publish(), apply() and forget_peers() on the state-sync thread only (FleetSync's
// calls); replicas() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "app/tenants.h"
#include "kvgate/core/clock.h"
#include "kvgate/sync/shared_state.h"

namespace kvgate::app {

// This replica's fraction of a limit, given every replica's demand on it as a fraction of the
// limit (`demand[self]` its own; 0.5: half the limit's rate):
// `reserve` spread evenly first, the rest max-min fair over the demands, any remainder evenly.
// The fractions of all replicas sum to one. With no replica asking, 1 / demand.size().
double fair_share(const std::vector<double>& demand, size_t self, double reserve);

class LimitShares {
 public:
  // `keys`: the keys in force now (they change on reload; buckets carry over).
  using KeysNow = std::function<std::shared_ptr<const KeyTable>()>;
  LimitShares(std::string replica_id, KeysNow keys, const Clock& clock);

  // Adds this replica's demand on each limited key since the last call to `out`.
  void publish(sync::SharedState& out);
  // Sets each limited key's shares from the demands every replica published (this one's included).
  void apply(const sync::SharedState& fleet);
  // Redis has been away past the TTL: every share becomes 1 / the replicas last seen.
  void forget_peers();

  // Replicas that published limits at the last pull, this one included (1 before any).
  uint32_t replicas() const { return replicas_.load(std::memory_order_relaxed); }

  // Of each limit, kept for every replica evenly before the demands are shared out.
  static constexpr double kReserve = 0.02;
  // The time constant of each replica's measured demand (an exponential moving average).
  static constexpr std::chrono::duration<double> kDemandSmoothing{5.0};

 private:
  struct Demand {
    double requests = 0, tokens = 0;  // per second, smoothed
  };
  const std::string replica_id_;
  const KeysNow keys_;
  const Clock& clock_;
  MonoTime last_publish_{};
  // Per limit id: this replica's smoothed demand (sync thread only).
  absl::flat_hash_map<std::string, Demand> own_;
  std::atomic<uint32_t> replicas_{1};
};

}  // namespace kvgate::app
