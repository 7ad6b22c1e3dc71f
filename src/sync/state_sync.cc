#include "kvgate/sync/state_sync.h"

#include <algorithm>
#include <random>

#include "kvgate/core/log.h"

namespace kvgate::sync {
namespace {

constexpr size_t kMgetChunk = 512;

std::shared_ptr<spdlog::logger> logger() {
  static auto l = log::get("sync");
  return l;
}

// Which key of the namespace each of this replica's entries goes to, and its TTL.
template <class F>
void for_each_entry(const SyncConfig& c, const SharedState& s, F&& f) {
  for (const auto& w : s.workers) f(entry_key(c.ns, EntryKind::kWorker, w.url), encode(w), c.ttl);
  for (const auto& t : s.tombstones)
    f(entry_key(c.ns, EntryKind::kTombstone, t.url), encode(t), c.tombstone_ttl());
  for (const auto& l : s.loads) f(entry_key(c.ns, EntryKind::kLoad, l.replica), encode(l), c.ttl);
  for (const auto& h : s.hints) f(entry_key(c.ns, EntryKind::kHints, h.replica), encode(h), c.ttl);
  for (const auto& l : s.limits)
    f(entry_key(c.ns, EntryKind::kLimits, l.replica), encode(l), c.ttl);
}

}  // namespace

bool validate_namespace(std::string_view ns) {
  if (ns.empty() || ns.size() > 64) return false;
  return std::all_of(ns.begin(), ns.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
  });
}

const char* sync_op_name(SyncOp op) {
  switch (op) {
    case SyncOp::kConnect:
      return "connect";
    case SyncOp::kPull:
      return "pull";
    case SyncOp::kPush:
      return "push";
    case SyncOp::kProbe:
      return "probe";
    case SyncOp::kCount:
      break;
  }
  return "?";
}

StateSync::StateSync(SyncConfig config, SyncHost& host, const Clock& clock)
    : config_(std::move(config)),
      host_(host),
      clock_(clock),
      redis_(config_.redis, config_.timeout) {
  last_success_ = clock_.now();
}

StateSync::~StateSync() { stop(); }

void StateSync::start() {
  logger()->info("state sync: replica {} shares namespace '{}' through {} every {} ms (TTL {} ms)",
                 config_.replica_id, config_.ns, config_.redis.redacted(), config_.period.count(),
                 config_.ttl.count());
  thread_ = std::thread([this] { loop(); });
}

void StateSync::stop() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StateSync::sync_soon() {
  {
    MutexLock l(&mu_);
    soon_ = true;
  }
  wake_.notify_all();
}

SyncStats StateSync::stats() const {
  MutexLock l(&mu_);
  return stats_;
}

void StateSync::loop() {
  for (;;) {
    (void)run_once();
    do {
      if (!pause(next_wait())) return;
    } while (failures_ > 0 && !probe());
  }
}

bool StateSync::pause(std::chrono::milliseconds wait) {
  const bool failing = failures_ > 0;
  MutexLock l(&mu_);
  const auto until = std::chrono::steady_clock::now() + wait;
  while (!stop_ && !(soon_ && !failing) && std::chrono::steady_clock::now() < until)
    wake_.wait_for(&mu_, until - std::chrono::steady_clock::now());
  soon_ = false;
  return !stop_;
}

bool StateSync::probe() {
  Status s = redis_.connect(key_prefix(config_.ns));
  if (s.ok()) {
    auto pong = redis_.command({"PING"});
    s = !pong.ok()         ? pong.status()
        : pong->is_error() ? absl::UnavailableError("PING: " + pong->str)
                           : Status();
  }
  if (!s.ok()) {
    redis_.disconnect();
    went_away_ = true;
    forget_peers_when_expired();
    MutexLock l(&mu_);
    ++stats_.errors[static_cast<size_t>(SyncOp::kProbe)];
    return false;
  }
  return went_away_ || clock_.now() >= retry_after_;
}

std::chrono::milliseconds StateSync::next_wait() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> spread(1.0 - config_.jitter, 1.0 + config_.jitter);
  return std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(config_.period.count()) * spread(rng)));
}

Status StateSync::run_once() {
  if (Status s = redis_.connect(key_prefix(config_.ns)); !s.ok()) {
    on_failure(SyncOp::kConnect, s);
    return s;
  }
  SharedState fleet;
  if (Status s = pull(fleet); !s.ok()) {
    on_failure(SyncOp::kPull, s);
    return s;
  }
  const int64_t now_ms = to_unix_ms(clock_.wall());
  // This replica as it stood at the pull is what agreed with Redis or not; what it publishes is
  // itself after applying the pull.
  SharedState local;
  host_.local_state(local);
  measure(fleet, local, now_ms);
  host_.apply(fleet);
  local = SharedState();
  host_.local_state(local);
  if (Status s = push(local); !s.ok()) {
    on_failure(SyncOp::kPush, s);
    return s;
  }
  on_success();
  return absl::OkStatus();
}

Status StateSync::pull(SharedState& fleet) {
  const std::string pattern = key_prefix(config_.ns) + "*";
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    auto r = redis_.command(
        {"SCAN", cursor, "MATCH", pattern, "COUNT", std::to_string(config_.scan_count)});
    if (!r.ok()) return r.status();
    if (r->is_error()) return absl::UnavailableError("SCAN: " + r->str);
    if (r->elements.size() != 2) return absl::UnavailableError("SCAN answered oddly");
    cursor = r->elements[0].str;
    for (auto& k : r->elements[1].elements) keys.push_back(std::move(k.str));
  } while (cursor != "0");
  // SCAN may return a key twice (a rehash during the scan).
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());

  std::array<uint64_t, static_cast<size_t>(BadValue::kCount)> bad{};
  for (size_t at = 0; at < keys.size(); at += kMgetChunk) {
    std::vector<std::string> mget = {"MGET"};
    const size_t end = std::min(keys.size(), at + kMgetChunk);
    mget.insert(mget.end(), keys.begin() + at, keys.begin() + end);
    auto r = redis_.command(std::move(mget));
    if (!r.ok()) return r.status();
    if (r->is_error()) return absl::UnavailableError("MGET: " + r->str);
    for (size_t i = 0; i < r->elements.size() && at + i < end; ++i) {
      const RedisReply& v = r->elements[i];
      if (v.type != RedisReply::Type::kString) continue;  // expired since the SCAN
      if (auto why =
              decode_entry(config_.ns, keys[at + i], v.str, config_.max_value_bytes, fleet)) {
        ++bad[static_cast<size_t>(*why)];
        KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 10'000,
                            "state sync: skipped key '{}' ({}); other such keys are counted in "
                            "kvgate_sync_bad_values_total",
                            keys[at + i].substr(0, 200), bad_value_name(*why));
      }
    }
  }
  MutexLock l(&mu_);
  stats_.keys_pulled += keys.size();
  for (size_t i = 0; i < bad.size(); ++i) stats_.bad_values[i] += bad[i];
  return absl::OkStatus();
}

Status StateSync::push(const SharedState& local) {
  const MonoTime now = clock_.now();
  // Refresh unchanged entries well before their TTL runs out: a third of it leaves two misses.
  const auto refresh = config_.ttl / 3;
  std::vector<std::vector<std::string>> commands;
  std::vector<std::pair<std::string, std::string>> written;  // remembered in pushed_ once sent
  absl::flat_hash_set<std::string> published;
  uint64_t unchanged = 0;
  bool too_large = false;
  const auto set = [&](const std::string& key, const std::string& value,
                       std::chrono::milliseconds ttl) {
    if (value.size() > config_.max_value_bytes) {
      too_large = true;
      KVGATE_LOG_EVERY_MS(logger(), spdlog::level::err, 10'000,
                          "state sync: not sharing '{}': {} bytes, over the {}-byte limit", key,
                          value.size(), config_.max_value_bytes);
      return false;
    }
    commands.push_back({"SET", key, value, "PX", std::to_string(ttl.count())});
    return true;
  };
  for_each_entry(
      config_, local, [&](std::string key, std::string value, std::chrono::milliseconds ttl) {
        published.insert(key);
        auto it = pushed_.find(key);
        if (it != pushed_.end() && it->second.value == value && now - it->second.at < refresh) {
          ++unchanged;
        } else if (set(key, value, ttl)) {
          written.emplace_back(std::move(key), std::move(value));
        }
      });
  for (const auto& l : local.loads) {
    if (l.replica == config_.replica_id) own_load_at_ms_ = l.at_ms;
  }
  // Journals are written once, never refreshed: they are not remembered in pushed_.
  std::vector<PredictionJournal> journals;
  host_.take_predictions(journals);
  for (const PredictionJournal& j : journals)
    set(entry_key(config_.ns, EntryKind::kPredictions, j.id()), encode(j), config_.ttl);
  if (!commands.empty()) {
    auto r = redis_.pipeline(commands);
    if (!r.ok()) return r.status();
    for (size_t i = 0; i < r->size(); ++i) {
      if ((*r)[i].is_error()) return absl::UnavailableError("SET: " + (*r)[i].str);
    }
  }
  for (auto& [key, value] : written) pushed_[key] = Pushed{std::move(value), now};
  // Keys no longer published are left to expire; forget what was written for them.
  absl::erase_if(pushed_, [&](const auto& kv) { return !published.contains(kv.first); });
  MutexLock l(&mu_);
  stats_.keys_pushed += written.size();
  stats_.journals_pushed += journals.size();
  stats_.keys_unchanged += unchanged;
  if (too_large) ++stats_.bad_values[static_cast<size_t>(BadValue::kTooLarge)];
  return absl::OkStatus();
}

void StateSync::measure(const SharedState& fleet, const SharedState& local, int64_t now_ms) {
  uint64_t agree = 0, total = 0;
  absl::flat_hash_set<std::string_view> here;
  for (const auto& w : local.workers) here.insert(w.url);
  absl::flat_hash_set<std::string_view> there;
  for (const WorkerRecord* w : live_workers(fleet)) there.insert(w->url);
  for (auto u : here) agree += there.contains(u) ? 1 : 0;
  total += here.size() + there.size() - agree;  // the union

  absl::flat_hash_set<std::string> peers_now;
  bool own_found = false;
  int64_t oldest_ms = now_ms;
  for (const auto& l : fleet.loads) {
    if (l.replica == config_.replica_id) {
      own_found = l.at_ms == own_load_at_ms_;
      continue;
    }
    peers_now.insert(l.replica);
    oldest_ms = std::min(oldest_ms, l.at_ms);
  }
  uint64_t peers_kept = 0;
  for (const auto& p : peers_now) peers_kept += peers_applied_.contains(p) ? 1 : 0;
  agree += peers_kept;
  total += peers_now.size() + peers_applied_.size() - peers_kept;
  if (own_load_at_ms_ >= 0) {
    agree += own_found ? 1 : 0;
    total += 1;
  }
  peers_applied_ = std::move(peers_now);

  MutexLock l(&mu_);
  stats_.peers = static_cast<uint32_t>(peers_applied_.size());
  stats_.lag_seconds = peers_applied_.empty() ? 0 : std::max<double>(0, (now_ms - oldest_ms) / 1e3);
  stats_.convergence = total == 0 ? 1.0 : static_cast<double>(agree) / static_cast<double>(total);
}

void StateSync::on_failure(SyncOp op, const Status& why) {
  redis_.disconnect();
  // Redis may come back empty (a restart without persistence, a failover): write everything then.
  pushed_.clear();
  const bool was_up = failures_ == 0;
  ++failures_;
  // The next cycle: at once when a probe finds Redis back after it went away, else after one
  // period doubling up to max_backoff.
  const uint32_t doublings = std::min<uint32_t>(failures_ - 1, 16);
  const auto backoff = std::min(config_.max_backoff, config_.period * (int64_t{1} << doublings));
  retry_after_ = clock_.now() + backoff;
  went_away_ = false;
  forget_peers_when_expired();
  {
    MutexLock l(&mu_);
    ++stats_.errors[static_cast<size_t>(op)];
    stats_.backoff = backoff;
    stats_.redis_up = false;
    stats_.convergence = 0;
    if (was_up) ++stats_.outages;
  }
  if (was_up) {
    logger()->warn(
        "state sync: Redis at {} failed ({}: {}); this replica routes on its own state, "
        "probes Redis every period and retries with backoff up to {:.1f} s",
        config_.redis.redacted(), sync_op_name(op), message_of(why),
        static_cast<double>(config_.max_backoff.count()) / 1000.0);
  }
}

void StateSync::forget_peers_when_expired() {
  if (peers_forgotten_ || clock_.now() - last_success_ <= config_.ttl) return;
  host_.forget_peers();
  peers_forgotten_ = true;
  peers_applied_.clear();
}

void StateSync::on_success() {
  const bool was_down = failures_ > 0 || stats().cycles == 0;
  failures_ = 0;
  last_success_ = clock_.now();
  peers_forgotten_ = false;
  MutexLock l(&mu_);
  ++stats_.cycles;
  stats_.redis_up = true;
  stats_.backoff = std::chrono::milliseconds(0);
  stats_.cluster = redis_.cluster();
  stats_.node = redis_.node();
  if (was_down) {
    logger()->info("state sync: sharing through Redis at {} ({}{})", config_.redis.redacted(),
                   redis_.cluster() ? "cluster, slot owner " : "standalone ", redis_.node());
  }
}

}  // namespace kvgate::sync
