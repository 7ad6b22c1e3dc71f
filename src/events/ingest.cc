#include "kvgate/events/ingest.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <variant>

#include "kvgate/core/log.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/events/block_bound.h"
#include "kvgate/index/lane_pool.h"
#include "kvgate/metrics/lazy_series.h"

namespace kvgate::events {
namespace {

using metrics::Counter;
using metrics::Family;
using metrics::Gauge;
using metrics::Histogram;
using metrics::LazyCounter;
using metrics::PresenceGauge;

constexpr const char* kDispositions[] = {"applied", "duplicate", "replayed", "dropped",
                                         "quarantined"};
constexpr size_t kDispositionCount = std::size(kDispositions);

// The stats table: every family once, at construction.
struct Families {
  Family<Counter>& batches;
  Family<Counter>& dropped_events;
  Family<Counter>& gaps;
  Family<Counter>& replays;
  Family<Counter>& restarts;
  Family<Counter>& resyncs;
  Family<Counter>& bad_frames;
  Family<Counter>& lane_waits;
  Family<Gauge>& degraded;
  Family<Gauge>& degraded_ranks;
  Family<Gauge>& block_size;
  Family<Histogram>& apply_lag;
  Family<Gauge>& apply_lag_recent;
  Family<Gauge>& mismatch_ratio;
  Family<Counter>& hash_blocks;
  Family<Counter>& normalizer_notes;
  // Intake bounds.
  Family<Gauge>& holder_blocks;
  Family<Gauge>& block_limit;
  Family<Counter>& evicted_blocks;
  Family<Counter>& limit_episodes;
  Family<Counter>& limit_clears;
  Family<Gauge>& quarantined;
  Family<Counter>& quarantines;
  Family<Counter>& replays_deferred;
  Family<Counter>& turns_capped;
  Family<Counter>& disconnects;
  Family<Counter>& lag_ignored;
  Gauge& degraded_total;
  // One histogram for the fleet: per worker it was a series per bucket, most of a worker's series.
  Histogram& apply_lag_all;

  explicit Families(metrics::Registry& r)
      : batches(metrics::counter_family(
            r, "kvgate_events_batches_total",
            "KV-event batches per holder by disposition: applied (live, in order), replayed, "
            "duplicate, dropped (lost before the index), quarantined (admitted while the "
            "holder's engine hashes did not agree: not indexed).")),
        dropped_events(metrics::counter_family(
            r, "kvgate_events_dropped_events_total",
            "KV events (or whole payloads, for batch-level reasons) not used, by reason.")),
        gaps(metrics::counter_family(r, "kvgate_events_gaps_total",
                                     "Sequence gaps seen on a holder's live stream.")),
        replays(metrics::counter_family(
            r, "kvgate_events_replays_total",
            "Replay requests sent to a holder's replay socket (spaced by "
            "--kv-events-replay-interval-secs, backing off while they keep coming).")),
        restarts(metrics::counter_family(r, "kvgate_events_publisher_restarts_total",
                                         "Publisher restarts detected (seq going back).")),
        resyncs(metrics::counter_family(
            r, "kvgate_events_resyncs_total",
            "Holders cleared and rebuilt after a gap that could not be replayed, by reason.")),
        bad_frames(metrics::counter_family(r, "kvgate_events_bad_frames_total",
                                           "ZMQ messages that were not [topic, seq, payload].")),
        lane_waits(metrics::counter_family(
            r, "kvgate_events_lane_waits_total",
            "Admitted batches that waited for a busy lane (held in order, not lost): a replay "
            "arriving faster than the lanes apply, or lanes too few for the fleet.")),
        degraded(metrics::gauge_family(
            r, "kvgate_events_rank_degraded",
            "1 while a holder's index content is known incomplete (since a resync, until the "
            "engine clears or restarts); the series exists only then.")),
        degraded_ranks(metrics::gauge_family(r, "kvgate_events_degraded_ranks",
                                             "Holders currently degraded.")),
        block_size(metrics::gauge_family(r, "kvgate_events_block_size_tokens",
                                         "Block size learned from a holder's stored events.")),
        apply_lag(metrics::histogram_family(
            r, "kvgate_events_apply_lag_seconds",
            "Wall-clock time from a batch's publisher timestamp to its apply to the index, over "
            "every worker (timestamps off by more than --kv-events-lag-window-secs not counted; "
            "kvgate_events_apply_lag_recent_seconds says which worker lags).")),
        apply_lag_recent(metrics::gauge_family(
            r, "kvgate_events_apply_lag_recent_seconds",
            "Per worker: its batches' apply lag, an exponentially weighted mean over about its "
            "last 16 batches (0 before its first).")),
        mismatch_ratio(metrics::gauge_family(
            r, "kvgate_events_hash_mismatch_ratio",
            "Per worker: share of checked blocks whose engine hash the configured scheme does "
            "not reproduce (misconfigured algorithm, seed, block size or tokenizer).")),
        hash_blocks(metrics::counter_family(
            r, "kvgate_events_hash_checked_blocks_total",
            "Stored blocks by engine-hash check result: matched, mismatched, unchecked (each made "
            "at its first block).")),
        normalizer_notes(metrics::counter_family(
            r, "kvgate_events_normalizer_notes_total",
            "Normalization events worth a look, by note: block_size_change (a holder's stores "
            "changed block size), unknown_medium (counted as external), group_policy_clear (a "
            "full-attention KV-cache group appeared after window-group blocks were applied).")),
        holder_blocks(metrics::gauge_family(
            r, "kvgate_events_holder_blocks",
            "Block copies a holder's index holds (from what each apply did).")),
        block_limit(metrics::gauge_family(
            r, "kvgate_events_holder_block_limit",
            "The most block copies a holder's index may hold: its engine's KV pool times "
            "--kv-events-capacity-margin, or --kv-events-max-holder-blocks when unknown.")),
        evicted_blocks(metrics::counter_family(
            r, "kvgate_events_limit_evicted_blocks_total",
            "Block copies evicted, oldest first, to keep a holder within its limit (an engine "
            "that stores without publishing its removals, or a flood).")),
        limit_episodes(
            metrics::counter_family(r, "kvgate_events_limit_episodes_total",
                                    "Times a holder reached its block limit (each logged once).")),
        limit_clears(metrics::counter_family(
            r, "kvgate_events_limit_clears_total",
            "Times a holder over its limit had no remembered stores left to evict and was "
            "cleared instead.")),
        quarantined(metrics::gauge_family(
            r, "kvgate_events_hash_quarantined",
            "1 while a holder's engine hashes do not agree with its scheme (beyond "
            "--kv-events-hash-quarantine-ratio): emptied and not indexed; the series exists "
            "only then.")),
        quarantines(metrics::counter_family(r, "kvgate_events_hash_quarantines_total",
                                            "Times a holder was quarantined for its hashes.")),
        replays_deferred(metrics::counter_family(
            r, "kvgate_events_replays_deferred_total",
            "Replay requests held back a while by the pacer (replays asked for too often).")),
        turns_capped(metrics::counter_family(
            r, "kvgate_events_turns_capped_total",
            "Event-thread turns a holder ended with its budget spent and messages waiting: a "
            "publisher sending more than the thread serves it per turn.")),
        disconnects(metrics::counter_family(
            r, "kvgate_events_disconnects_total",
            "Connections to a holder's publisher that dropped and were made again: the engine "
            "went away, or sent a message over --kv-events-max-message-bytes.")),
        lag_ignored(metrics::counter_family(
            r, "kvgate_events_lag_ignored_total",
            "Per worker: batches whose publisher timestamp was further from the gateway's clock "
            "than --kv-events-lag-window-secs, not counted in the apply lag.")),
        degraded_total(degraded_ranks.Add({})),
        apply_lag_all(apply_lag.Add({}, metrics::latency_buckets_seconds())) {}
};

inline void add_to(Counter* c, uint64_t n) { c->Increment(static_cast<double>(n)); }
inline void add_to(LazyCounter& c, uint64_t n) { c.add(n); }

// A worker's series (shared by its ranks).
struct WorkerSeries {
  int ranks = 0;
  Gauge* lag_recent = nullptr;
  std::atomic<double> lag_mean{-1};  // lag_recent's value; -1 before the first batch
  LazyCounter lag_ignored;
  Gauge* mismatch_ratio = nullptr;
  LazyCounter matched;
  LazyCounter mismatched;
  LazyCounter unchecked;
  std::atomic<uint64_t> n_matched{0};
  std::atomic<uint64_t> n_mismatched{0};
};

// What a holder's lane keeps to hold it within its block limit (lane only).
struct LaneLimit {
  explicit LaneLimit(uint64_t limit) : bound(limit) {}
  BlockBound bound;
  bool over = false;  // in an episode: reached the limit, not yet back below 7/8 of it
};

// One holder's series and the counts already published to them.
struct HolderSeries {
  HolderSeries(const SubscriptionSpec& spec, uint64_t limit)
      : worker_name(spec.worker_name),
        rank(spec.key.rank),
        pool(spec.kv_capacity_blocks),
        limit(limit) {}
  const std::string worker_name;
  const DpRank rank;
  const uint64_t pool;
  LaneLimit limit;
  WorkerSeries* worker = nullptr;
  std::array<LazyCounter, kDispositionCount> batches{};
  std::array<LazyCounter, kDropReasonCount> dropped{};
  std::array<LazyCounter, kResyncReasonCount> resyncs{};
  LazyCounter gaps;
  LazyCounter replays;
  LazyCounter restarts;
  LazyCounter bad_frames;
  LazyCounter lane_waits;
  PresenceGauge degraded;
  Gauge* block_size = nullptr;
  std::array<LazyCounter, 3> notes{};  // block_size_change, unknown_medium, group_policy_clear
  Gauge* held = nullptr;
  Gauge* block_limit = nullptr;
  LazyCounter evicted;
  LazyCounter limit_episodes;
  LazyCounter limit_clears;
  PresenceGauge quarantined;
  LazyCounter quarantines;
  LazyCounter replays_deferred;
  LazyCounter turns_capped;
  LazyCounter disconnects;
  // Published so far (event thread only).
  CursorStats seen;
  std::array<uint64_t, kDropReasonCount> seen_dropped{};
  uint64_t seen_bad_frames = 0;
  uint64_t seen_backlogged = 0;
  uint64_t seen_lost = 0;
  HashCheckCounts seen_hash;
  NormalizerStats seen_notes;
  uint64_t seen_replays_sent = 0;
  uint64_t seen_replays_deferred = 0;
  uint64_t seen_turns_capped = 0;
  uint64_t seen_disconnects = 0;
  uint64_t seen_quarantines = 0;
  uint64_t seen_quarantined_batches = 0;
  bool was_degraded = false;
  bool was_quarantined = false;
  // Written by the lanes.
  std::atomic<uint64_t> applied{0};
  std::atomic<int64_t> blocks{0};            // block copies the holder holds (from apply results)
  std::atomic<uint64_t> block_limit_now{0};  // limit.bound's limit, for readers off the lane
  std::atomic<uint8_t> tiers{0};  // index::tier_bit of every tier stored on since the last clear
  std::atomic<uint64_t> n_evicted{0};
  std::atomic<uint64_t> n_limit_clears{0};
};

}  // namespace

std::optional<double> apply_lag_seconds(double published, double now,
                                        std::chrono::milliseconds window) {
  const double lag = now - published;
  const double w = std::chrono::duration<double>(window).count();
  if (!(lag >= -w && lag <= w)) return std::nullopt;  // NaN too
  return std::max(0.0, lag);
}

// ---- Event threads ----------------------------------------------------------------------------

struct Holder {
  std::unique_ptr<Subscription> sub;
  HolderSeries* series = nullptr;
  WorkerSeries* worker = nullptr;
  std::vector<int> fds;  // in the event thread's epoll set
  uint64_t fds_version = 0;
};

// One event thread: its subscriptions' sockets in an epoll set (their ZMQ_FD descriptors, and an
// eventfd for commands), so a wake-up costs what is ready, not a scan of every socket: with
// hundreds of holders, zmq_poll's per-socket checks on every wake-up cost more than the events.
class EventThread {
 public:
  // The longest an event thread sleeps with nothing to do (it wakes earlier for sockets,
  // commands and timers).
  static constexpr std::chrono::milliseconds kIdlePoll{1000};

  EventThread(Families& f, std::chrono::milliseconds poll_interval, const Clock& clock)
      : f_(f),
        poll_interval_(poll_interval),
        clock_(clock),
        wake_fd_(eventfd(0, EFD_NONBLOCK)),
        epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake fd
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { run(); });
  }
  ~EventThread() {
    stop();
    if (wake_fd_ >= 0) close(wake_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  // Runs `fn` on the event thread and waits for it.
  void call(std::function<void()> fn) KVGATE_EXCLUDES(mu_) {
    std::promise<void> done;
    auto f = done.get_future();
    {
      MutexLock l(&mu_);
      if (stopping_) return;
      commands_.push_back([&] {
        fn();
        done.set_value();
      });
    }
    wake();
    f.wait();
  }

  void stop() KVGATE_EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      stopping_ = true;
    }
    wake();
    if (thread_.joinable()) thread_.join();
  }

  // Event thread only (from commands).
  std::map<HolderKey, Holder>& holders() { return holders_; }
  void attach(HolderKey key, Holder h) {
    Holder& held = holders_.emplace(key, std::move(h)).first->second;
    watch(held);
    hot_.insert(&held);  // starting may have sent a replay request: look at it once
  }
  void detach(HolderKey key) {
    auto it = holders_.find(key);
    if (it == holders_.end()) return;
    unwatch(it->second);
    hot_.erase(&it->second);
    timed_.erase(&it->second);
    holders_.erase(it);
  }

 private:
  void wake() {
    const uint64_t one = 1;
    if (wake_fd_ >= 0) [[maybe_unused]]
      auto n = ::write(wake_fd_, &one, sizeof one);
  }

  // Registers the holder's current descriptors (again, after a socket was replaced).
  void watch(Holder& h) {
    const Subscription::Descriptors d = h.sub->descriptors();
    h.fds_version = d.version;
    for (int fd : {d.sub, d.replay, d.monitor}) {
      if (fd < 0) continue;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = &h;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0) h.fds.push_back(fd);
    }
  }
  void unwatch(Holder& h) {
    // A closed socket's descriptor left the set by itself; the call then fails harmlessly.
    for (int fd : h.fds) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    h.fds.clear();
  }

  void run() {
    std::vector<epoll_event> events(256);
    std::vector<Holder*> ready;
    for (;;) {
      std::deque<std::function<void()>> commands;
      {
        MutexLock l(&mu_);
        commands.swap(commands_);
        if (stopping_) {
          for (auto& c : commands) c();  // their callers wait
          break;
        }
      }
      for (auto& c : commands) c();
      // Sleep until a socket may have news, a command wakes us, or a timer is due (a replay's
      // deadline; batches waiting for a lane retry every poll interval). Idle costs nothing.
      std::chrono::milliseconds timeout = hot_.empty() ? kIdlePoll : std::chrono::milliseconds(0);
      const MonoTime now = clock_.now();
      for (Holder* h : timed_) {
        if (const auto due = h->sub->next_tick()) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*due - now);
          timeout = std::min(timeout, std::clamp(left, poll_interval_, kIdlePoll));
        }
      }
      const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(timeout.count()));
      ready.assign(hot_.begin(), hot_.end());
      hot_.clear();
      for (int i = 0; i < n; ++i) {
        if (events[i].data.ptr == nullptr) {
          uint64_t v;
          [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof v);
          continue;
        }
        ready.push_back(static_cast<Holder*>(events[i].data.ptr));
      }
      const MonoTime after = clock_.now();
      for (Holder* h : timed_) {
        const auto due = h->sub->next_tick();
        if (due && *due <= after) ready.push_back(h);
      }
      std::sort(ready.begin(), ready.end());
      ready.erase(std::unique(ready.begin(), ready.end()), ready.end());
      for (Holder* h : ready) serve(*h);
    }
    for (auto& [key, h] : holders_) unwatch(h);
    hot_.clear();
    timed_.clear();
    holders_.clear();  // closes every socket on this thread
  }

  void serve(Holder& h) {
    const bool more = h.sub->service();
    h.sub->tick();
    if (h.sub->descriptors().version != h.fds_version) {
      unwatch(h);
      watch(h);
    }
    if (more) hot_.insert(&h);
    if (h.sub->next_tick()) {
      timed_.insert(&h);
    } else {
      timed_.erase(&h);
    }
    publish(h);
  }

  // Pushes the subscription's counts since the last call into its series.
  void publish(Holder& h) {
    HolderSeries& s = *h.series;
    const Subscription& sub = *h.sub;
    const CursorStats& c = sub.cursor_stats();
    const auto bump = [](auto& counter, uint64_t now, uint64_t& seen) {
      if (now > seen) add_to(counter, now - seen);
      seen = now;
    };
    bump(s.batches[0], c.applied, s.seen.applied);
    bump(s.batches[1], c.duplicates, s.seen.duplicates);
    bump(s.batches[2], c.replayed, s.seen.replayed);
    bump(s.gaps, c.gaps, s.seen.gaps);
    bump(s.replays, sub.replays_sent(), s.seen_replays_sent);
    bump(s.replays_deferred, sub.replays_deferred(), s.seen_replays_deferred);
    bump(s.turns_capped, sub.turns_capped(), s.seen_turns_capped);
    bump(s.disconnects, sub.disconnects(), s.seen_disconnects);
    bump(s.quarantines, sub.quarantines(), s.seen_quarantines);
    bump(s.batches[4], sub.quarantined_batches(), s.seen_quarantined_batches);
    if (sub.quarantined() != s.was_quarantined) {
      s.was_quarantined = sub.quarantined();
      s.quarantined.set(s.was_quarantined);
    }
    bump(s.restarts, c.restarts, s.seen.restarts);
    for (size_t i = 0; i < kResyncReasonCount; ++i)
      bump(s.resyncs[i], c.resyncs[i], s.seen.resyncs[i]);
    const auto& d = sub.dropped_events();
    for (size_t i = 0; i < kDropReasonCount; ++i) bump(s.dropped[i], d[i], s.seen_dropped[i]);
    uint64_t bad = sub.bad_frames();
    const uint64_t bad_before = s.seen_bad_frames;
    bump(s.bad_frames, bad, s.seen_bad_frames);
    if (bad > bad_before) s.batches[3].add(bad - bad_before);
    bump(s.lane_waits, sub.backlogged(), s.seen_backlogged);
    bump(s.batches[3], sub.lost(), s.seen_lost);
    s.block_size->Set(sub.block_size());
    const NormalizerStats& ns = sub.normalizer_stats();
    bump(s.notes[0], ns.block_size_changes, s.seen_notes.block_size_changes);
    bump(s.notes[1], ns.unknown_mediums, s.seen_notes.unknown_mediums);
    bump(s.notes[2], ns.group_policy_clears, s.seen_notes.group_policy_clears);
    if (sub.degraded() != s.was_degraded) {
      s.was_degraded = sub.degraded();
      s.degraded.set(s.was_degraded);
      if (s.was_degraded)
        f_.degraded_total.Increment();
      else
        f_.degraded_total.Decrement();
    }
    const HashCheckCounts& hc = sub.hash_counts();
    if (hc.matched != s.seen_hash.matched || hc.mismatched != s.seen_hash.mismatched ||
        hc.unchecked != s.seen_hash.unchecked) {
      WorkerSeries& w = *h.worker;
      const uint64_t dm = hc.matched - s.seen_hash.matched;
      const uint64_t dx = hc.mismatched - s.seen_hash.mismatched;
      w.matched.add(dm);
      w.mismatched.add(dx);
      w.unchecked.add(hc.unchecked - s.seen_hash.unchecked);
      const uint64_t m = w.n_matched.fetch_add(dm) + dm;
      const uint64_t x = w.n_mismatched.fetch_add(dx) + dx;
      w.mismatch_ratio->Set(m + x == 0 ? 0.0 : static_cast<double>(x) / static_cast<double>(m + x));
      if (dx > 0) {
        static const auto logger = log::get("events");
        KVGATE_LOG_EVERY_MS(logger, spdlog::level::warn, 30000,
                            "worker {} publishes engine hashes that scheme {} does not reproduce "
                            "({} of {} checked blocks): check its hash algorithm, seed, block "
                            "size and tokenizer",
                            sub.spec().worker_name, hash_scheme_name(sub.spec().hash_check.scheme),
                            x, m + x);
      }
      s.seen_hash = hc;
    }
  }

  Families& f_;
  const std::chrono::milliseconds poll_interval_;
  const Clock& clock_;
  const int wake_fd_;
  const int epoll_fd_;
  std::set<Holder*> hot_;    // serve again without waiting (more was waiting, or just attached)
  std::set<Holder*> timed_;  // have a timer (next_tick)
  Mutex mu_;
  std::deque<std::function<void()>> commands_ KVGATE_GUARDED_BY(mu_);
  bool stopping_ KVGATE_GUARDED_BY(mu_) = false;
  std::map<HolderKey, Holder> holders_;  // event thread only
  std::thread thread_;
};

// ---- EventIngest ------------------------------------------------------------------------------

class EventIngest::Impl {
 public:
  Impl(index::Indexer& index, metrics::Registry& registry, const Clock& clock, IngestOptions o)
      : index_(index),
        clock_(clock),
        options_(o),
        families_(registry),
        ctx_(1),
        lanes_({.lanes = static_cast<uint32_t>(std::max<size_t>(1, o.lanes)),
                .max_queued_per_key = o.lane_queue_batches,
                .burst = 64,
                .group_cpus = o.lane_cpus}) {
    configure_context(ctx_);
    for (size_t i = 0; i < std::max<size_t>(1, o.event_threads); ++i) {
      threads_.push_back(std::make_unique<EventThread>(families_, o.poll_interval, clock_));
    }
  }
  ~Impl() { stop(); }

  Status add(SubscriptionSpec spec) KVGATE_EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (stopped_) return absl::FailedPreconditionError("event ingest stopped");
    if (entries_.count(spec.key)) {
      return absl::AlreadyExistsError("KV events of this worker rank are already subscribed");
    }
    const HolderKey key = spec.key;
    EventThread& t = *threads_[key.worker.value() % threads_.size()];
    auto series = make_holder_series(spec);
    WorkerSeries* worker = acquire_worker(spec.worker_name);
    series->worker = worker;
    Status status;
    HolderSeries* s = series.get();
    const uint64_t lane_key = key.worker.value();  // a worker's ranks share one key: in order
    t.call([&] {
      Holder h;
      try {
        h.sub = make_subscription(spec, s, lane_key);
      } catch (const zmq::error_t& e) {  // out of sockets or descriptors: this holder only
        status =
            absl::ResourceExhaustedError(std::string("cannot open KV-event sockets: ") + e.what());
        return;
      }
      status = h.sub->start();
      if (!status.ok()) return;
      h.series = s;
      h.worker = worker;
      t.attach(key, std::move(h));
    });
    if (!status.ok()) {
      remove_series(*series, spec.worker_name);
      return status;
    }
    entries_[key] = Entry{&t, spec.holder, spec.worker_name, std::move(series)};
    if (spec.kv_capacity_blocks > 0) {
      // The engine's KV pool: the index sizes the holder for it on the holder's lane (a hint, so
      // it may follow a first batch).
      const HolderId holder = spec.holder;
      const uint64_t blocks = spec.kv_capacity_blocks;
      lanes_.submit_always(lane_key,
                           [this, holder, blocks] { index_.expect_capacity(holder, blocks); });
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Subscription> make_subscription(const SubscriptionSpec& spec, HolderSeries* s,
                                                  uint64_t lane_key) {
    return std::make_unique<Subscription>(
        ctx_, spec, options_.subscription,
        [this, s, lane_key](std::unique_ptr<NormalizedBatch>& b) {
          // A full lane queue refuses the batch; the subscription keeps it and offers it again
          // (a replay waits for the lanes instead of losing batches).
          // (This event thread is the key's only producer: room now is room at the submit.)
          if (!lanes_.has_room(lane_key)) return false;
          std::shared_ptr<NormalizedBatch> batch(std::move(b));
          lanes_.submit_always(lane_key, [this, s, batch] { apply(*batch, *s); });
          return true;
        },
        clock_);
  }

  // A lane task: one admitted batch into the index, within the holder's block limit.
  void apply(const NormalizedBatch& batch, HolderSeries& series) {
    if (batch.clear_first) clear(batch.holder, series);
    if (!batch.events.empty()) {
      note_tiers(batch.events, series);
      // Room first, so the index never holds more than the limit, not even between two applies.
      keep_within_limit(batch.holder, series, batch.stored_blocks);
      const index::ApplyResult r = index_.apply(batch.holder, batch.events);
      // The holder's block copies, kept from what each apply did (for routing's warm-up rule).
      const auto before = static_cast<uint64_t>(series.blocks.load(std::memory_order_relaxed));
      const uint64_t held = index::blocks_after(before, r);
      series.blocks.store(static_cast<int64_t>(held), std::memory_order_relaxed);
      if (r.clears > 0) series.limit.bound.forget_all();
      series.limit.bound.remember(batch.events, held);
      keep_within_limit(batch.holder, series, 0);  // a batch larger than the limit
    }
    series.held->Set(static_cast<double>(series.blocks.load(std::memory_order_relaxed)));
    // Release: whoever reads the count (state()) also sees what the batch did to the index, even
    // an index without locks (a test reading the chain index's content once it settled).
    if (!batch.clear_only) series.applied.fetch_add(1, std::memory_order_release);
    if (batch.ts > 0) observe_lag(batch.ts, *series.worker);
  }

  // The tiers the batch stores blocks on (from its last clear on, if it has one). A holder that
  // stores off the device holds more than its engine's KV pool: its limit becomes the one for an
  // unknown pool if that is more (engines do not report their offload tiers' size).
  void note_tiers(std::span<const index::Event> events, HolderSeries& series) {
    uint8_t tiers = series.tiers.load(std::memory_order_relaxed);
    for (const index::Event& e : events) {
      if (e.kind == index::EventKind::kCleared) tiers = 0;
      if (e.kind == index::EventKind::kStored) tiers |= index::tier_bit(e.tier);
    }
    series.tiers.store(tiers, std::memory_order_relaxed);
    const bool offloads = (tiers & ~index::tier_bit(index::Tier::kDevice)) != 0;
    if (!offloads || series.limit.bound.limit() >= options_.default_holder_blocks) return;
    series.limit.bound.raise_limit(options_.default_holder_blocks);
    series.block_limit->Set(static_cast<double>(series.limit.bound.limit()));
    series.block_limit_now.store(series.limit.bound.limit(), std::memory_order_relaxed);
    static const auto logger = log::get("events");
    logger->info(
        "{} rank {}: its engine stores blocks off the device (an offload tier): its index's "
        "block limit is now {} (--kv-events-max-holder-blocks)",
        series.worker_name, series.rank, series.limit.bound.limit());
  }

  void clear(HolderId holder, HolderSeries& series) {
    static const index::Event kClear{};
    index_.apply(holder, std::span<const index::Event>(&kClear, 1));
    series.blocks.store(0, std::memory_order_relaxed);
    series.tiers.store(0, std::memory_order_relaxed);
    series.limit.bound.forget_all();
    series.limit.over = false;
  }

  // Evicts the holder's oldest blocks until `incoming` more fit within its limit (block_bound.h
  // says why these); clears it when nothing remembered is left to evict.
  void keep_within_limit(HolderId holder, HolderSeries& series, uint64_t incoming) {
    LaneLimit& l = series.limit;
    const uint64_t room_for = std::min(incoming, l.bound.limit());
    auto held = static_cast<uint64_t>(series.blocks.load(std::memory_order_relaxed));
    if (held + room_for <= l.bound.limit()) {
      if (l.over && held <= l.bound.limit() / 8 * 7) l.over = false;
      return;
    }
    if (!std::exchange(l.over, true)) note_limit_reached(series);
    uint64_t evicted = 0;
    for (auto removals = l.bound.make_room(held, incoming); !removals.empty();
         removals = l.bound.make_room(held, incoming)) {
      const index::ApplyResult r = index_.apply(holder, removals);
      held = index::blocks_after(held, r);
      evicted += r.removed_blocks;
    }
    series.blocks.store(static_cast<int64_t>(held), std::memory_order_relaxed);
    if (evicted > 0) {
      series.evicted.add(evicted);
      series.n_evicted.fetch_add(evicted, std::memory_order_relaxed);
    }
    if (held + room_for > l.bound.limit()) {  // held blocks older than every remembered store
      clear(holder, series);
      series.n_limit_clears.fetch_add(1, std::memory_order_relaxed);
      series.limit_clears.add(1);
    }
  }

  void note_limit_reached(HolderSeries& series) {
    series.limit_episodes.add(1);
    static const auto logger = log::get("events");
    KVGATE_LOG_EVERY_MS(logger, spdlog::level::warn, 5000,
                        "{} rank {}: its index reached its limit of {} blocks (KV pool {}, 0: "
                        "unknown): evicting its oldest blocks; the engine stores more than it "
                        "can hold, or someone floods its event port",
                        series.worker_name, series.rank, series.limit.bound.limit(), series.pool);
  }

  void observe_lag(double published, WorkerSeries& worker) {
    const auto lag =
        apply_lag_seconds(published, to_unix_seconds(clock_.wall()), options_.lag_window);
    if (!lag) {
      worker.lag_ignored.add(1);
      return;
    }
    families_.apply_lag_all.Observe(*lag);
    // The worker's ranks may apply on different threads: the mean moves by compare-and-swap.
    double mean = worker.lag_mean.load(std::memory_order_relaxed), next = 0;
    do {
      next = mean < 0 ? *lag : mean + (*lag - mean) / 16;
    } while (!worker.lag_mean.compare_exchange_weak(mean, next, std::memory_order_relaxed));
    worker.lag_recent->Set(next);
  }

  bool remove(HolderKey key) KVGATE_EXCLUDES(mu_) {
    MutexLock l(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return false;
    Entry& e = it->second;
    // 1. No more batches: the subscription and its sockets go away on their thread.
    e.thread->call([&] { e.thread->detach(key); });
    // 2. Everything already queued for the holder applies, then the holder leaves the index (its
    // worker's key runs in order; the removal is never refused).
    std::promise<void> done;
    const HolderId holder = e.holder;
    lanes_.submit_always(key.worker.value(), [this, holder, &done] {
      index_.remove_holder(holder);
      done.set_value();
    });
    done.get_future().wait();
    // 3. Its series.
    if (e.series->was_degraded) families_.degraded_total.Decrement();
    remove_series(*e.series, e.worker_name);
    entries_.erase(it);
    return true;
  }

  std::optional<HolderState> state(HolderKey key) const KVGATE_EXCLUDES(mu_) {
    MutexLock l(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    HolderState st;
    it->second.thread->call([&] {
      auto h = it->second.thread->holders().find(key);
      if (h == it->second.thread->holders().end()) return;
      const Subscription& s = *h->second.sub;
      st.cursor = s.cursor_stats();
      st.last_seq = s.cursor();
      st.degraded = s.degraded();
      st.awaiting_replay = s.awaiting_replay();
      st.block_size = s.block_size();
      st.hash = s.hash_counts();
      st.dropped_events = s.dropped_events();
      st.backlogged = s.backlogged();
      st.backlog = s.backlog();
      st.replays_sent = s.replays_sent();
      st.replays_deferred = s.replays_deferred();
      st.turns_capped = s.turns_capped();
      st.disconnects = s.disconnects();
      st.quarantined = s.quarantined();
      st.quarantined_batches = s.quarantined_batches();
    });
    const HolderSeries& series = *it->second.series;
    st.applied_batches = series.applied.load();
    st.blocks = static_cast<uint64_t>(series.blocks.load());
    st.tiers = series.tiers.load();
    st.block_limit = series.block_limit_now.load(std::memory_order_relaxed);
    st.evicted_blocks = series.n_evicted.load();
    st.limit_clears = series.n_limit_clears.load();
    return st;
  }

  void flush() { lanes_.flush_all(); }

  void stop() KVGATE_EXCLUDES(mu_) {
    MutexLock l(&mu_);
    if (stopped_) return;
    stopped_ = true;
    for (auto& t : threads_) t->stop();
    // Queued batches are discarded; a batch being applied finishes.
    for (const auto& [key, e] : entries_) lanes_.forget(key.worker.value());
    lanes_.flush_all();
  }

 private:
  struct Entry {
    EventThread* thread;
    HolderId holder;
    std::string worker_name;
    std::unique_ptr<HolderSeries> series;
  };

  std::unique_ptr<HolderSeries> make_holder_series(const SubscriptionSpec& spec) {
    auto s = std::make_unique<HolderSeries>(
        spec, holder_block_limit(spec.kv_capacity_blocks, options_.capacity_margin,
                                 options_.default_holder_blocks));
    const metrics::Labels base = {{"worker", spec.worker_name},
                                  {"rank", std::to_string(spec.key.rank)}};
    auto with = [&](const char* k, std::string_view v) {
      metrics::Labels l = base;
      l[k] = std::string(v);
      return l;
    };
    for (size_t i = 0; i < kDispositionCount; ++i)
      s->batches[i] = LazyCounter(families_.batches, with("disposition", kDispositions[i]));
    for (size_t i = 0; i < kDropReasonCount; ++i) {
      s->dropped[i] = LazyCounter(families_.dropped_events,
                                  with("reason", drop_reason_name(static_cast<DropReason>(i))));
    }
    for (size_t i = 0; i < kResyncReasonCount; ++i) {
      s->resyncs[i] = LazyCounter(families_.resyncs,
                                  with("reason", resync_reason_name(static_cast<ResyncReason>(i))));
    }
    s->gaps = LazyCounter(families_.gaps, base);
    s->replays = LazyCounter(families_.replays, base);
    s->restarts = LazyCounter(families_.restarts, base);
    s->bad_frames = LazyCounter(families_.bad_frames, base);
    s->lane_waits = LazyCounter(families_.lane_waits, base);
    s->degraded = PresenceGauge(families_.degraded, base);
    s->notes[0] = LazyCounter(families_.normalizer_notes, with("note", "block_size_change"));
    s->notes[1] = LazyCounter(families_.normalizer_notes, with("note", "unknown_medium"));
    s->notes[2] = LazyCounter(families_.normalizer_notes, with("note", "group_policy_clear"));
    s->block_size = &families_.block_size.Add(base);
    s->held = &families_.holder_blocks.Add(base);
    s->block_limit = &families_.block_limit.Add(base);
    s->block_limit->Set(static_cast<double>(s->limit.bound.limit()));
    s->block_limit_now.store(s->limit.bound.limit(), std::memory_order_relaxed);
    s->evicted = LazyCounter(families_.evicted_blocks, base);
    s->limit_episodes = LazyCounter(families_.limit_episodes, base);
    s->limit_clears = LazyCounter(families_.limit_clears, base);
    s->quarantined = PresenceGauge(families_.quarantined, base);
    s->quarantines = LazyCounter(families_.quarantines, base);
    s->replays_deferred = LazyCounter(families_.replays_deferred, base);
    s->turns_capped = LazyCounter(families_.turns_capped, base);
    s->disconnects = LazyCounter(families_.disconnects, base);
    return s;
  }

  WorkerSeries* acquire_worker(const std::string& name) KVGATE_REQUIRES(mu_) {
    auto& w = workers_[name];
    if (!w) {
      w = std::make_unique<WorkerSeries>();
      const metrics::Labels l = {{"worker", name}};
      w->lag_recent = &families_.apply_lag_recent.Add(l);
      w->lag_ignored = LazyCounter(families_.lag_ignored, l);
      w->mismatch_ratio = &families_.mismatch_ratio.Add(l);
      auto result = [&](const char* r) {
        metrics::Labels lr = l;
        lr["result"] = r;
        return LazyCounter(families_.hash_blocks, lr);
      };
      w->matched = result("matched");
      w->mismatched = result("mismatched");
      w->unchecked = result("unchecked");
    }
    ++w->ranks;
    return w.get();
  }

  void remove_series(HolderSeries& s, const std::string& worker_name) KVGATE_REQUIRES(mu_) {
    for (auto& c : s.batches) c.remove();
    for (auto& c : s.dropped) c.remove();
    for (auto& c : s.resyncs) c.remove();
    s.gaps.remove();
    s.replays.remove();
    s.restarts.remove();
    s.bad_frames.remove();
    s.lane_waits.remove();
    s.degraded.remove();
    for (auto& c : s.notes) c.remove();
    families_.block_size.Remove(s.block_size);
    families_.holder_blocks.Remove(s.held);
    families_.block_limit.Remove(s.block_limit);
    s.evicted.remove();
    s.limit_episodes.remove();
    s.limit_clears.remove();
    s.quarantined.remove();
    s.quarantines.remove();
    s.replays_deferred.remove();
    s.turns_capped.remove();
    s.disconnects.remove();
    auto it = workers_.find(worker_name);
    if (it != workers_.end() && --it->second->ranks == 0) {
      families_.apply_lag_recent.Remove(it->second->lag_recent);
      it->second->lag_ignored.remove();
      families_.mismatch_ratio.Remove(it->second->mismatch_ratio);
      it->second->matched.remove();
      it->second->mismatched.remove();
      it->second->unchecked.remove();
      workers_.erase(it);
    }
  }

  index::Indexer& index_;
  const Clock& clock_;
  IngestOptions options_;
  Families families_;
  zmq::context_t ctx_;
  std::vector<std::unique_ptr<EventThread>> threads_;
  mutable Mutex mu_;
  std::map<HolderKey, Entry> entries_ KVGATE_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<WorkerSeries>> workers_ KVGATE_GUARDED_BY(mu_);
  bool stopped_ KVGATE_GUARDED_BY(mu_) = false;
  // Last: destroyed first, so no lane task outlives what it touches.
  index::LanePool lanes_;
};

EventIngest::EventIngest(index::Indexer& index, metrics::Registry& registry, const Clock& clock,
                         IngestOptions options)
    : impl_(std::make_unique<Impl>(index, registry, clock, options)) {}
EventIngest::~EventIngest() = default;
Status EventIngest::add(SubscriptionSpec spec) { return impl_->add(std::move(spec)); }
bool EventIngest::remove(HolderKey key) { return impl_->remove(key); }
std::optional<HolderState> EventIngest::state(HolderKey key) const { return impl_->state(key); }
void EventIngest::flush() { impl_->flush(); }
void EventIngest::stop() { impl_->stop(); }

}  // namespace kvgate::events
