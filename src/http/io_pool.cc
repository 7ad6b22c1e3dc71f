#include "kvgate/http/io_pool.h"

#include <algorithm>

#include "kvgate/core/numa.h"

namespace kvgate::http {

IoPool::IoPool(size_t threads, std::vector<std::vector<int>> node_cpus) {
  if (node_cpus.size() > 1) node_cpus_ = std::move(node_cpus);
  threads = std::max<size_t>(threads, nodes());
  for (size_t i = 0; i < threads; ++i) {
    // Concurrency hint 1: each context is only ever run by its own thread.
    contexts_.push_back(std::make_unique<boost::asio::io_context>(1));
    guards_.emplace_back(boost::asio::make_work_guard(*contexts_.back()));
  }
}

IoPool::~IoPool() { stop(); }

void IoPool::start() {
  if (started_) return;
  started_ = true;
  for (size_t i = 0; i < contexts_.size(); ++i) {
    threads_.emplace_back([c = contexts_[i].get(), &cpus = cpus_of(i)] {
      // The node's CPUs before the first handler runs, so every allocation of the thread's
      // first-touch memory lands on its node.
      pin_current_thread(cpus);
      c->run();
    });
  }
}

void IoPool::stop() {
  for (auto& g : guards_) g.reset();
  for (auto& ctx : contexts_) ctx->stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

const std::vector<int>& IoPool::cpus_of(size_t context) const {
  static const std::vector<int> kAnywhere;
  return node_cpus_.empty() ? kAnywhere : node_cpus_[node_of(context)];
}

boost::asio::io_context& IoPool::next() {
  return *contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
}

bool IoPool::in_pool_thread() const {
  for (const auto& ctx : contexts_) {
    if (ctx->get_executor().running_in_this_thread()) return true;
  }
  return false;
}

}  // namespace kvgate::http
