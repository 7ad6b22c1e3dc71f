#include "mock/detail/publisher.h"

#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "kvgate/core/log.h"
#include "kvgate/events/load_record.h"

namespace kvgate::mock::detail {
namespace {

const std::shared_ptr<spdlog::logger>& publisher_log() {
  static const auto l = log::get("mock.kv");
  return l;
}

void put_be64(uint64_t v, uint8_t* out) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}

uint16_t port_of(const std::string& endpoint) {
  size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return 0;
  return static_cast<uint16_t>(std::strtoul(endpoint.c_str() + colon + 1, nullptr, 10));
}

std::string last_endpoint(void* socket) {
  char buf[256];
  size_t len = sizeof(buf);
  if (zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, buf, &len) != 0) return "";
  return std::string(buf, strnlen(buf, len));
}

void close_socket(void*& s) {
  if (s == nullptr) return;
  int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_close(s);
  s = nullptr;
}

struct Frame {
  const void* data;
  size_t size;
};

// Sends frames as one multipart message; false if the socket refused (HWM, peer gone).
bool send_frames(void* socket, std::initializer_list<Frame> frames) {
  size_t i = 0;
  for (const Frame& f : frames) {
    int flags = ZMQ_DONTWAIT | (++i < frames.size() ? ZMQ_SNDMORE : 0);
    if (zmq_send(socket, f.data, f.size, flags) < 0) return false;
  }
  return true;
}

}  // namespace

struct PublisherHub::Stream {
  StreamSpec spec;
  StreamEndpoints bound;
  void* pub = nullptr;
  void* router = nullptr;
  struct Batch {
    uint64_t seq;
    std::string payload;
    MonoTime due;
    bool drop;
  };
  std::deque<Batch> queue;   // waiting for their due time (hub thread only)
  std::deque<Batch> buffer;  // the replay window (hub thread only)
  std::atomic<uint64_t> sent{0}, dropped{0}, replay_requests{0}, replayed{0}, restarts{0},
      bad_requests{0};
};

struct PublisherHub::Command {
  enum Kind { kPublish, kRestart, kLoad } kind;
  size_t stream;
  Stream::Batch batch;
};

PublisherHub::PublisherHub() : ctx_(zmq_ctx_new()), wake_fd_(eventfd(0, EFD_NONBLOCK)) {}

PublisherHub::~PublisherHub() {
  stop();
  for (auto& s : streams_) {
    close_socket(s->pub);
    close_socket(s->router);
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  zmq_ctx_term(ctx_);
}

Status PublisherHub::bind(Stream& s, bool rebind) {
  close_socket(s.pub);
  close_socket(s.router);
  // Rebinding reuses the ports bound the first time (a restarted engine binds its configured
  // ports again). The old listener closes asynchronously, so the first binds may find the port
  // still taken: retry briefly.
  const std::string pub_ep = rebind ? s.bound.pub : s.spec.pub_endpoint;
  const std::string replay_ep =
      rebind ? s.bound.replay : (s.spec.replay_endpoint ? *s.spec.replay_endpoint : "");
  auto open = [&](int type, const std::string& ep, void** out) -> Status {
    *out = zmq_socket(ctx_, type);
    int hwm = type == ZMQ_PUB ? 100'000 : static_cast<int>(s.spec.buffer_steps) + 16;
    zmq_setsockopt(*out, ZMQ_SNDHWM, &hwm, sizeof(hwm));
    int linger = 0;
    zmq_setsockopt(*out, ZMQ_LINGER, &linger, sizeof(linger));
    for (int attempt = 0;; ++attempt) {
      if (zmq_bind(*out, ep.c_str()) == 0) return Status();
      if (zmq_errno() != EADDRINUSE || attempt >= 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::string err = zmq_strerror(zmq_errno());
    close_socket(*out);
    return absl::UnavailableError("cannot bind " + ep + ": " + err);
  };
  if (Status st = open(ZMQ_PUB, pub_ep, &s.pub); !st.ok()) return st;
  s.bound.pub = last_endpoint(s.pub);
  s.bound.pub_port = port_of(s.bound.pub);
  if (!replay_ep.empty()) {
    if (Status st = open(ZMQ_ROUTER, replay_ep, &s.router); !st.ok()) return st;
    s.bound.replay = last_endpoint(s.router);
    s.bound.replay_port = port_of(s.bound.replay);
  }
  return Status();
}

Result<size_t> PublisherHub::add_stream(const StreamSpec& spec) {
  if (running_) return absl::FailedPreconditionError("add_stream after start");
  auto s = std::make_unique<Stream>();
  s->spec = spec;
  if (Status st = bind(*s, /*rebind=*/false); !st.ok()) {
    close_socket(s->pub);
    close_socket(s->router);
    return st;
  }
  streams_.push_back(std::move(s));
  return streams_.size() - 1;
}

StreamEndpoints PublisherHub::endpoints(size_t stream) const { return streams_[stream]->bound; }

Status PublisherHub::start() {
  if (ctx_ == nullptr || wake_fd_ < 0) return absl::InternalError("zmq context or eventfd failed");
  if (running_.exchange(true)) return Status();
  // Sockets move to the hub thread here; the thread start is the memory barrier ZMQ requires.
  thread_ = std::thread([this] { run(); });
  return Status();
}

void PublisherHub::stop() {
  if (!running_.exchange(false)) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  thread_.join();
}

void PublisherHub::enqueue(Command c) {
  {
    MutexLock l(&mu_);
    commands_.push_back(std::move(c));
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void PublisherHub::publish(size_t stream, uint64_t seq, std::string payload, MonoTime due,
                           bool drop) {
  enqueue(Command{Command::kPublish, stream, {seq, std::move(payload), due, drop}});
}

void PublisherHub::restart(size_t stream) { enqueue(Command{Command::kRestart, stream, {}}); }

void PublisherHub::publish_load(size_t stream, std::string payload) {
  enqueue(Command{Command::kLoad, stream, {0, std::move(payload), MonoTime{}, false}});
}

StreamStats PublisherHub::stats(size_t stream) const {
  const Stream& s = *streams_[stream];
  StreamStats out;
  out.sent = s.sent.load();
  out.dropped = s.dropped.load();
  out.replay_requests = s.replay_requests.load();
  out.replayed_batches = s.replayed.load();
  out.restarts = s.restarts.load();
  out.bad_replay_requests = s.bad_requests.load();
  return out;
}

void PublisherHub::send_due(Stream& s, MonoTime now) {
  while (!s.queue.empty() && s.queue.front().due <= now) {
    Stream::Batch b = std::move(s.queue.front());
    s.queue.pop_front();
    if (b.drop) {
      s.dropped.fetch_add(1, std::memory_order_relaxed);
    } else {
      uint8_t seq[8];
      put_be64(b.seq, seq);
      if (send_frames(s.pub, {{s.spec.topic.data(), s.spec.topic.size()},
                              {seq, 8},
                              {b.payload.data(), b.payload.size()}})) {
        s.sent.fetch_add(1, std::memory_order_relaxed);
      }
    }
    b.due = MonoTime{};
    s.buffer.push_back(std::move(b));
    while (s.buffer.size() > s.spec.buffer_steps) s.buffer.pop_front();
  }
}

void PublisherHub::service_replay(Stream& s) {
  for (;;) {
    // A request is [identity, "", start_seq] from a DEALER or REQ.
    std::vector<std::string> frames;
    for (;;) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      if (zmq_msg_recv(&msg, s.router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        if (frames.empty()) return;
        break;
      }
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      int more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
      if (!more) break;
    }
    s.replay_requests.fetch_add(1, std::memory_order_relaxed);
    const bool delimited = frames.size() == 3 && frames[1].empty();
    const std::string* start_frame = delimited            ? &frames[2]
                                     : frames.size() == 2 ? &frames[1]
                                                          : nullptr;
    if (start_frame == nullptr || start_frame->size() != 8) {
      s.bad_requests.fetch_add(1, std::memory_order_relaxed);
      KVGATE_LOG_EVERY_MS(publisher_log(), spdlog::level::warn, 1000,
                          "bad replay request ({} frames) on {}", frames.size(), s.bound.replay);
      continue;
    }
    uint64_t start = 0;
    for (unsigned char c : *start_frame) start = (start << 8) | c;
    const std::string& id = frames[0];
    const bool topic = s.spec.shape == ReplayShape::kWithTopic;
    auto reply = [&](const uint8_t* seq, const std::string& payload) {
      // ROUTER: identity, then (if the client sent one) the empty delimiter, then the body.
      zmq_send(s.router, id.data(), id.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
      if (delimited) zmq_send(s.router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
      if (topic) {
        zmq_send(s.router, s.spec.topic.data(), s.spec.topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
      }
      zmq_send(s.router, seq, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
      zmq_send(s.router, payload.data(), payload.size(), ZMQ_DONTWAIT);
    };
    uint8_t seq[8];
    for (const Stream::Batch& b : s.buffer) {
      if (b.seq < start) continue;
      put_be64(b.seq, seq);
      reply(seq, b.payload);
      s.replayed.fetch_add(1, std::memory_order_relaxed);
    }
    put_be64(~uint64_t{0}, seq);
    reply(seq, std::string());
  }
}

void PublisherHub::run() {
  std::deque<Command> local;
  std::vector<zmq_pollitem_t> items;
  while (running_.load()) {
    {
      MutexLock l(&mu_);
      local.swap(commands_);
    }
    for (Command& c : local) {
      Stream& s = *streams_[c.stream];
      if (c.kind == Command::kPublish) {
        s.queue.push_back(std::move(c.batch));
      } else if (c.kind == Command::kLoad) {
        if (s.pub != nullptr) {
          (void)send_frames(s.pub, {{events::kLoadTopic.data(), events::kLoadTopic.size()},
                                    {c.batch.payload.data(), c.batch.payload.size()}});
        }
      } else {
        s.queue.clear();
        s.buffer.clear();
        s.restarts.fetch_add(1, std::memory_order_relaxed);
        if (Status st = bind(s, /*rebind=*/true); !st.ok()) {
          publisher_log()->error("publisher restart failed: {}", st.ToString());
        }
      }
    }
    local.clear();

    MonoTime now = Clock::real().now();
    std::optional<MonoTime> next_due;
    for (auto& s : streams_) {
      if (s->pub == nullptr) continue;
      send_due(*s, now);
      if (!s->queue.empty() && (!next_due || s->queue.front().due < *next_due)) {
        next_due = s->queue.front().due;
      }
    }

    items.clear();
    items.push_back({nullptr, wake_fd_, ZMQ_POLLIN, 0});
    for (auto& s : streams_) {
      if (s->router != nullptr) items.push_back({s->router, 0, ZMQ_POLLIN, 0});
    }
    long timeout_ms = -1;
    if (next_due) {
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(*next_due - now);
      timeout_ms = std::max<long>(1, static_cast<long>(wait.count()) + 1);
    }
    if (zmq_poll(items.data(), static_cast<int>(items.size()), timeout_ms) < 0) continue;
    if (items[0].revents & ZMQ_POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t n = read(wake_fd_, &v, sizeof(v));
    }
    for (auto& s : streams_) {
      if (s->router != nullptr) service_replay(*s);
    }
  }
}

}  // namespace kvgate::mock::detail
