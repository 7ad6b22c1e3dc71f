// prefetch_line: asks for the cache line holding `p` without waiting for it.
//
// Not __builtin_prefetch: GCC 12 treats it as free of side effects, so a function whose only work
// is prefetching (a void const member, a helper) is found "pure" by its early IPA pass and every
// call to it is deleted before inlining. That silently turned the record map's prefetches into
// nothing (the software pipeline measured slower than none). An asm statement is never deleted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvgate::index::chain::detail {

inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Asks for the first `max_lines` lines of an array a walk is about to read in order. An event's
// hash arrays come from a decoder on another thread or a replay's memory, often in no cache of
// this core, and are a few lines long: the walk ends before the hardware's stream prefetcher has
// locked on, so without this each line is a miss the walk waits for in turn.
template <class T>
inline void prefetch_array(std::span<const T> a, size_t max_lines) {
  if (a.empty()) return;
  constexpr uintptr_t kLine = 64;
  const auto first = reinterpret_cast<uintptr_t>(a.data()) & ~(kLine - 1);
  const auto end = reinterpret_cast<uintptr_t>(a.data() + a.size());
  for (uintptr_t p = first; p < end && max_lines > 0; p += kLine, --max_lines) {
    prefetch_line(reinterpret_cast<const void*>(p));
  }
}

}  // namespace kvgate::index::chain::detail
