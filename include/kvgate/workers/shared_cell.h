// SharedCell<T>: a shared_ptr<const T> that the control path replaces and any thread copies: how
// the registry publishes fleet snapshots and a Worker its description to the request path.
//
// A mutex guards the pointer for one shared_ptr copy (load) or swap (store); the value a store
// replaces is released after the lock is dropped, so freeing a big snapshot never holds a reader
// up. Not std::atomic<std::shared_ptr<T>>: libstdc++ 12 guards that with a lock bit inside the
// pointer that ThreadSanitizer cannot see as a lock (load() drops it with a relaxed fetch_sub, so
// nothing orders a reader's read of the pointer before the next store's write), and the tsan
// build reported every publish that raced a read as a data race. A std::mutex costs what the lock
// bit does when uncontended (one atomic to lock, one to unlock), less when readers collide, and
// TSan sees it. (std::mutex rather than kvgate::Mutex: absl::Mutex took twice as long here.)
//
// Threading: load() and store() from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace kvgate::workers {

template <class T>
class SharedCell {
 public:
  explicit SharedCell(std::shared_ptr<const T> value) : value_(std::move(value)) {}
  SharedCell(const SharedCell&) = delete;
  SharedCell& operator=(const SharedCell&) = delete;

  std::shared_ptr<const T> load() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }
  void store(std::shared_ptr<const T> value) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      value_.swap(value);
    }
    // `value` now holds the previous pointer; it is released here, outside the lock.
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const T> value_;  // guarded by mu_ (a std::mutex: not checked by -Wthread-safety)
};

}  // namespace kvgate::workers
