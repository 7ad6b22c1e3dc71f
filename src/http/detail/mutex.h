// Mutex: an annotated std::mutex. Debian's Abseil is built without ThreadSanitizer support, so a
// TSan build cannot see absl::Mutex (kvgate::Mutex) and reports every access it guards as a race;
// std::mutex goes through pthread, which TSan intercepts. The annotations keep the lock
// discipline checkable by clang's -Wthread-safety. (The index module carries its own RwLock for
// the same reason; a shared one in core would replace both.)
#pragma once

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace kvgate::http::detail {

class ABSL_LOCKABLE Mutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE Lock {
 public:
  explicit Lock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->lock(); }
  ~Lock() ABSL_UNLOCK_FUNCTION() { mu_->unlock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  Mutex* mu_;
};

}  // namespace kvgate::http::detail
