// StateSync: gateway replicas share their fleet through Redis, off the request path.
//
// Every period (±10% jitter) the sync thread pulls what the namespace holds (SCAN + MGET), hands
// it to the host (the gateway) to apply, asks the host what this replica publishes now, and
// pushes only what changed since its last push, or what would expire before the next refresh
// (SET ... PX ttl, one pipeline). Keys and values: shared_state.h.
//
// When Redis fails (unreachable, timing out, refusing), the replica keeps routing on its own
// state: the failure is counted by operation and logged once per change of state. While it is
// failing, a PING probes Redis every period (a connection and one round trip, nothing pulled or
// written): once Redis answers after it had gone away, the next cycle runs at once, so a replica
// is whole again within about a period of Redis's return. A failure with Redis answering (an
// error reply, a refused write) waits out an exponential backoff from one period up to
// max_backoff before the next cycle. Once Redis has been unreachable longer than the TTL the host
// forgets its peers' entries (they would have expired there too). When it is back, the next
// cycle pulls and pushes everything again.
//
// Convergence, a figure for operators: the fraction of entries on which this replica agrees with
// Redis at each pull, counting (a) the fleet's workers (registered here and live in Redis, by URL)
// and (b) the load records (a peer's record applied here and still in Redis; this replica's own
// record in Redis as last pushed). 1.0 when replicas agree; a replica whose pushes are lost,
// whose adds are refused, or that misses peers reads lower. 0 while Redis is unreachable.
//
// Threading: start() and stop() from one control thread; stats() from any thread; the host's
// methods are called on the sync thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "kvgate/core/clock.h"
#include "kvgate/core/result.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/sync/redis_client.h"
#include "kvgate/sync/redis_url.h"
#include "kvgate/sync/shared_state.h"

namespace kvgate::sync {

struct SyncConfig {
  RedisTarget redis;
  std::string ns = "kvgate";  // [A-Za-z0-9_.-]+ (validate_namespace)
  std::string replica_id;     // unique per gateway process
  std::chrono::milliseconds period{1000};
  std::chrono::milliseconds ttl{3000};  // of every entry but tombstones
  // Tombstones outlive the entries they shadow by far (max(10 x ttl, 10 min)).
  std::chrono::milliseconds tombstone_ttl() const {
    return std::max(ttl * 10, std::chrono::milliseconds(600'000));
  }
  std::chrono::milliseconds timeout{1000};  // each connect, read and write
  std::chrono::milliseconds max_backoff{60'000};
  double jitter = 0.1;
  uint32_t scan_count = 1000;        // SCAN's COUNT hint
  size_t max_value_bytes = 1 << 20;  // a larger value is refused, pulled or pushed
};

// True for a namespace of 1-64 characters out of [A-Za-z0-9_.-].
bool validate_namespace(std::string_view ns);

class SyncHost {
 public:
  virtual ~SyncHost() = default;
  // What this replica publishes now (`out` arrives cleared): the workers it has registered, the
  // tombstones of those it removed (for tombstone_ttl), its own load and hints (one each, with
  // its replica id).
  virtual void local_state(SharedState& out) = 0;
  // What Redis holds for the namespace, this replica's own entries included.
  virtual void apply(const SharedState& fleet) = 0;
  // Redis has been unreachable for longer than the TTL: drop the peers' load and hints.
  virtual void forget_peers() = 0;
  // Journals of what this replica predicted since the last call (each written once, with the
  // TTL; lost if that push fails: predictions are guesses that peers can do without).
  virtual void take_predictions(std::vector<PredictionJournal>& out) = 0;
};

enum class SyncOp : uint8_t { kConnect, kPull, kPush, kProbe, kCount };
const char* sync_op_name(SyncOp op);

struct SyncStats {
  bool redis_up = false;
  bool cluster = false;
  std::string node;  // host:port of the node in use
  uint64_t cycles = 0;
  uint64_t keys_pulled = 0;
  uint64_t keys_pushed = 0;      // written (changed or due for refresh)
  uint64_t keys_unchanged = 0;   // not written: unchanged and not due
  uint64_t journals_pushed = 0;  // prediction journals written
  uint64_t outages = 0;          // times Redis went from reachable (or never tried) to failing
  std::array<uint64_t, static_cast<size_t>(SyncOp::kCount)> errors{};
  std::array<uint64_t, static_cast<size_t>(BadValue::kCount)> bad_values{};
  uint32_t peers = 0;                    // other replicas with a load record
  double lag_seconds = 0;                // age of the oldest peer record applied at the last pull
  double convergence = 0;                // see the header
  std::chrono::milliseconds backoff{0};  // the wait before the next attempt while failing
};

class StateSync {
 public:
  StateSync(SyncConfig config, SyncHost& host, const Clock& clock = Clock::real());
  ~StateSync();
  StateSync(const StateSync&) = delete;
  StateSync& operator=(const StateSync&) = delete;

  void start();
  void stop();  // idempotent; the sync thread ends within one Redis timeout
  // Runs the next cycle now instead of at the period's end (an operator's change to share at
  // once: peers then see it within their own period). Not while backing off from failures.
  void sync_soon();
  SyncStats stats() const;

  // One pull-apply-push cycle on the caller's thread (tests; not while started). OK, or the
  // failure that ended it.
  Status run_once();

  const SyncConfig& config() const { return config_; }

 private:
  void loop();
  Status pull(SharedState& fleet);
  Status push(const SharedState& local);
  void measure(const SharedState& fleet, const SharedState& local, int64_t now_ms);
  void on_failure(SyncOp op, const Status& why);
  void on_success();
  // Redis has been away longer than the TTL: the peers' entries would have expired there too.
  void forget_peers_when_expired();
  // The wait before the next probe or cycle: a period, jittered.
  std::chrono::milliseconds next_wait();
  // Waits `wait` (or until stop() or, when not failing, sync_soon()); false on stop.
  bool pause(std::chrono::milliseconds wait);
  // While failing: whether the next cycle should run now (Redis answers a PING, and it had gone
  // away since the last failure or the backoff has passed).
  bool probe();

  const SyncConfig config_;
  SyncHost& host_;
  const Clock& clock_;
  RedisClient redis_;  // sync thread only
  // Sync thread only: what was last written per key (value, when), and the peers' load records
  // applied at the last pull.
  struct Pushed {
    std::string value;
    MonoTime at;
  };
  absl::flat_hash_map<std::string, Pushed> pushed_;
  absl::flat_hash_set<std::string> peers_applied_;
  int64_t own_load_at_ms_ = -1;
  uint32_t failures_ = 0;
  MonoTime retry_after_{};  // a cycle's failure's backoff ends
  bool went_away_ = false;  // a probe failed since the last failed cycle
  MonoTime last_success_{};
  bool peers_forgotten_ = false;

  mutable Mutex mu_;
  CondVar wake_;
  bool stop_ KVGATE_GUARDED_BY(mu_) = false;
  bool soon_ KVGATE_GUARDED_BY(mu_) = false;
  SyncStats stats_ KVGATE_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace kvgate::sync
