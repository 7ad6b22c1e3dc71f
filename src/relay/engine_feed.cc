#include "kvgate/relay/engine_feed.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include <zmq.hpp>

#include "kvgate/core/clock.h"
#include "kvgate/core/log.h"
#include "kvgate/core/thread_annotations.h"

namespace kvgate::relay {
namespace {

std::shared_ptr<spdlog::logger> feed_log() {
  static auto logger = log::get("relay");
  return logger;
}

}  // namespace

class EngineFeed::Impl {
 public:
  Impl(StreamTable& table, FeedOptions options)
      : table_(table), options_(std::move(options)), thread_([this] { run(); }) {}
  ~Impl() { stop(); }

  Status add(WorkerSpec spec, std::vector<RankEndpoint> endpoints) {
    if (endpoints.empty()) {
      return absl::InvalidArgumentError("relay: worker " + spec.name +
                                        " has no KV event endpoints");
    }
    for (const RankEndpoint& ep : endpoints) spec.ranks = std::max(spec.ranks, ep.rank + 1);
    auto streams = table_.add(spec);
    if (!streams.ok()) return streams.status();
    MutexLock lock(&mu_);
    for (const RankEndpoint& ep : endpoints) {
      pending_.push_back({spec.name, ep, (*streams)[ep.rank]});
    }
    return absl::OkStatus();
  }

  std::vector<FeedRankStats> stats() const {
    MutexLock lock(&mu_);
    return published_;
  }

  void stop() {
    if (stop_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Pending {
    std::string worker;
    RankEndpoint endpoint;
    RankStream* stream;
  };
  struct Rank {
    std::string worker;
    uint32_t rank = 0;
    RankStream* stream = nullptr;
    std::unique_ptr<events::Subscription> sub;
    uint64_t batches = 0;
    uint64_t loads = 0;  // the subscription's callback counts them, on this thread too
  };

  void run() {
    zmq::context_t ctx(1);
    events::configure_context(ctx);
    std::vector<std::unique_ptr<Rank>> ranks;
    std::vector<zmq_pollitem_t> items;
    std::vector<size_t> first_item;
    auto last_publish = std::chrono::steady_clock::now();
    while (!stop_.load(std::memory_order_acquire)) {
      take_pending(ctx, ranks);
      items.clear();
      first_item.clear();
      for (auto& r : ranks) {
        first_item.push_back(items.size());
        r->sub->poll_items(&items);
      }
      auto timeout = options_.poll_interval;
      const MonoTime now = Clock::real().now();
      for (auto& r : ranks) {
        if (auto t = r->sub->next_tick()) {
          const auto until = std::chrono::duration_cast<std::chrono::milliseconds>(*t - now);
          timeout = std::clamp(until, std::chrono::milliseconds(0), timeout);
        }
      }
      try {
        if (items.empty()) {
          std::this_thread::sleep_for(timeout);
        } else {
          zmq::poll(items.data(), items.size(), timeout);
        }
      } catch (const zmq::error_t&) {
        continue;  // interrupted
      }
      for (size_t i = 0; i < ranks.size(); ++i) {
        ranks[i]->sub->handle(items.data() + first_item[i]);
        ranks[i]->sub->tick();
      }
      if (std::chrono::steady_clock::now() - last_publish > std::chrono::milliseconds(100)) {
        publish(ranks);
        last_publish = std::chrono::steady_clock::now();
      }
    }
    publish(ranks);
    ranks.clear();  // the sockets close before the context
  }

  void take_pending(zmq::context_t& ctx, std::vector<std::unique_ptr<Rank>>& ranks) {
    std::vector<Pending> taken;
    {
      MutexLock lock(&mu_);
      taken.swap(pending_);
    }
    for (Pending& p : taken) {
      auto r = std::make_unique<Rank>();
      r->worker = p.worker;
      r->rank = p.endpoint.rank;
      r->stream = p.stream;
      events::SubscriptionSpec spec;
      spec.key = HolderKey{WorkerId(next_worker_id_), p.endpoint.rank};
      spec.holder = HolderId(static_cast<uint32_t>(ranks.size()));
      spec.worker_name = p.worker;
      spec.endpoint = p.endpoint.publisher;
      spec.replay_endpoint = p.endpoint.replay;
      spec.topic = p.endpoint.topic;
      Rank* raw = r.get();
      spec.on_load = [raw](const events::LoadRecord& l) {
        v1::Load load;
        load.set_running(l.running);
        load.set_waiting(l.waiting);
        load.set_kv_usage(l.kv_usage);
        load.set_queued_prefill_tokens(l.queued_prefill_tokens);
        load.set_ts(l.ts);
        raw->stream->set_load(load);
        ++raw->loads;
      };
      r->sub = std::make_unique<events::Subscription>(
          ctx, spec, options_.subscription,
          [raw](std::unique_ptr<events::NormalizedBatch>& b) {
            if (b->clear_only) {
              raw->stream->restart(raw->sub->degraded());
            } else {
              raw->stream->append({.seq = b->seq,
                                   .new_epoch = b->clear_first,
                                   .degraded = raw->sub->degraded(),
                                   .engine_ts = b->ts,
                                   .events = b->events});
              ++raw->batches;
            }
            b.reset();
            return true;
          },
          Clock::real());
      if (Status s = r->sub->start(); !s.ok()) {
        feed_log()->warn("worker {} rank {}: cannot subscribe to {}: {}", p.worker, p.endpoint.rank,
                         p.endpoint.publisher, message_of(s));
        continue;
      }
      feed_log()->info("worker {} rank {}: subscribed to {}{}", p.worker, p.endpoint.rank,
                       p.endpoint.publisher,
                       p.endpoint.replay.empty() ? " (no replay socket)" : "");
      ranks.push_back(std::move(r));
    }
    if (!taken.empty()) ++next_worker_id_;
  }

  // Stats for other threads, and each worker's state for ListWorkers.
  void publish(const std::vector<std::unique_ptr<Rank>>& ranks) {
    std::vector<FeedRankStats> out;
    std::map<std::string, std::string> state;
    for (const auto& r : ranks) {
      out.push_back({.worker = r->worker,
                     .rank = r->rank,
                     .cursor = r->sub->cursor_stats(),
                     .degraded = r->sub->degraded(),
                     .batches = r->batches,
                     .loads = r->loads});
      std::string& s = state[r->worker];
      const bool heard = r->batches > 0 || out.back().loads > 0;
      if (out.back().degraded) {
        s = "degraded";
      } else if (s.empty() || (s == "connecting" && heard)) {
        s = heard ? "live" : "connecting";
      }
    }
    for (const auto& [worker, s] : state) table_.set_state(worker, s);
    MutexLock lock(&mu_);
    published_ = std::move(out);
  }

  StreamTable& table_;
  const FeedOptions options_;
  std::atomic<bool> stop_{false};
  mutable Mutex mu_;
  std::vector<Pending> pending_ KVGATE_GUARDED_BY(mu_);
  std::vector<FeedRankStats> published_ KVGATE_GUARDED_BY(mu_);
  uint32_t next_worker_id_ = 0;  // the feed thread's
  std::thread thread_;           // last: starts once the rest is built
};

EngineFeed::EngineFeed(StreamTable& table, FeedOptions options)
    : impl_(std::make_unique<Impl>(table, std::move(options))) {}
EngineFeed::~EngineFeed() = default;
Status EngineFeed::add(WorkerSpec spec, std::vector<RankEndpoint> endpoints) {
  return impl_->add(std::move(spec), std::move(endpoints));
}
std::vector<FeedRankStats> EngineFeed::stats() const { return impl_->stats(); }
void EngineFeed::stop() { impl_->stop(); }

}  // namespace kvgate::relay
