// Versioned<T>: a value that readers on hot paths take without a lock while a rare writer
// replaces it (a configuration reload changing thresholds or keys).
//
// A reader gets a reference to an immutable version. Every version stays alive until the holder
// goes, since a reader may still be using an older one; so it suits values replaced a handful of
// times in a process's life, not a stream of updates (each publish() keeps one more T).
//
// Threading: get() from any thread, lock-free (one acquire load); publish() from any thread,
// writers serialized by a mutex. A reader that calls get() twice may see two versions.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "kvgate/core/thread_annotations.h"

namespace kvgate {

template <class T>
class Versioned {
 public:
  explicit Versioned(T first) { publish(std::move(first)); }
  Versioned(const Versioned&) = delete;
  Versioned& operator=(const Versioned&) = delete;

  const T& get() const { return *current_.load(std::memory_order_acquire); }

  void publish(T next) {
    MutexLock lock(&mu_);
    versions_.push_back(std::make_unique<const T>(std::move(next)));
    current_.store(versions_.back().get(), std::memory_order_release);
  }

  // Versions published so far (the first included).
  size_t versions() const {
    MutexLock lock(&mu_);
    return versions_.size();
  }

 private:
  std::atomic<const T*> current_{nullptr};
  mutable Mutex mu_;
  std::vector<std::unique_ptr<const T>> versions_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace kvgate
