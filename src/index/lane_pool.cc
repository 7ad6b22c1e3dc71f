#include "kvgate/index/lane_pool.h"

namespace kvgate::index {

LanePool::LanePool(LanePoolOptions options) : options_(options) {
  const uint32_t n = options_.lanes == 0 ? 1 : options_.lanes;
  for (uint32_t i = 0; i < n; ++i) threads_.emplace_back([this] { run_lane(); });
}

LanePool::~LanePool() {
  flush_all();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

bool LanePool::submit(uint64_t key, Task task) {
  return enqueue(key, std::move(task), /*bounded=*/true);
}

void LanePool::submit_always(uint64_t key, Task task) {
  enqueue(key, std::move(task), /*bounded=*/false);
}

bool LanePool::has_room(uint64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keys_.find(key);
  return it == keys_.end() || it->second->tasks.size() < options_.max_queued_per_key;
}

bool LanePool::enqueue(uint64_t key, Task task, bool bounded) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& k = keys_[key];
    if (!k) k = std::make_unique<Key>();
    k->forgotten = false;  // re-used after forget(): its lane must keep it
    if (bounded && k->tasks.size() >= options_.max_queued_per_key) {
      ++refused_;
      return false;
    }
    k->tasks.push_back(std::move(task));
    ++k->submitted;
    ++submitted_;
    ++queued_;
    if (k->scheduled) return true;
    k->scheduled = true;
    ready_.push_back(key);
  }
  ready_cv_.notify_one();
  return true;
}

void LanePool::run_lane() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ready_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
    if (ready_.empty()) return;  // stopping and nothing left
    const uint64_t id = ready_.front();
    ready_.pop_front();
    Key* k = keys_.at(id).get();
    ++running_;
    for (uint32_t n = 0; n < options_.burst && !k->tasks.empty(); ++n) {
      Task task = std::move(k->tasks.front());
      k->tasks.pop_front();
      --queued_;
      lock.unlock();
      task();
      lock.lock();
      ++k->done;
      ++executed_;
    }
    --running_;
    if (k->forgotten) {
      keys_.erase(id);
    } else if (k->tasks.empty()) {
      k->scheduled = false;
    } else {
      ready_.push_back(id);  // more to do: behind the keys that waited
      ready_cv_.notify_one();
    }
    done_cv_.notify_all();
  }
}

void LanePool::flush(uint64_t key) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  Key* k = it->second.get();
  const uint64_t target = k->submitted;
  done_cv_.wait(lock, [&] {
    auto cur = keys_.find(key);
    return cur == keys_.end() || cur->second.get() != k || k->done >= target;
  });
}

void LanePool::flush_all() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return queued_ == 0 && running_ == 0; });
}

size_t LanePool::forget(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return 0;
  Key* k = it->second.get();
  const size_t dropped = k->tasks.size();
  k->tasks.clear();
  k->done += dropped;
  queued_ -= dropped;
  if (k->scheduled) {
    k->forgotten = true;  // the lane holding it (or about to pop it) erases it
  } else {
    keys_.erase(it);
  }
  done_cv_.notify_all();
  return dropped;
}

LanePoolStats LanePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {submitted_, executed_, refused_, queued_};
}

}  // namespace kvgate::index
