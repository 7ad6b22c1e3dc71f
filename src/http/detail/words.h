// Eight bytes of a head at a time: the constants and tests the parser's and the writer's word
// tests share. Each holds per byte (no carry or borrow crosses a byte where its comment says so).
#pragma once

#include <cstdint>
#include <cstring>

namespace kvgate::http::detail {

inline constexpr uint64_t kEachByte = 0x0101010101010101;  // 0x01 in every byte
inline constexpr uint64_t kHighBits = kEachByte * 0x80;    // every byte's high bit

// The eight bytes at `p`, in memory order, from any alignment.
inline uint64_t load_word(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

// Nonzero when some byte of `w` is zero. Exact for "some byte" (a borrow out of a zero byte may
// flag the byte above it too, which only matters to a caller asking which byte).
inline uint64_t has_zero_byte(uint64_t w) { return (w - kEachByte) & ~w & kHighBits; }

// Nonzero when some byte of `w` is `c`.
inline uint64_t has_byte(uint64_t w, unsigned char c) { return has_zero_byte(w ^ (kEachByte * c)); }

}  // namespace kvgate::http::detail
