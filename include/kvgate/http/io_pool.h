// IoPool: the executor pool. N io_contexts, each run by exactly one thread.
//
// One thread per context (not N threads on one context) lets a component pin itself to a context
// and then own its state without locks: everything posted to context i runs on thread i, in order.
// The gateway spreads connections over the contexts; the mock engine pins each worker (its HTTP
// server, its scheduler timer, its connections) to one context.
//
// Threading: size(), context() and next() are safe from any thread. start() once; stop() and
// join() from a thread outside the pool (join() from inside would wait for itself). Work still
// queued when stop() runs is dropped; destroying the pool stops and joins it.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"

namespace kvgate::http {

class IoPool {
 public:
  // `threads` contexts. With `node_cpus` (one CPU list per NUMA node, two or more), context i
  // belongs to node i % nodes and its thread runs on that node's CPUs only; there are at least as
  // many contexts as nodes, so next() alternates between the nodes.
  explicit IoPool(size_t threads, std::vector<std::vector<int>> node_cpus = {});
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Starts one thread per context. Contexts keep running while idle until stop().
  void start();
  // Stops every context (pending handlers are abandoned) and joins the threads.
  void stop();

  size_t size() const { return contexts_.size(); }
  boost::asio::io_context& context(size_t i) { return *contexts_[i % contexts_.size()]; }
  // Round-robin over the contexts, for spreading connections.
  boost::asio::io_context& next();
  // Whether the calling thread is one of the pool's threads.
  bool in_pool_thread() const;
  // The NUMA nodes the pool spans (1 without node_cpus), and context i's node.
  size_t nodes() const { return node_cpus_.empty() ? 1 : node_cpus_.size(); }
  size_t node_of(size_t context) const { return context % nodes(); }
  // The CPUs context i's thread may run on (empty: wherever the OS puts it).
  const std::vector<int>& cpus_of(size_t context) const;

 private:
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::vector<std::vector<int>> node_cpus_;  // empty, or two or more nodes
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<std::optional<Guard>> guards_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
  bool started_ = false;
};

}  // namespace kvgate::http
