#include "kvgate/relay/follower.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "kvgate/core/log.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/relay/proto_events.h"
#include "kvgate/relay/v1/relay.grpc.pb.h"

namespace kvgate::relay {
namespace {

using Steady = std::chrono::steady_clock;

std::shared_ptr<spdlog::logger> follower_log() {
  static auto logger = log::get("relay");
  return logger;
}

class StreamReactor;

// One followed (worker, rank). Its fields are guarded by the follower's mutex; the index writes
// for its holder happen on its stream's reactor only, one message at a time.
struct Follow {
  std::string worker;
  uint32_t rank = 0;
  HolderId holder;
  FollowCallbacks callbacks;
  // What the holder holds: the stream up to (epoch, last_seq), when `valid`.
  bool valid = false;
  bool in_snapshot = false;
  uint64_t epoch = 0;
  std::optional<uint64_t> last_seq;
  FollowStats stats;
  StreamReactor* reactor = nullptr;  // the open stream, if any
  Steady::time_point next_attempt{};
  std::chrono::milliseconds backoff{0};
  bool removed = false;
};

// What a stream reports to (the follower).
class StreamOwner {
 public:
  virtual void on_message(Follow& f, const v1::SubscribeResponse& m, StreamReactor& r) = 0;
  virtual void on_done(Follow& f, const grpc::Status& status) = 0;

 protected:
  ~StreamOwner() = default;
};

}  // namespace

class RelayFollower::Impl final : public StreamOwner {
 public:
  Impl(index::Indexer& index, FollowerOptions options);
  ~Impl() { stop(); }

  Status add(std::string worker, uint32_t rank, HolderId holder, FollowCallbacks callbacks);
  bool remove(std::string_view worker, uint32_t rank);
  std::optional<FollowStats> stats(std::string_view worker, uint32_t rank) const;
  std::vector<FollowStats> stats() const;
  void cut_links();
  void stop();

  void on_message(Follow& f, const v1::SubscribeResponse& m, StreamReactor& r) override;
  void on_done(Follow& f, const grpc::Status& status) override;

 private:
  void run();
  void open(const std::shared_ptr<Follow>& f) KVGATE_REQUIRES(mu_);
  // The holder cannot continue from what it holds: empty it, subscribe fresh.
  void start_over(Follow& f, StreamReactor& r, const std::string& why);
  // Applies to f's holder; the caller counts the result in f's stats (with mu_ held).
  index::ApplyResult apply(Follow& f, const google::protobuf::RepeatedPtrField<v1::Event>& events);
  static FollowStats stats_of(const Follow& f);  // with mu_ held
  bool any_stream_open() const KVGATE_REQUIRES(mu_);

  index::Indexer& index_;
  const FollowerOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Relay::Stub> stub_;
  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::pair<std::string, uint32_t>, std::shared_ptr<Follow>, std::less<>> follows_
      KVGATE_GUARDED_BY(mu_);
  bool stopping_ KVGATE_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

namespace {

class StreamReactor final : public grpc::ClientReadReactor<v1::SubscribeResponse> {
 public:
  StreamReactor(StreamOwner& owner, std::shared_ptr<Follow> follow, v1::SubscribeRequest request)
      : owner_(owner), follow_(std::move(follow)), request_(std::move(request)) {}

  void start(v1::Relay::Stub& stub) {
    last_message_ = Steady::now();
    stub.async()->Subscribe(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void cancel() { context_.TryCancel(); }
  // What it still delivers is ignored (it is being cancelled). With the follower's mutex held.
  void abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_; }
  Steady::time_point last_message() const { return last_message_.load(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended: OnDone follows
    last_message_ = Steady::now();
    owner_.on_message(*follow_, response_, *this);
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    owner_.on_done(*follow_, status);
    delete this;
  }

 private:
  StreamOwner& owner_;
  const std::shared_ptr<Follow> follow_;
  grpc::ClientContext context_;
  v1::SubscribeRequest request_;
  v1::SubscribeResponse response_;
  std::atomic<Steady::time_point> last_message_;
  bool abandoned_ = false;
};

}  // namespace

RelayFollower::Impl::Impl(index::Indexer& index, FollowerOptions options)
    : index_(index), options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(options_.keepalive.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(options_.reconnect_min.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.reconnect_max.count()));
  channel_ = grpc::CreateCustomChannel(options_.target, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Relay::NewStub(channel_);
  thread_ = std::thread([this] { run(); });
}

Status RelayFollower::Impl::add(std::string worker, uint32_t rank, HolderId holder,
                                FollowCallbacks callbacks) {
  MutexLock lock(&mu_);
  auto key = std::make_pair(worker, rank);
  if (follows_.contains(key)) {
    return absl::AlreadyExistsError("relay: " + worker + " rank " + std::to_string(rank) +
                                    " is followed already");
  }
  auto f = std::make_shared<Follow>();
  f->worker = std::move(worker);
  f->rank = rank;
  f->holder = holder;
  f->callbacks = std::move(callbacks);
  follows_.emplace(std::move(key), f);
  open(f);
  return absl::OkStatus();
}

bool RelayFollower::Impl::remove(std::string_view worker, uint32_t rank) {
  std::shared_ptr<Follow> f;
  {
    MutexLock lock(&mu_);
    auto it = follows_.find(std::make_pair(std::string(worker), rank));
    if (it == follows_.end()) return false;
    f = it->second;
    follows_.erase(it);
    f->removed = true;
    if (f->reactor != nullptr) f->reactor->cancel();
    while (f->reactor != nullptr) cv_.wait(&mu_);
  }
  index_.remove_holder(f->holder);
  return true;
}

std::optional<FollowStats> RelayFollower::Impl::stats(std::string_view worker,
                                                      uint32_t rank) const {
  MutexLock lock(&mu_);
  auto it = follows_.find(std::make_pair(std::string(worker), rank));
  if (it == follows_.end()) return std::nullopt;
  return stats_of(*it->second);
}

std::vector<FollowStats> RelayFollower::Impl::stats() const {
  MutexLock lock(&mu_);
  std::vector<FollowStats> out;
  out.reserve(follows_.size());
  for (const auto& [key, f] : follows_) out.push_back(stats_of(*f));
  return out;
}

FollowStats RelayFollower::Impl::stats_of(const Follow& f) {
  FollowStats s = f.stats;
  s.worker = f.worker;
  s.rank = f.rank;
  s.connected = f.reactor != nullptr && s.connected;
  s.epoch = f.epoch;
  s.last_seq = f.last_seq;
  return s;
}

void RelayFollower::Impl::cut_links() {
  MutexLock lock(&mu_);
  for (auto& [key, f] : follows_) {
    if (f->reactor != nullptr) f->reactor->cancel();
  }
}

void RelayFollower::Impl::stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [key, f] : follows_) {
      f->removed = true;
      if (f->reactor != nullptr) f->reactor->cancel();
    }
    while (any_stream_open()) cv_.wait(&mu_);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool RelayFollower::Impl::any_stream_open() const {
  for (const auto& [key, f] : follows_) {
    if (f->reactor != nullptr) return true;
  }
  return false;
}

void RelayFollower::Impl::open(const std::shared_ptr<Follow>& f) {
  v1::SubscribeRequest request;
  request.set_worker(f->worker);
  request.set_rank(f->rank);
  if (f->valid) {
    request.set_epoch(f->epoch);
    request.set_from_seq(f->last_seq ? *f->last_seq + 1 : 0);
    if (f->stats.streams > 0) ++f->stats.resumes;
  } else {
    // A fresh stream rebuilds the holder from nothing. (No stream is open, so no other write
    // for this holder can be under way.)
    index_.remove_holder(f->holder);
    f->stats.blocks = 0;
  }
  ++f->stats.streams;
  f->stats.connected = false;
  auto* reactor = new StreamReactor(*this, f, std::move(request));
  f->reactor = reactor;
  reactor->start(*stub_);
}

index::ApplyResult RelayFollower::Impl::apply(
    Follow& f, const google::protobuf::RepeatedPtrField<v1::Event>& events) {
  thread_local std::vector<OwnedEvent> owned;
  thread_local std::vector<index::Event> views;
  owned.resize(static_cast<size_t>(events.size()));
  views.clear();
  for (int i = 0; i < events.size(); ++i) {
    if (Status s = from_proto(events[i], &owned[static_cast<size_t>(i)]); !s.ok()) {
      KVGATE_LOG_EVERY_MS(follower_log(), spdlog::level::warn, 5000, "{} rank {}: {}", f.worker,
                          f.rank, message_of(s));
      continue;
    }
    views.push_back(owned[static_cast<size_t>(i)].view());
  }
  return index_.apply(f.holder, views);
}

void RelayFollower::Impl::start_over(Follow& f, StreamReactor& r, const std::string& why) {
  KVGATE_LOG_EVERY_MS(follower_log(), spdlog::level::warn, 5000,
                      "{} rank {}: {}; emptying the holder and subscribing afresh", f.worker,
                      f.rank, why);
  f.valid = false;
  f.in_snapshot = false;
  f.last_seq.reset();
  ++f.stats.restarts;
  r.abandon();
  r.cancel();
}

void RelayFollower::Impl::on_message(Follow& f, const v1::SubscribeResponse& m, StreamReactor& r) {
  RelockableMutexLock lock(&mu_);
  if (f.removed || r.abandoned()) return;
  f.stats.connected = true;
  switch (m.kind_case()) {
    case v1::SubscribeResponse::kBatch: {
      const v1::EventBatch& b = m.batch();
      if (f.in_snapshot) return start_over(f, r, "a batch inside a snapshot");
      if (!f.valid) {
        // A fresh stream whose history starts at its epoch's first batch (the holder was
        // emptied when the stream opened).
        f.valid = true;
        f.epoch = b.epoch();
      } else if (b.epoch() != f.epoch) {
        return start_over(f, r, "a batch of another epoch");
      } else if (f.last_seq && b.seq() != *f.last_seq + 1) {
        return start_over(
            f, r, "batch " + std::to_string(b.seq()) + " after " + std::to_string(*f.last_seq));
      }
      lock.unlock();  // the holder's writes are this stream's alone
      const index::ApplyResult applied = apply(f, b.events());
      if (f.callbacks.on_load) f.callbacks.on_load(b.load());
      if (f.callbacks.on_batch) f.callbacks.on_batch(b.engine_ts());
      lock.lock();
      f.stats.blocks = index::blocks_after(f.stats.blocks, applied);
      f.last_seq = b.seq();
      ++f.stats.batches;
      return;
    }
    case v1::SubscribeResponse::kOutOfRange:
      lock.unlock();
      index_.remove_holder(f.holder);
      lock.lock();
      f.stats.blocks = 0;
      f.valid = false;
      f.in_snapshot = true;
      f.epoch = m.out_of_range().epoch();
      f.last_seq.reset();
      return;
    case v1::SubscribeResponse::kSnapshot: {
      const v1::SnapshotChunk& c = m.snapshot();
      if (!f.in_snapshot || c.epoch() != f.epoch) {
        return start_over(f, r, "a snapshot chunk without its OutOfRange");
      }
      lock.unlock();
      const index::ApplyResult applied = apply(f, c.events());
      lock.lock();
      f.stats.blocks = index::blocks_after(f.stats.blocks, applied);
      if (c.last()) {
        f.in_snapshot = false;
        f.valid = true;
        f.last_seq = c.has_seq() ? std::optional(c.seq()) : std::nullopt;
        ++f.stats.snapshots;
      }
      return;
    }
    case v1::SubscribeResponse::kHeartbeat: {
      const v1::Heartbeat& h = m.heartbeat();
      ++f.stats.heartbeats;
      if (f.callbacks.on_load) f.callbacks.on_load(h.load());
      if (!f.valid) {
        // A fresh stream on an epoch with no batch yet: the (emptied) holder is that state.
        if (!f.in_snapshot && !h.has_last_seq()) {
          f.valid = true;
          f.epoch = h.epoch();
        }
        return;
      }
      if (h.epoch() != f.epoch) return start_over(f, r, "the relay is in another epoch");
      // Heartbeats come only when the stream has sent everything: a newer seq was lost.
      if (h.has_last_seq() && (!f.last_seq || *f.last_seq < h.last_seq())) {
        return start_over(f, r, "the relay's newest batch was never received");
      }
      return;
    }
    default:
      return;
  }
}

void RelayFollower::Impl::on_done(Follow& f, const grpc::Status& status) {
  MutexLock lock(&mu_);
  const bool delivered = f.stats.connected;  // this stream delivered something
  f.reactor = nullptr;
  f.stats.connected = false;
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    f.stats.last_error = status.error_message();
  }
  if (f.in_snapshot) {  // cut short: what the holder holds is part of a snapshot
    f.in_snapshot = false;
    f.valid = false;
  }
  // A stream that delivered something broke (a cut link, a silent relay): come back at once. One
  // that did not (refused, or the relay is down): back off, doubling.
  f.backoff = delivered || f.backoff.count() == 0 ? options_.reconnect_min
                                                  : std::min(options_.reconnect_max, f.backoff * 2);
  f.next_attempt = Steady::now() + f.backoff;
  cv_.notify_all();
}

void RelayFollower::Impl::run() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    cv_.wait_for(&mu_, std::chrono::milliseconds(20));
    if (stopping_) break;
    const auto now = Steady::now();
    for (auto& [key, f] : follows_) {
      if (f->removed) continue;
      if (f->reactor == nullptr) {
        if (now >= f->next_attempt) open(f);
      } else if (now - f->reactor->last_message() > options_.silence_timeout) {
        f->stats.last_error = "the relay was silent";
        f->reactor->cancel();
      }
    }
  }
}

RelayFollower::RelayFollower(index::Indexer& index, FollowerOptions options)
    : impl_(std::make_unique<Impl>(index, std::move(options))) {}
RelayFollower::~RelayFollower() = default;
Status RelayFollower::add(std::string worker, uint32_t rank, HolderId holder,
                          FollowCallbacks callbacks) {
  return impl_->add(std::move(worker), rank, holder, std::move(callbacks));
}
bool RelayFollower::remove(std::string_view worker, uint32_t rank) {
  return impl_->remove(worker, rank);
}
std::optional<FollowStats> RelayFollower::stats(std::string_view worker, uint32_t rank) const {
  return impl_->stats(worker, rank);
}
std::vector<FollowStats> RelayFollower::stats() const { return impl_->stats(); }
void RelayFollower::cut_links() { impl_->cut_links(); }
void RelayFollower::stop() { impl_->stop(); }

}  // namespace kvgate::relay
