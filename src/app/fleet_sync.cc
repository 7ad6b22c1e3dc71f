#include "app/fleet_sync.h"

#include <algorithm>
#include <tuple>

#include "kvgate/core/log.h"

namespace kvgate::app {
namespace {

std::shared_ptr<spdlog::logger> logger() {
  static auto l = log::get("sync");
  return l;
}

struct PeerLoad {
  int32_t in_flight = 0;
  uint64_t queued_prompt_tokens = 0;
  std::vector<std::pair<DpRank, int32_t>> ranks;
  int64_t progress_ms = 0;  // the latest any peer saw
};

// Progress a replica saw within this long is shared (several wedge windows).
constexpr std::chrono::seconds kProgressShared{30};

}  // namespace

FleetSync::FleetSync(std::string replica_id, WorkerControl& control,
                     workers::WorkerRegistry& registry, policy::Policy& policy, const Clock& clock,
                     std::chrono::milliseconds tombstone_ttl)
    : replica_id_(std::move(replica_id)),
      control_(control),
      registry_(registry),
      policy_(policy),
      clock_(clock),
      epoch_ms_(to_unix_ms(clock.wall())),
      tombstone_ttl_(tombstone_ttl) {}

int64_t FleetSync::now_ms() const { return to_unix_ms(clock_.wall()); }

void FleetSync::added(std::string_view url, const std::vector<workers::KvEndpoint>& kv_endpoints,
                      const WorkerSpec& spec) {
  auto normalized = workers::WorkerRegistry::normalize_url(url);
  if (!normalized.ok()) return;
  MutexLock l(&mu_);
  tombstones_.erase(*normalized);
  records_[*normalized] = sync::WorkerRecord{.url = *normalized,
                                             .kv_endpoints = kv_endpoints,
                                             .added_by = replica_id_,
                                             .added_at_ms = now_ms(),
                                             .role = spec.role,
                                             .bootstrap_port = spec.bootstrap_port};
}

void FleetSync::removed(std::string_view url) {
  auto normalized = workers::WorkerRegistry::normalize_url(url);
  if (!normalized.ok()) return;
  MutexLock l(&mu_);
  records_.erase(*normalized);
  tombstones_[*normalized] =
      sync::Tombstone{.url = *normalized, .removed_by = replica_id_, .removed_at_ms = now_ms()};
}

void FleetSync::local_state(sync::SharedState& out) {
  const auto fleet = registry_.snapshot();
  const int64_t now = now_ms();
  const MonoTime mono = clock_.now();
  sync::ReplicaLoad load{.replica = replica_id_, .at_ms = now};
  sync::ReplicaHints hints{.replica = replica_id_, .at_ms = now};
  MutexLock l(&mu_);
  for (size_t i = 0; i < fleet->workers.size(); ++i) {
    const workers::Worker& w = *fleet->workers[i];
    const workers::WorkerInfo& info = *fleet->infos[i];
    // (A pod's worker is not shared: every replica watches the pods itself.)
    if (info.source != workers::WorkerSource::kKubernetes) {
      auto [it, fresh] = records_.try_emplace(w.url());
      if (fresh) {
        // Registered by a path that did not say (none should): this replica adds it now.
        it->second = sync::WorkerRecord{.url = w.url(),
                                        .added_by = replica_id_,
                                        .added_at_ms = now,
                                        .role = info.role,
                                        .bootstrap_port = info.bootstrap_port};
      }
      out.workers.push_back(it->second);
    }
    sync::WorkerInflight wl{.url = w.url(),
                            .in_flight = std::max(0, w.in_flight()),
                            .queued_prompt_tokens = w.queued_prompt_tokens()};
    // Progress seen lately, in wall time: a peer whose own streams there wait is not misled.
    if (const auto seen = w.liveness().last_progress(); seen && mono - *seen < kProgressShared) {
      wl.progress_ms =
          now - std::chrono::duration_cast<std::chrono::milliseconds>(mono - *seen).count();
    }
    const uint32_t dp = info.dp_size;
    for (uint32_t r = 0; dp > 1 && r < dp && r < workers::kMaxDpRanks; ++r) {
      if (const int32_t n = w.in_flight(r); n > 0) wl.ranks.emplace_back(r, n);
    }
    if (wl.in_flight > 0 || wl.queued_prompt_tokens > 0 || wl.progress_ms > 0)
      load.workers.push_back(std::move(wl));
    const bool unhealthy = w.health().state() == workers::Health::kUnhealthy;
    const bool open = w.breaker().state() == workers::BreakerState::kOpen;
    if (unhealthy || open)
      hints.workers.push_back({.url = w.url(), .unhealthy = unhealthy, .breaker_open = open});
  }
  const int64_t ttl_ms = tombstone_ttl_.count();
  absl::erase_if(tombstones_,
                 [&](const auto& kv) { return now - kv.second.removed_at_ms > ttl_ms; });
  for (const auto& [url, t] : tombstones_) out.tombstones.push_back(t);
  out.loads.push_back(std::move(load));
  out.hints.push_back(std::move(hints));
  if (limits_ != nullptr) limits_->publish(out);
}

void FleetSync::apply(const sync::SharedState& fleet) {
  // The fleet: workers to register here, and those of ours a newer tombstone removed.
  std::vector<const sync::WorkerRecord*> to_add;
  std::vector<std::string> to_remove;
  {
    MutexLock l(&mu_);
    for (const sync::WorkerRecord* r : sync::live_workers(fleet)) {
      if (records_.contains(r->url)) continue;
      auto t = tombstones_.find(r->url);
      if (t != tombstones_.end() && sync::removes(t->second, *r)) continue;
      to_add.push_back(r);
    }
    for (const sync::Tombstone& t : fleet.tombstones) {
      auto it = records_.find(t.url);
      if (it != records_.end() && sync::removes(t, it->second)) {
        to_remove.push_back(t.url);
        records_.erase(it);
      }
    }
  }
  // (WorkerControl's add and remove may block on a host name; no lock of ours is held.)
  for (const sync::WorkerRecord* r : to_add) {
    if (registry_.find(r->url) != nullptr) {
      MutexLock l(&mu_);
      records_[r->url] = *r;
      continue;
    }
    const Status s = control_.add(r->url, r->kv_endpoints, {},
                                  {.role = r->role,
                                   .bootstrap_port = r->bootstrap_port,
                                   .source = workers::WorkerSource::kPeer});
    MutexLock l(&mu_);
    if (s.ok() || absl::IsAlreadyExists(s)) {
      records_[r->url] = *r;
      ++stats_.workers_added;
      logger()->info("state sync: worker {} added (by replica {})", r->url, r->added_by);
    } else {
      ++stats_.adds_refused;
      KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 10'000,
                          "state sync: worker {} (added by replica {}) not registered here: {}",
                          r->url, r->added_by, message_of(s));
    }
  }
  for (const std::string& url : to_remove) {
    if (control_.remove(url)) {
      MutexLock l(&mu_);
      ++stats_.workers_removed;
      logger()->info("state sync: worker {} removed (a peer replica removed it)", url);
    }
  }

  // Peers' load, summed per worker.
  absl::flat_hash_map<std::string_view, PeerLoad> peers;
  for (const sync::ReplicaLoad& rl : fleet.loads) {
    if (rl.replica == replica_id_) continue;
    for (const sync::WorkerInflight& wl : rl.workers) {
      PeerLoad& p = peers[wl.url];
      p.in_flight += wl.in_flight;
      p.queued_prompt_tokens += wl.queued_prompt_tokens;
      p.ranks.insert(p.ranks.end(), wl.ranks.begin(), wl.ranks.end());
      p.progress_ms = std::max(p.progress_ms, wl.progress_ms);
    }
  }
  const int64_t now = now_ms();
  const MonoTime mono = clock_.now();
  const auto snapshot = registry_.snapshot();
  for (const auto& w : snapshot->workers) {
    auto it = peers.find(w->url());
    if (it == peers.end()) {
      w->set_peer_load(0, {}, 0);
    } else {
      w->set_peer_load(it->second.in_flight, it->second.ranks, it->second.queued_prompt_tokens);
      if (const int64_t p = it->second.progress_ms; p > 0 && p <= now)
        w->liveness().note_peer_progress(mono - std::chrono::milliseconds(now - p));
    }
  }

  // Peers' prediction journals not applied yet, oldest first.
  std::vector<const sync::PredictionJournal*> journals;
  for (const sync::PredictionJournal& j : fleet.predictions) {
    if (j.replica != replica_id_) journals.push_back(&j);
  }
  std::sort(journals.begin(), journals.end(), [](const auto* x, const auto* y) {
    return std::tie(x->replica, x->epoch_ms, x->seq) < std::tie(y->replica, y->epoch_ms, y->seq);
  });
  uint64_t predicted = 0;
  for (const sync::PredictionJournal* j : journals) {
    auto [it, fresh] = journals_applied_.try_emplace(j->replica, j->epoch_ms, 0);
    if (it->second.first != j->epoch_ms) it->second = {j->epoch_ms, 0};  // the peer restarted
    if (j->seq <= it->second.second) continue;
    it->second.second = j->seq;
    for (const auto& [url, blocks] : j->workers) {
      const workers::Worker* w = snapshot->find(url);
      if (w == nullptr) continue;
      policy_.add_predictions(w->id(), blocks);
      predicted += blocks.size();
    }
  }

  // Peers' failure hints about workers this replica still finds healthy: probe them now.
  uint64_t hinted = 0;
  for (const sync::ReplicaHints& rh : fleet.hints) {
    if (rh.replica == replica_id_) continue;
    for (const sync::HealthHint& h : rh.workers) {
      const workers::Worker* w = snapshot->find(h.url);
      if (w == nullptr || !w->routable()) continue;
      hinted += control_.probe_soon(h.url) ? 1 : 0;
    }
  }
  if (limits_ != nullptr) limits_->apply(fleet);
  MutexLock l(&mu_);
  stats_.probes_hinted += hinted;
  stats_.predicted_blocks_applied += predicted;
}

void FleetSync::take_predictions(std::vector<sync::PredictionJournal>& out) {
  // Journals of at most this many blocks (about 20 bytes each), well under the value limit.
  constexpr size_t kJournalBlocks = 16384;
  std::vector<policy::PredictedBlocks> taken;
  policy_.take_predictions(taken);
  if (taken.empty()) return;
  sync::PredictionJournal j{.replica = replica_id_, .epoch_ms = epoch_ms_};
  size_t blocks = 0;
  const auto flush = [&] {
    if (j.workers.empty()) return;
    j.seq = next_seq_++;
    out.push_back(std::move(j));
    j = sync::PredictionJournal{.replica = replica_id_, .epoch_ms = epoch_ms_};
    blocks = 0;
  };
  for (policy::PredictedBlocks& p : taken) {
    const auto w = registry_.find(p.worker);
    if (w == nullptr) continue;  // removed since
    for (size_t at = 0; at < p.blocks.size(); at += kJournalBlocks) {
      const size_t end = std::min(p.blocks.size(), at + kJournalBlocks);
      if (blocks + (end - at) > kJournalBlocks) flush();
      j.workers.emplace_back(w->url(),
                             std::vector<SeqHash>(p.blocks.begin() + at, p.blocks.begin() + end));
      blocks += end - at;
    }
  }
  flush();
}

void FleetSync::forget_peers() {
  const auto snapshot = registry_.snapshot();
  for (const auto& w : snapshot->workers) w->set_peer_load(0, {}, 0);
  if (limits_ != nullptr) limits_->forget_peers();
  logger()->warn("state sync: peers' load forgotten (Redis unreachable past the TTL)");
}

FleetSyncStats FleetSync::stats() const {
  MutexLock l(&mu_);
  FleetSyncStats out = stats_;
  if (limits_ != nullptr) out.limit_replicas = limits_->replicas();
  return out;
}

}  // namespace kvgate::app
