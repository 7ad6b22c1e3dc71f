// UpstreamPool: keep-alive connections to the workers, per executor thread.
//
// A connection is bound to the io_context it was opened on, and a request's handler runs on its
// client connection's context, so each thread keeps its own idle list per worker: acquire and
// release touch only the calling thread's lists, without locks. A worker's idle connections are
// dropped on every thread when it leaves the fleet.
//
// Engines close keep-alive connections they find idle (uvicorn, which vLLM and SGLang serve with,
// after 5 s), and a request written into such a connection fails. So an idle connection is never
// handed out once it has rested longer than `idle_timeout` (set below the engines' own), nor when
// a non-blocking check finds the peer has closed it; a sweep on every thread closes the expired
// ones so their descriptors do not linger. What slips through (the engine closing it just as the
// request arrives) fails with Connection::closed_by_peer(), and the caller sends again on a
// connection acquire(..., kFresh) opens.
//
// Threading: acquire()/release() on pool threads (the calling coroutine's executor); forget(),
// start() and stop() from anywhere (they post to every context); stats from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "boost/asio/awaitable.hpp"
#include "boost/asio/steady_timer.hpp"
#include "kvgate/core/ids.h"
#include "kvgate/core/result.h"
#include "kvgate/http/client.h"
#include "kvgate/http/io_pool.h"
#include "kvgate/workers/worker.h"

namespace kvgate::app {

struct UpstreamPoolOptions {
  http::ClientOptions client;
  // Verifies https workers' certificates; connections to http workers never use it.
  std::shared_ptr<boost::asio::ssl::context> worker_tls;
  size_t idle_per_worker = 64;  // idle connections kept per worker and executor thread
  // An idle connection older than this is closed, never reused (below the engines' keep-alive).
  std::chrono::milliseconds idle_timeout{4'000};
};

struct Lease {
  std::unique_ptr<http::Connection> conn;
  bool reused = false;  // from the idle list (the worker may still close it under the request)
};

// Why idle connections were closed instead of reused.
struct UpstreamPoolStats {
  uint64_t connects = 0;
  uint64_t reuses = 0;
  uint64_t expired = 0;         // rested longer than idle_timeout
  uint64_t closed_by_peer = 0;  // the worker had closed it (found before reuse)
};

class UpstreamPool {
 public:
  enum class Source { kPooled, kFresh };

  UpstreamPool(http::IoPool& io, UpstreamPoolOptions options);
  ~UpstreamPool();
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // Starts the per-thread sweep of expired idle connections. Until then (and after stop())
  // released connections are closed, not kept.
  void start();
  // Stops the sweep and closes every idle connection.
  void stop();

  // A live idle connection to the worker, or a new one (always new with kFresh); TLS for an https
  // worker.
  boost::asio::awaitable<Result<Lease>> acquire(const workers::Worker& worker,
                                                Source source = Source::kPooled);
  // Returns a connection after a complete exchange; kept only if it is reusable.
  void release(WorkerId worker, std::unique_ptr<http::Connection> conn);
  // Closes the worker's idle connections on every thread.
  void forget(WorkerId worker);

  UpstreamPoolStats stats() const;
  std::chrono::milliseconds idle_timeout() const { return options_.idle_timeout; }

 private:
  struct Shared;  // the running flag and the counters, shared with the sweep timers
  static void arm_sweep(std::shared_ptr<boost::asio::steady_timer> timer,
                        std::shared_ptr<Shared> shared, uint64_t serial,
                        std::chrono::milliseconds timeout);

  http::IoPool& io_;
  const UpstreamPoolOptions options_;
  const uint64_t serial_;  // distinguishes pools in the per-thread table
  const std::shared_ptr<Shared> shared_;
};

}  // namespace kvgate::app
