// Lock: the events module's mutex, with lock annotations for -Wthread-safety and visible to
// ThreadSanitizer. Debian's Abseil is built without TSan, so absl::Mutex hides its happens-before
// edges from a TSan build; std::mutex goes through the pthread calls TSan intercepts. Waiting is
// CondVar::wait() in a loop, under the lock.
#pragma once

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace kvgate::events::detail {

class ABSL_LOCKABLE Lock {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE LockGuard {
 public:
  explicit LockGuard(Lock& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~LockGuard() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& mu_;
};

class CondVar {
 public:
  // Releases `mu` while waiting; the caller holds it before and after.
  void wait(Lock& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { cv_.wait(mu); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace kvgate::events::detail
