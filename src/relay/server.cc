#include "kvgate/relay/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <deque>
#include <thread>
#include <vector>

#include "kvgate/relay/v1/relay.grpc.pb.h"

namespace kvgate::relay {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Counters {
  std::atomic<uint64_t> subscribes{0}, rejected{0}, active{0}, messages{0}, heartbeats{0},
      out_of_range{0};
};

class SubscribeReactor;

// What outlives a reactor for those that may still call it (a stream's wake, the heartbeat
// thread): they lock `mu` and find `reactor` null once it is gone.
struct Link {
  Mutex mu;
  SubscribeReactor* reactor KVGATE_GUARDED_BY(mu) = nullptr;
};

class Registry {
 public:
  void add(std::shared_ptr<Link> link) {
    MutexLock lock(&mu_);
    links_.push_back(std::move(link));
  }
  void remove(const Link* link) {
    MutexLock lock(&mu_);
    std::erase_if(links_, [&](const auto& l) { return l.get() == link; });
  }
  std::vector<std::shared_ptr<Link>> all() const {
    MutexLock lock(&mu_);
    return links_;
  }

 private:
  mutable Mutex mu_;
  std::vector<std::shared_ptr<Link>> links_ KVGATE_GUARDED_BY(mu_);
};

// One Subscribe stream. Every step runs with link_->mu held: gRPC's reactions, the stream's wake
// and the heartbeat thread may come at once from different threads.
class SubscribeReactor final : public grpc::ServerWriteReactor<v1::SubscribeResponse> {
 public:
  SubscribeReactor(RankStream* stream, RankStream::Cursor cursor, const ServerOptions& options,
                   Registry& registry, Counters& counters)
      : stream_(stream),
        cursor_(cursor),
        options_(options),
        registry_(registry),
        counters_(counters),
        link_(std::make_shared<Link>()) {
    counters_.active.fetch_add(1, std::memory_order_relaxed);
    MutexLock lock(&link_->mu);
    link_->reactor = this;
    registry_.add(link_);
    last_write_ = SteadyClock::now();
    pump();
  }

  // Heartbeat thread: a Heartbeat when the stream has been quiet for the interval.
  static void maybe_heartbeat(const std::shared_ptr<Link>& link, SteadyClock::time_point now) {
    MutexLock lock(&link->mu);
    SubscribeReactor* r = link->reactor;
    if (r == nullptr || r->writing_ || r->finished_ || !r->pending_.empty()) return;
    r->link_->mu.assert_held();  // the same mutex as link->mu
    if (now - r->last_write_ < r->options_.heartbeat) return;
    if (RankStream::Message h = r->stream_->heartbeat(r->cursor_)) {
      r->pending_.push_back(std::move(h));
      r->counters_.heartbeats.fetch_add(1, std::memory_order_relaxed);
    }
    r->pump();  // without a heartbeat: the batches it would have overtaken
  }
  // stop(): end the stream.
  static void end(const std::shared_ptr<Link>& link) {
    MutexLock lock(&link->mu);
    if (SubscribeReactor* r = link->reactor) {
      r->link_->mu.assert_held();
      r->finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "relay stopping"));
    }
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&link_->mu);
    writing_ = false;
    current_.reset();
    if (!ok) {  // the client went away
      finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    pump();
  }
  void OnCancel() override {
    MutexLock lock(&link_->mu);
    finish(grpc::Status::CANCELLED);
  }
  void OnDone() override {
    {
      MutexLock lock(&link_->mu);
      link_->reactor = nullptr;
      if (token_) stream_->cancel(*token_);
    }
    registry_.remove(link_.get());
    counters_.active.fetch_sub(1, std::memory_order_relaxed);
    delete this;
  }

 private:
  // Writes the next message, fetching more from the stream when none is pending, or asks the
  // stream for a wake-up when it has nothing.
  void pump() KVGATE_REQUIRES(link_->mu) {
    if (writing_ || finished_) return;
    if (token_) {
      stream_->cancel(*token_);
      token_.reset();
    }
    while (pending_.empty()) {
      const uint64_t seen = stream_->version();
      std::vector<RankStream::Message> got = stream_->next(cursor_, options_.max_batches_per_read);
      if (!got.empty()) {
        if (got.front()->has_out_of_range()) {
          counters_.out_of_range.fetch_add(1, std::memory_order_relaxed);
        }
        pending_.insert(pending_.end(), got.begin(), got.end());
        break;
      }
      std::weak_ptr<Link> weak = link_;
      token_ = stream_->notify_once(seen, [weak] {
        if (auto link = weak.lock()) {
          MutexLock lock(&link->mu);
          if (SubscribeReactor* r = link->reactor) {
            r->link_->mu.assert_held();
            r->token_.reset();
            r->pump();
          }
        }
      });
      if (token_) return;  // waiting for the next batch
    }
    current_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    last_write_ = SteadyClock::now();
    counters_.messages.fetch_add(1, std::memory_order_relaxed);
    StartWrite(current_.get());
  }
  void finish(const grpc::Status& status) KVGATE_REQUIRES(link_->mu) {
    if (finished_) return;
    finished_ = true;
    if (token_) {
      stream_->cancel(*token_);
      token_.reset();
    }
    Finish(status);
  }

  RankStream* const stream_;
  RankStream::Cursor cursor_;
  const ServerOptions& options_;
  Registry& registry_;
  Counters& counters_;
  const std::shared_ptr<Link> link_;
  std::deque<RankStream::Message> pending_;
  RankStream::Message current_;  // the message being written (gRPC holds a pointer to it)
  bool writing_ = false;
  bool finished_ = false;
  std::optional<uint64_t> token_;
  SteadyClock::time_point last_write_;
};

// A Subscribe refused before it starts (counted).
class Refusal final : public grpc::ServerWriteReactor<v1::SubscribeResponse> {
 public:
  Refusal(Counters& counters, grpc::StatusCode code, std::string message) {
    counters.rejected.fetch_add(1, std::memory_order_relaxed);
    Finish(grpc::Status(code, std::move(message)));
  }
  void OnDone() override { delete this; }
};

class Service final : public v1::Relay::CallbackService {
 public:
  Service(StreamTable& table, const ServerOptions& options, Registry& registry, Counters& counters)
      : table_(table), options_(options), registry_(registry), counters_(counters) {}

  grpc::ServerWriteReactor<v1::SubscribeResponse>* Subscribe(
      grpc::CallbackServerContext* /*context*/, const v1::SubscribeRequest* request) override {
    if (request->worker().empty()) {
      return new Refusal(counters_, grpc::StatusCode::INVALID_ARGUMENT,
                         "SubscribeRequest.worker is required (ListWorkers names them)");
    }
    if (request->epoch() == 0 && request->from_seq() != 0) {
      return new Refusal(
          counters_, grpc::StatusCode::INVALID_ARGUMENT,
          "SubscribeRequest.from_seq without an epoch: resume with the epoch it belongs to, or "
          "subscribe fresh with from_seq 0");
    }
    RankStream* stream = table_.find(request->worker(), request->rank());
    if (stream == nullptr) {
      return new Refusal(
          counters_, grpc::StatusCode::NOT_FOUND,
          table_.has_worker(request->worker())
              ? "worker " + request->worker() + " has no rank " + std::to_string(request->rank())
              : "no worker " + request->worker() + " on this relay (ListWorkers names them)");
    }
    counters_.subscribes.fetch_add(1, std::memory_order_relaxed);
    RankStream::Cursor cursor;
    cursor.epoch = request->epoch();
    cursor.next_seq = request->from_seq();
    return new SubscribeReactor(stream, cursor, options_, registry_, counters_);
  }

  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* /*request*/,
                                        v1::ListWorkersResponse* response) override {
    table_.list(response);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  StreamTable& table_;
  const ServerOptions& options_;
  Registry& registry_;
  Counters& counters_;
};

}  // namespace

class RelayServer::Impl {
 public:
  Impl(StreamTable& table, ServerOptions options)
      : options_(std::move(options)), service_(table, options_, registry_, counters_) {}

  Status start() {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                               static_cast<int>(options_.keepalive.count()));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                               static_cast<int>(options_.min_client_ping.count()));
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);  // never refuse for pinging
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      server_.reset();
      return absl::UnavailableError("relay: cannot listen on " + options_.listen);
    }
    heartbeats_ = std::thread([this] { heartbeat_loop(); });
    return absl::OkStatus();
  }

  void stop() {
    if (!server_) return;
    {
      MutexLock lock(&stop_mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    heartbeats_.join();
    for (const auto& link : registry_.all()) SubscribeReactor::end(link);
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }

  int port() const { return port_; }
  ServerStats stats() const {
    return {counters_.subscribes.load(), counters_.rejected.load(),
            counters_.active.load(),     counters_.messages.load(),
            counters_.heartbeats.load(), counters_.out_of_range.load()};
  }

 private:
  void heartbeat_loop() {
    const auto step =
        std::max<std::chrono::milliseconds>(std::chrono::milliseconds(10), options_.heartbeat / 4);
    while (!wait_for_stop(step)) {
      const auto now = SteadyClock::now();
      for (const auto& link : registry_.all()) SubscribeReactor::maybe_heartbeat(link, now);
    }
  }

  // Waits up to `d`; true once stop() has begun.
  bool wait_for_stop(std::chrono::milliseconds d) {
    MutexLock lock(&stop_mu_);
    const auto until = SteadyClock::now() + d;
    while (!stopping_ && SteadyClock::now() < until) {
      stop_cv_.wait_for(&stop_mu_, until - SteadyClock::now());
    }
    return stopping_;
  }

  const ServerOptions options_;
  Registry registry_;
  Counters counters_;
  Service service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread heartbeats_;
  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ KVGATE_GUARDED_BY(stop_mu_) = false;
};

RelayServer::RelayServer(StreamTable& table, ServerOptions options)
    : impl_(std::make_unique<Impl>(table, std::move(options))) {}
RelayServer::~RelayServer() { impl_->stop(); }
Status RelayServer::start() { return impl_->start(); }
void RelayServer::stop() { impl_->stop(); }
int RelayServer::port() const { return impl_->port(); }
ServerStats RelayServer::stats() const { return impl_->stats(); }

}  // namespace kvgate::relay
