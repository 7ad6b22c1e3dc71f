#include "kvgate/http/io_pool.h"

#include <algorithm>

namespace kvgate::http {

IoPool::IoPool(size_t threads) {
  threads = std::max<size_t>(threads, 1);
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
  for (auto& ctx : contexts_) {
    threads_.emplace_back([c = ctx.get()] { c->run(); });
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
