#include "app/upstream_pool.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "boost/asio/post.hpp"

namespace kvgate::app {
namespace {

using IdleLists = absl::flat_hash_map<uint32_t, std::vector<std::unique_ptr<http::Connection>>>;
// Per thread: pool serial -> worker -> idle connections opened on this thread's context.
thread_local absl::flat_hash_map<uint64_t, IdleLists> tl_idle;
std::atomic<uint64_t> next_serial{1};

}  // namespace

UpstreamPool::UpstreamPool(http::IoPool& io, http::ClientOptions options, size_t idle_per_worker)
    : io_(io),
      options_(options),
      idle_per_worker_(idle_per_worker),
      serial_(next_serial.fetch_add(1)) {}

boost::asio::awaitable<Result<Lease>> UpstreamPool::acquire(WorkerId worker,
                                                            const std::string& host,
                                                            uint16_t port) {
  auto& lists = tl_idle[serial_];
  auto it = lists.find(worker.value());
  if (it != lists.end() && !it->second.empty()) {
    Lease lease{std::move(it->second.back()), true};
    it->second.pop_back();
    reuses_.fetch_add(1, std::memory_order_relaxed);
    co_return lease;
  }
  auto conn = co_await http::Connection::connect(host, port, options_);
  if (!conn.ok()) co_return conn.status();
  connects_.fetch_add(1, std::memory_order_relaxed);
  co_return Lease{std::move(*conn), false};
}

void UpstreamPool::release(WorkerId worker, std::unique_ptr<http::Connection> conn) {
  if (!conn || !conn->reusable()) return;
  auto& idle = tl_idle[serial_][worker.value()];
  if (idle.size() < idle_per_worker_) idle.push_back(std::move(conn));
}

void UpstreamPool::forget(WorkerId worker) {
  const uint64_t serial = serial_;
  for (size_t i = 0; i < io_.size(); ++i) {
    boost::asio::post(io_.context(i), [serial, worker] {
      auto it = tl_idle.find(serial);
      if (it != tl_idle.end()) it->second.erase(worker.value());
    });
  }
}

}  // namespace kvgate::app
