#include "app/upstream_pool.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"

namespace kvgate::app {
namespace net = boost::asio;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

// A connection back in the pool for less than this is taken without peeking at its socket (a
// syscall on every request under load): engines close idle connections after seconds, and a
// close that races a request anyway is sent again at once on a fresh connection (the proxy's
// stale retry), never held against the worker.
constexpr auto kPeekAfter = std::chrono::milliseconds(50);

struct Idle {
  std::unique_ptr<http::Connection> conn;
  SteadyTime since;  // when it was released
};
// Oldest first: a release appends, so the back is the most recently used connection.
using IdleList = std::vector<Idle>;
using IdleLists = absl::flat_hash_map<uint32_t, IdleList>;
// Per thread: pool serial -> worker -> idle connections opened on this thread's context.
thread_local absl::flat_hash_map<uint64_t, IdleLists> tl_idle;
std::atomic<uint64_t> next_serial{1};

// Drops the connections of `list` that rested longer than `timeout`; returns how many.
size_t drop_expired(IdleList& list, SteadyTime now, std::chrono::milliseconds timeout) {
  const auto fresh = std::find_if(list.begin(), list.end(),
                                  [&](const Idle& i) { return now - i.since <= timeout; });
  const size_t n = static_cast<size_t>(fresh - list.begin());
  list.erase(list.begin(), fresh);
  return n;
}

}  // namespace

struct UpstreamPool::Shared {
  std::atomic<bool> running{false};
  std::atomic<uint64_t> connects{0};
  std::atomic<uint64_t> reuses{0};
  std::atomic<uint64_t> expired{0};
  std::atomic<uint64_t> closed_by_peer{0};
};

UpstreamPool::UpstreamPool(http::IoPool& io, UpstreamPoolOptions options)
    : io_(io),
      options_(options),
      serial_(next_serial.fetch_add(1)),
      shared_(std::make_shared<Shared>()) {}

UpstreamPool::~UpstreamPool() { shared_->running = false; }

void UpstreamPool::start() {
  if (shared_->running.exchange(true)) return;
  for (size_t i = 0; i < io_.size(); ++i) {
    auto timer = std::make_shared<net::steady_timer>(io_.context(i));
    arm_sweep(std::move(timer), shared_, serial_, options_.idle_timeout);
  }
}

void UpstreamPool::stop() {
  shared_->running = false;
  const uint64_t serial = serial_;
  for (size_t i = 0; i < io_.size(); ++i) {
    net::post(io_.context(i), [serial] { tl_idle.erase(serial); });
  }
}

// Runs on the timer's context every half idle timeout (at most a second), closing what expired.
// It holds no pointer to the pool, only the shared counters, so it outlives the pool harmlessly.
void UpstreamPool::arm_sweep(std::shared_ptr<net::steady_timer> timer,
                             std::shared_ptr<Shared> shared, uint64_t serial,
                             std::chrono::milliseconds timeout) {
  const auto period = std::clamp<std::chrono::milliseconds>(
      timeout / 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  timer->expires_after(period);
  net::steady_timer& t = *timer;
  t.async_wait([timer = std::move(timer), shared = std::move(shared), serial,
                timeout](const boost::system::error_code& ec) mutable {
    if (ec || !shared->running) return;
    auto it = tl_idle.find(serial);
    if (it != tl_idle.end()) {
      const SteadyTime now = std::chrono::steady_clock::now();
      for (auto& [worker, list] : it->second) {
        shared->expired.fetch_add(drop_expired(list, now, timeout), std::memory_order_relaxed);
      }
    }
    arm_sweep(std::move(timer), std::move(shared), serial, timeout);
  });
}

net::awaitable<Result<Lease>> UpstreamPool::acquire(const workers::Worker& worker, Source source) {
  if (source == Source::kPooled) {
    auto& lists = tl_idle[serial_];
    auto it = lists.find(worker.id().value());
    if (it != lists.end()) {
      IdleList& list = it->second;
      const SteadyTime now = std::chrono::steady_clock::now();
      shared_->expired.fetch_add(drop_expired(list, now, options_.idle_timeout),
                                 std::memory_order_relaxed);
      while (!list.empty()) {
        const bool rested = now - list.back().since >= kPeekAfter;
        std::unique_ptr<http::Connection> conn = std::move(list.back().conn);
        list.pop_back();
        if (!conn->idle_and_open(/*peek=*/rested)) {
          shared_->closed_by_peer.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        shared_->reuses.fetch_add(1, std::memory_order_relaxed);
        co_return Lease{std::move(conn), true};
      }
    }
  }
  http::ClientOptions options = options_.client;
  if (worker.tls()) options.tls = options_.worker_tls;
  auto conn = co_await http::Connection::connect(worker.host(), worker.port(), options);
  if (!conn.ok()) co_return conn.status();
  shared_->connects.fetch_add(1, std::memory_order_relaxed);
  co_return Lease{std::move(*conn), false};
}

void UpstreamPool::release(WorkerId worker, std::unique_ptr<http::Connection> conn) {
  if (!conn || !conn->reusable() || !shared_->running) return;
  IdleList& idle = tl_idle[serial_][worker.value()];
  if (idle.size() >= options_.idle_per_worker) idle.erase(idle.begin());  // the stalest goes
  idle.push_back({std::move(conn), std::chrono::steady_clock::now()});
}

void UpstreamPool::forget(WorkerId worker) {
  const uint64_t serial = serial_;
  for (size_t i = 0; i < io_.size(); ++i) {
    net::post(io_.context(i), [serial, worker] {
      auto it = tl_idle.find(serial);
      if (it != tl_idle.end()) it->second.erase(worker.value());
    });
  }
}

UpstreamPoolStats UpstreamPool::stats() const {
  return {.connects = shared_->connects.load(std::memory_order_relaxed),
          .reuses = shared_->reuses.load(std::memory_order_relaxed),
          .expired = shared_->expired.load(std::memory_order_relaxed),
          .closed_by_peer = shared_->closed_by_peer.load(std::memory_order_relaxed)};
}

}  // namespace kvgate::app
