// Locks for all of kvgate, with annotations that clang's -Wthread-safety checks (the tsan preset
// builds with it) and that ThreadSanitizer can see.
//
// Mutex is an absl::Mutex (fast, reader-writer). Debian's Abseil is built without TSan, so
// absl::Mutex's own TSan annotations are compiled out and a TSan build would report every access
// it guards as a race; under TSan this wrapper reports each acquire and release itself (the same
// calls Abseil makes when built with TSan). Guarded members are written
// `T x KVGATE_GUARDED_BY(mu_);` and locked with `MutexLock lock(&mu_);`.
#pragma once

#include <condition_variable>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#define KVGATE_GUARDED_BY(x) ABSL_GUARDED_BY(x)
#define KVGATE_PT_GUARDED_BY(x) ABSL_PT_GUARDED_BY(x)
#define KVGATE_REQUIRES(...) ABSL_EXCLUSIVE_LOCKS_REQUIRED(__VA_ARGS__)
#define KVGATE_REQUIRES_SHARED(...) ABSL_SHARED_LOCKS_REQUIRED(__VA_ARGS__)
#define KVGATE_EXCLUDES(...) ABSL_LOCKS_EXCLUDED(__VA_ARGS__)
#define KVGATE_NO_THREAD_SAFETY_ANALYSIS ABSL_NO_THREAD_SAFETY_ANALYSIS

#if defined(__SANITIZE_THREAD__)
#define KVGATE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVGATE_TSAN 1
#endif
#endif
#ifdef KVGATE_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace kvgate {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() {
#ifdef KVGATE_TSAN
    __tsan_mutex_create(this, 0);
#endif
  }
  ~Mutex() {
#ifdef KVGATE_TSAN
    __tsan_mutex_destroy(this, 0);
#endif
  }
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

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
  // Tells the analysis (and, in debug builds, checks) that this thread holds the lock: where it
  // was taken through another name for the same mutex.
  void assert_held() const ABSL_ASSERT_EXCLUSIVE_LOCK() { mu_.AssertHeld(); }
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
#ifdef KVGATE_TSAN
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

// Exclusive lock for a scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

// Exclusive lock for a scope that may be let go and taken again within it: unlock() around work
// that must not hold it (a callback, a task), lock() after. Released at the end if held.
class ABSL_SCOPED_LOCKABLE RelockableMutexLock {
 public:
  explicit RelockableMutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->lock();
  }
  ~RelockableMutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_->unlock();
  }
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_->lock();
    held_ = true;
  }
  void unlock() ABSL_UNLOCK_FUNCTION() {
    held_ = false;
    mu_->unlock();
  }
  RelockableMutexLock(const RelockableMutexLock&) = delete;
  RelockableMutexLock& operator=(const RelockableMutexLock&) = delete;

 private:
  Mutex* mu_;
  bool held_ = true;
};

// Shared (reader) lock for a scope.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->lock_shared();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* mu_;
};

// A condition variable on a Mutex held exclusively. wait() releases it while blocked; call it in
// a loop that re-checks the condition.
class CondVar {
 public:
  void wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { cv_.wait(*mu); }
  template <class Duration>
  void wait_for(Mutex* mu, Duration d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    cv_.wait_for(*mu, d);
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace kvgate
