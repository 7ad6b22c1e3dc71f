// Whether this test binary runs under a sanitizer, and how much slower that makes it.
//
// Tests that assert a speed (a parse under N ms, a rebuild within N s) or size their corpus by
// what fits in ctest's timeout read it here, so every such allowance is one figure.
#pragma once

namespace kvgate::testing_support {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
#else
inline constexpr bool kUnderSanitizer = false;
#endif

// Whether this binary runs under ThreadSanitizer, whose reports Debian's gRPC (not built with it)
// sets off in every call: tests that start a gRPC server leave it out there (see the Makefile).
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kUnderThreadSanitizer = true;
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif

// What a speed bound is multiplied by: ThreadSanitizer runs code 5-15x slower, AddressSanitizer
// about 2x, and both here build at -O1.
inline constexpr double kSlowdown = kUnderSanitizer ? 4.0 : 1.0;

}  // namespace kvgate::testing_support
