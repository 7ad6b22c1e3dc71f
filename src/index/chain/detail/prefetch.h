// prefetch_line: asks for the cache line holding `p` without waiting for it.
//
// Not __builtin_prefetch: GCC 12 treats it as free of side effects, so a function whose only work
// is prefetching (a void const member, a helper) is found "pure" by its early IPA pass and every
// call to it is deleted before inlining. That silently turned the record map's prefetches into
// nothing (the software pipeline measured slower than none). An asm statement is never deleted.
#pragma once

namespace kvgate::index::chain::detail {

inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace kvgate::index::chain::detail
