#include "kvgate/index/lane_pool.h"

#include <algorithm>

#include "kvgate/core/numa.h"

namespace kvgate::index {

LanePool::LanePool(LanePoolOptions options) : options_(std::move(options)) {
  const size_t groups = options_.group_cpus.size() > 1 ? options_.group_cpus.size() : 1;
  for (size_t g = 0; g < groups; ++g) groups_.push_back(std::make_unique<Group>());
  const size_t n = std::max<size_t>(options_.lanes == 0 ? 1 : options_.lanes, groups);
  for (size_t i = 0; i < n; ++i) {
    threads_.emplace_back([this, g = i % groups] {
      if (groups_.size() > 1) pin_current_thread(options_.group_cpus[g]);
      run_lane(g);
    });
  }
}

LanePool::~LanePool() {
  flush_all();
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& g : groups_) g->ready_cv.notify_all();
  for (auto& t : threads_) t.join();
}

bool LanePool::submit(uint64_t key, Task task) {
  return enqueue(key, std::move(task), /*bounded=*/true);
}

void LanePool::submit_always(uint64_t key, Task task) {
  enqueue(key, std::move(task), /*bounded=*/false);
}

bool LanePool::has_room(uint64_t key) const {
  MutexLock lock(&mu_);
  auto it = keys_.find(key);
  return it == keys_.end() || it->second->tasks.size() < options_.max_queued_per_key;
}

bool LanePool::enqueue(uint64_t key, Task task, bool bounded) {
  {
    MutexLock lock(&mu_);
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
    group_of(key).ready.push_back(key);
  }
  group_of(key).ready_cv.notify_one();
  return true;
}

void LanePool::run_lane(size_t group) {
  Group& mine = *groups_[group];
  RelockableMutexLock lock(&mu_);
  for (;;) {
    while (!stopping_ && mine.ready.empty()) mine.ready_cv.wait(&mu_);
    if (mine.ready.empty()) return;  // stopping and nothing left
    const uint64_t id = mine.ready.front();
    mine.ready.pop_front();
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
      mine.ready.push_back(id);  // more to do: behind the keys that waited
      mine.ready_cv.notify_one();
    }
    done_cv_.notify_all();
  }
}

void LanePool::flush(uint64_t key) {
  MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  const Key* k = it->second.get();
  const uint64_t target = k->submitted;
  while (!flushed(key, k, target)) done_cv_.wait(&mu_);
}

bool LanePool::flushed(uint64_t key, const Key* k, uint64_t target) const {
  auto cur = keys_.find(key);
  return cur == keys_.end() || cur->second.get() != k || k->done >= target;
}

void LanePool::flush_all() {
  MutexLock lock(&mu_);
  while (queued_ != 0 || running_ != 0) done_cv_.wait(&mu_);
}

size_t LanePool::forget(uint64_t key) {
  MutexLock lock(&mu_);
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
  MutexLock lock(&mu_);
  return {submitted_, executed_, refused_, queued_};
}

}  // namespace kvgate::index
