// The sliver of CBOR (RFC 8949) that vLLM's sha256_cbor hashes: canonical (shortest) heads for
// unsigned and negative ints, byte and text strings, arrays, and the simple values
// false/true/null. Python's cbor2.dumps(canonical=True) writes exactly these bytes for the values
// vLLM feeds it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::events::detail {

enum CborMajor : uint8_t {
  kCborUint = 0,
  kCborNegInt = 1,
  kCborBytes = 2,
  kCborText = 3,
  kCborArray = 4,
};
inline constexpr char kCborFalse = '\xf4';
inline constexpr char kCborTrue = '\xf5';
inline constexpr char kCborNull = '\xf6';

// Appends the shortest head for `major` with argument `v`.
void cbor_head(std::string* out, CborMajor major, uint64_t v);
void cbor_text(std::string* out, std::string_view s);
void cbor_bytes(std::string* out, std::string_view s);

}  // namespace kvgate::events::detail
