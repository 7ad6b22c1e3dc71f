// Tenants: who a client key belongs to, its priority class, the models it may use, and its rate
// limits (--api-keys-file).
//
// The keys file (YAML):
//   keys:
//     - key: sk-team-a-1           # or key_sha256: <64 hex digits>, so the file need not hold it
//       tenant: team-a
//       priority: standard         # critical | standard | sheddable (default standard)
//       rpm: 600                   # requests per minute; absent: no limit
//       tpm: 200000                # tokens per minute (prompt + output); absent: no limit
//       models: [qwen3-8b]         # absent: every model
// A key is found by its SHA-256 (what the file holds or what is computed from it), then compared
// in constant time; keys are never logged.
//
// Rate limits are token buckets of a minute's worth, refilled continuously: a request takes one
// request and its prompt tokens when it is admitted (refused with 429 when either bucket holds
// less), and its output tokens when it ends (the bucket may go below zero: the next requests wait
// until it refills). Each key has its own buckets, kept across reloads while its limit stays.
// Replicas sharing state through Redis each enforce a share of every limit (limit_shares.h).
//
// Threading: a KeyTable is immutable once loaded; its Limits are shared by every thread (each
// bucket under its own lock, held for a few arithmetic operations).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/result.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/metrics/metrics.h"

namespace kvgate::app {

// A request's class: what is refused first when the fleet saturates, and served first otherwise.
enum class Priority : uint8_t { kCritical = 0, kStandard = 1, kSheddable = 2 };
const char* priority_name(Priority p);
// "critical", "standard", "sheddable" (or 0, 1, 2); nullopt for anything else.
std::optional<Priority> parse_priority(std::string_view s);

// A minute's allowance, refilled continuously.
class TokenBucket {
 public:
  explicit TokenBucket(uint64_t per_minute) : per_minute_(per_minute), level_(per_minute) {}
  uint64_t per_minute() const { return per_minute_; }
  // Takes `n` when the bucket holds at least `n` now; else takes nothing and says how long until
  // it would.
  struct Take {
    bool ok = false;
    double remaining = 0;               // after the take (or now, when refused)
    std::chrono::milliseconds wait{0};  // until `n` fit (refused), or until full again (taken)
    // `remaining` over the share: what the whole limit has left if the other replicas' shares
    // are as full as this one's (what x-ratelimit-remaining-* tells a client of the key).
    double limit_remaining = 0;
  };
  Take take(uint64_t n, std::chrono::steady_clock::time_point now);
  // Takes `n` whatever the level (output tokens counted when a request ends; a negative `n`
  // gives back).
  void charge(int64_t n, std::chrono::steady_clock::time_point now);

  // The fraction of the limit this replica enforces (limit_shares.h; 1 alone): its capacity and
  // refill rate are the limit's times the share. A lower share cuts the level to the new capacity.
  void set_share(double share, std::chrono::steady_clock::time_point now);
  double share() const;
  // What was asked of the bucket (taken, refused, charged) since the last call.
  double take_demand();

 private:
  void refill(std::chrono::steady_clock::time_point now) KVGATE_REQUIRES(mu_);
  double capacity() const KVGATE_REQUIRES(mu_) { return static_cast<double>(per_minute_) * share_; }
  const uint64_t per_minute_;
  mutable Mutex mu_;
  double level_ KVGATE_GUARDED_BY(mu_);
  double share_ KVGATE_GUARDED_BY(mu_) = 1.0;
  double demand_ KVGATE_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point at_ KVGATE_GUARDED_BY(mu_){};
};

// kvgate_tenant_*{tenant}: what each tenant asked and was refused, shared by its keys. Tenants
// come from the operator's file, and past --tenant-series-limit they share the "other" series.
// Updated per request without sharding (a sharded counter per tenant and series would cost a
// cache line per CPU each); only one tenant's requests share a series.
struct TenantSeries {
  std::string tenant;                           // the series' label: the tenant, or "other"
  std::array<metrics::Counter*, 3> requests{};  // by Priority
  metrics::Counter* prompt_tokens = nullptr;
  metrics::Counter* output_tokens = nullptr;
  metrics::Counter* rate_limited = nullptr;
};
class TenantMetrics {
 public:
  TenantMetrics(metrics::Registry& registry, size_t max_tenants);
  // The tenant's series, made on first use (control path: a keys file's load).
  std::shared_ptr<const TenantSeries> series_of(const std::string& tenant);

  // Every series' counts now (the dashboard), most requests first.
  struct Totals {
    std::string tenant;
    std::array<double, 3> requests{};  // by Priority
    double prompt_tokens = 0, output_tokens = 0, rate_limited = 0;
  };
  std::vector<Totals> totals() const;

 private:
  metrics::Family<metrics::Counter>& requests_;
  metrics::Family<metrics::Counter>& tokens_;
  metrics::Family<metrics::Counter>& refused_;
  const size_t max_tenants_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const TenantSeries>> by_tenant_
      KVGATE_GUARDED_BY(mu_);
};

struct KeyEntry {
  std::array<uint8_t, 32> key_sha256{};
  std::string tenant;
  Priority priority = Priority::kStandard;
  std::vector<std::string> models;             // empty: every model
  std::shared_ptr<TokenBucket> requests;       // rpm; null: no limit
  std::shared_ptr<TokenBucket> tokens;         // tpm; null: no limit
  std::shared_ptr<const TenantSeries> series;  // null: not counted
  // What its limits go by between replicas (limit_id(); limit_shares.h), set at load.
  std::string limit_id;
  bool may_use(std::string_view model) const;
};

class KeyTable {
 public:
  // The file's keys; an error names the file and the entry (by its index and tenant, never its
  // key). A key `previous` held with the same limit keeps its buckets (a reload resets no one).
  // `metrics`: where each tenant's series are (null: none).
  static Result<std::shared_ptr<const KeyTable>> load(const std::string& path,
                                                      const KeyTable* previous = nullptr,
                                                      TenantMetrics* metrics = nullptr);
  // The entry of `key` (constant time over the key's bytes once its hash matches), or null.
  const KeyEntry* find(std::string_view key) const;
  size_t size() const { return entries_.size(); }
  const std::vector<std::unique_ptr<KeyEntry>>& entries() const { return entries_; }

 private:
  std::vector<std::unique_ptr<KeyEntry>> entries_;
  absl::flat_hash_map<std::array<uint8_t, 32>, const KeyEntry*> by_hash_;
};

std::array<uint8_t, 32> sha256_of(std::string_view bytes);

// The id a key's limits go by in Redis: 16 hex digits of a hash of the key's SHA-256 (never the
// key itself).
std::string limit_id(const KeyEntry& key);

}  // namespace kvgate::app
