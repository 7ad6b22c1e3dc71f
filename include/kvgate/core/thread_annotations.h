// Lock annotations checked by clang's -Wthread-safety (the tsan preset builds with it) and the
// mutex types that carry them. Guarded members are written `T x KVGATE_GUARDED_BY(mu_);`.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#define KVGATE_GUARDED_BY(x) ABSL_GUARDED_BY(x)
#define KVGATE_PT_GUARDED_BY(x) ABSL_PT_GUARDED_BY(x)
#define KVGATE_REQUIRES(...) ABSL_EXCLUSIVE_LOCKS_REQUIRED(__VA_ARGS__)
#define KVGATE_REQUIRES_SHARED(...) ABSL_SHARED_LOCKS_REQUIRED(__VA_ARGS__)
#define KVGATE_EXCLUDES(...) ABSL_LOCKS_EXCLUDED(__VA_ARGS__)
#define KVGATE_NO_THREAD_SAFETY_ANALYSIS ABSL_NO_THREAD_SAFETY_ANALYSIS

namespace kvgate {
using Mutex = absl::Mutex;          // annotated; supports shared (reader) locking
using MutexLock = absl::MutexLock;  // exclusive scope
using ReaderMutexLock = absl::ReaderMutexLock;
using WriterMutexLock = absl::WriterMutexLock;
}  // namespace kvgate
