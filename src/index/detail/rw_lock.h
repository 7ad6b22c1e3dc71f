// RwLock: an absl::Mutex used as a reader-writer lock that ThreadSanitizer can see.
//
// Debian's Abseil is not built with TSan, so absl::Mutex's own TSan annotations are compiled out
// and a TSan build reports every access it guards as a race. Under TSan this wrapper tells the
// runtime about each acquire and release (the same calls Abseil makes when built with TSan);
// otherwise it is the bare mutex. Lock annotations stay checkable by -Wthread-safety.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#if defined(__SANITIZE_THREAD__)
#define KVGATE_INDEX_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVGATE_INDEX_TSAN 1
#endif
#endif

#ifdef KVGATE_INDEX_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace kvgate::index::detail {

class ABSL_LOCKABLE RwLock {
 public:
  RwLock() {
#ifdef KVGATE_INDEX_TSAN
    __tsan_mutex_create(this, 0);
#endif
  }
  ~RwLock() {
#ifdef KVGATE_INDEX_TSAN
    __tsan_mutex_destroy(this, 0);
#endif
  }
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    pre_lock(0);
    mu_.WriterLock();
    post_lock(0);
  }
  void unlock() ABSL_UNLOCK_FUNCTION() {
    pre_unlock(0);
    mu_.WriterUnlock();
    post_unlock(0);
  }
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() {
    pre_lock(kRead);
    mu_.ReaderLock();
    post_lock(kRead);
  }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() {
    pre_unlock(kRead);
    mu_.ReaderUnlock();
    post_unlock(kRead);
  }

 private:
#ifdef KVGATE_INDEX_TSAN
  static constexpr unsigned kRead = __tsan_mutex_read_lock;
  void pre_lock(unsigned f) { __tsan_mutex_pre_lock(this, f); }
  void post_lock(unsigned f) { __tsan_mutex_post_lock(this, f, 0); }
  void pre_unlock(unsigned f) { __tsan_mutex_pre_unlock(this, f); }
  void post_unlock(unsigned f) { __tsan_mutex_post_unlock(this, f); }
#else
  static constexpr unsigned kRead = 0;
  void pre_lock(unsigned) {}
  void post_lock(unsigned) {}
  void pre_unlock(unsigned) {}
  void post_unlock(unsigned) {}
#endif
  absl::Mutex mu_;
};

class ABSL_SCOPED_LOCKABLE WriteLock {
 public:
  explicit WriteLock(RwLock& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~WriteLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  RwLock& mu_;
};

class ABSL_SCOPED_LOCKABLE ReadLock {
 public:
  explicit ReadLock(RwLock& mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReadLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  RwLock& mu_;
};

}  // namespace kvgate::index::detail
