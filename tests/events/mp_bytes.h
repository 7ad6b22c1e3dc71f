// A tiny msgpack *byte* builder for golden tests. It shares no code with kvgate's encoder or
// msgpack-c, so a test that compares the two cannot pass on a mistake they share. Every method
// writes the format byte the msgpack spec assigns; the `*_wide` methods force a non-minimal form
// (engines' packers differ in how small they make things, and decoders must accept all of them).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kvgate::events::testing {

class Mp {
 public:
  Mp& byte(uint8_t b) {
    b_.push_back(static_cast<char>(b));
    return *this;
  }
  Mp& be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) byte(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Mp& arr(uint32_t n) {
    if (n < 16) return byte(0x90 | n);
    if (n <= 0xffff) return byte(0xdc).be(n, 2);
    return byte(0xdd).be(n, 4);
  }
  Mp& map(uint32_t n) {
    if (n < 16) return byte(0x80 | n);
    if (n <= 0xffff) return byte(0xde).be(n, 2);
    return byte(0xdf).be(n, 4);
  }
  Mp& str(std::string_view s) {
    if (s.size() < 32)
      byte(0xa0 | s.size());
    else if (s.size() <= 0xff)
      byte(0xd9).be(s.size(), 1);
    else if (s.size() <= 0xffff)
      byte(0xda).be(s.size(), 2);
    else
      byte(0xdb).be(s.size(), 4);
    b_.append(s);
    return *this;
  }
  Mp& bin(std::string_view s) {
    if (s.size() <= 0xff)
      byte(0xc4).be(s.size(), 1);
    else if (s.size() <= 0xffff)
      byte(0xc5).be(s.size(), 2);
    else
      byte(0xc6).be(s.size(), 4);
    b_.append(s);
    return *this;
  }
  Mp& uint(uint64_t v) {
    if (v < 128) return byte(static_cast<uint8_t>(v));
    if (v <= 0xff) return byte(0xcc).be(v, 1);
    if (v <= 0xffff) return byte(0xcd).be(v, 2);
    if (v <= 0xffffffffULL) return byte(0xce).be(v, 4);
    return byte(0xcf).be(v, 8);
  }
  Mp& sint(int64_t v) {
    if (v >= 0) return uint(static_cast<uint64_t>(v));
    if (v >= -32) return byte(static_cast<uint8_t>(v));
    if (v >= -128) return byte(0xd0).be(static_cast<uint64_t>(v), 1);
    if (v >= -32768) return byte(0xd1).be(static_cast<uint64_t>(v), 2);
    if (v >= INT32_MIN) return byte(0xd2).be(static_cast<uint64_t>(v), 4);
    return byte(0xd3).be(static_cast<uint64_t>(v), 8);
  }
  Mp& u64_wide(uint64_t v) { return byte(0xcf).be(v, 8); }
  Mp& i64_wide(int64_t v) { return byte(0xd3).be(static_cast<uint64_t>(v), 8); }
  Mp& nil() { return byte(0xc0); }
  Mp& boolean(bool v) { return byte(v ? 0xc3 : 0xc2); }
  Mp& f64(double d) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    return byte(0xcb).be(u, 8);
  }
  Mp& f32(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return byte(0xca).be(u, 4);
  }
  Mp& raw(std::string_view bytes) {
    b_.append(bytes);
    return *this;
  }
  Mp& append(const Mp& o) { return raw(o.b_); }

  const std::string& bytes() const { return b_; }
  size_t size() const { return b_.size(); }

 private:
  std::string b_;
};

// "0a ff" -> bytes (whitespace ignored).
inline std::string unhex(std::string_view hex) {
  std::string out;
  int hi = -1;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      continue;
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<char>(hi << 4 | v));
      hi = -1;
    }
  }
  return out;
}

inline std::string hex(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out.push_back(d[static_cast<uint8_t>(c) >> 4]);
    out.push_back(d[static_cast<uint8_t>(c) & 15]);
  }
  return out;
}

}  // namespace kvgate::events::testing
