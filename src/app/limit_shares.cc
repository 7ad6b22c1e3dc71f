#include "app/limit_shares.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/container/flat_hash_set.h"

namespace kvgate::app {

double fair_share(const std::vector<double>& demand, size_t self, double reserve) {
  const size_t n = demand.size();
  if (n == 0 || self >= n) return 1.0;
  double asked = 0;
  for (double d : demand) asked += std::max(0.0, d);
  if (asked <= 0) return 1.0 / static_cast<double>(n);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return demand[a] < demand[b]; });
  // Water-filling: the smallest demand first, each given at most an even split of what is left.
  double left = 1.0 - reserve;
  double mine = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = order[k];
    const double given = std::min(std::max(0.0, demand[i]), left / static_cast<double>(n - k));
    if (i == self) mine = given;
    left -= given;
  }
  return reserve / static_cast<double>(n) + mine + left / static_cast<double>(n);
}

LimitShares::LimitShares(std::string replica_id, KeysNow keys, const Clock& clock)
    : replica_id_(std::move(replica_id)), keys_(std::move(keys)), clock_(clock) {}

void LimitShares::publish(sync::SharedState& out) {
  const std::shared_ptr<const KeyTable> keys = keys_();
  const MonoTime now = clock_.now();
  const double seconds = last_publish_ == MonoTime{}
                             ? 0.0
                             : std::chrono::duration<double>(now - last_publish_).count();
  last_publish_ = now;
  sync::ReplicaLimits mine{.replica = replica_id_, .at_ms = to_unix_ms(clock_.wall())};
  absl::flat_hash_map<std::string, Demand> kept;
  static const std::vector<std::unique_ptr<KeyEntry>> kNoKeys;
  for (const auto& e : keys ? keys->entries() : kNoKeys) {
    if (!e->requests && !e->tokens) continue;
    const std::string& id = e->limit_id;
    const double asked_requests = e->requests ? e->requests->take_demand() : 0;
    const double asked_tokens = e->tokens ? e->tokens->take_demand() : 0;
    Demand d = own_.contains(id) ? own_[id] : Demand{};
    if (seconds > 0) {
      // Smoothed over kDemandSmoothing: a period holds few requests (a prompt's tokens arrive at
      // once), and a noisy demand moves the shares, which no longer sum to one while the
      // replicas' views of each other differ by a period.
      const double keep = std::exp(-seconds / kDemandSmoothing.count());
      d.requests = keep * d.requests + (1 - keep) * asked_requests / seconds;
      d.tokens = keep * d.tokens + (1 - keep) * asked_tokens / seconds;
    }
    mine.keys.push_back({.id = id, .requests = d.requests, .tokens = d.tokens});
    kept.emplace(id, d);
  }
  own_ = std::move(kept);
  out.limits.push_back(std::move(mine));
}

void LimitShares::apply(const sync::SharedState& fleet) {
  // Per limit id: the peers' demands (this replica's own come from own_, not from Redis).
  absl::flat_hash_map<std::string_view, std::vector<const sync::LimitDemand*>> peers;
  absl::flat_hash_set<std::string_view> replicas = {replica_id_};
  for (const sync::ReplicaLimits& r : fleet.limits) {
    if (r.replica == replica_id_) continue;
    replicas.insert(r.replica);
    for (const sync::LimitDemand& d : r.keys) peers[d.id].push_back(&d);
  }
  replicas_.store(static_cast<uint32_t>(replicas.size()), std::memory_order_relaxed);
  const std::shared_ptr<const KeyTable> keys = keys_();
  if (!keys) return;
  for (const auto& e : keys->entries()) {
    if (!e->requests && !e->tokens) continue;
    const std::string& id = e->limit_id;
    const auto own = own_.find(id);
    const Demand mine = own != own_.end() ? own->second : Demand{};
    // Demands as fractions of the limit (per second).
    const double rpm = e->requests ? static_cast<double>(e->requests->per_minute()) / 60 : 1;
    const double tpm = e->tokens ? static_cast<double>(e->tokens->per_minute()) / 60 : 1;
    std::vector<double> requests = {mine.requests / rpm}, tokens = {mine.tokens / tpm};
    if (auto it = peers.find(id); it != peers.end()) {
      for (const sync::LimitDemand* d : it->second) {
        requests.push_back(d->requests / rpm);
        tokens.push_back(d->tokens / tpm);
      }
    }
    const auto now = std::chrono::steady_clock::now();  // the buckets' clock (limit.cc)
    if (e->requests) e->requests->set_share(fair_share(requests, 0, kReserve), now);
    if (e->tokens) e->tokens->set_share(fair_share(tokens, 0, kReserve), now);
  }
}

void LimitShares::forget_peers() {
  const std::shared_ptr<const KeyTable> keys = keys_();
  if (!keys) return;
  const double share = 1.0 / static_cast<double>(std::max<uint32_t>(1, replicas()));
  const auto now = std::chrono::steady_clock::now();
  for (const auto& e : keys->entries()) {
    if (e->requests) e->requests->set_share(share, now);
    if (e->tokens) e->tokens->set_share(share, now);
  }
}

}  // namespace kvgate::app
