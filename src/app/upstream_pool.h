// UpstreamPool: keep-alive connections to the workers, per executor thread.
//
// A connection is bound to the io_context it was opened on, and a request's handler runs on its
// client connection's context, so each thread keeps its own idle list per worker: acquire and
// release touch only the calling thread's lists, without locks. A worker's idle connections are
// dropped on every thread when it leaves the fleet.
//
// Threading: acquire()/release() on pool threads (the calling coroutine's executor); forget()
// from anywhere (it posts to every context).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "boost/asio/awaitable.hpp"
#include "kvgate/core/ids.h"
#include "kvgate/core/result.h"
#include "kvgate/http/client.h"
#include "kvgate/http/io_pool.h"

namespace kvgate::app {

struct Lease {
  std::unique_ptr<http::Connection> conn;
  bool reused = false;  // from the idle list (may have been closed by the worker meanwhile)
};

class UpstreamPool {
 public:
  UpstreamPool(http::IoPool& io, http::ClientOptions options, size_t idle_per_worker);

  // An idle connection to the worker, or a new one.
  boost::asio::awaitable<Result<Lease>> acquire(WorkerId worker, const std::string& host,
                                                uint16_t port);
  // Returns a connection after a complete exchange; kept only if it is reusable.
  void release(WorkerId worker, std::unique_ptr<http::Connection> conn);
  // Closes the worker's idle connections on every thread.
  void forget(WorkerId worker);

  uint64_t connects() const { return connects_.load(std::memory_order_relaxed); }
  uint64_t reuses() const { return reuses_.load(std::memory_order_relaxed); }

 private:
  http::IoPool& io_;
  const http::ClientOptions options_;
  const size_t idle_per_worker_;
  const uint64_t serial_;  // distinguishes pools in the per-thread table
  std::atomic<uint64_t> connects_{0};
  std::atomic<uint64_t> reuses_{0};
};

}  // namespace kvgate::app
