// A msgpack-c packer stream that appends to a caller-owned std::string.
#pragma once

#include <cstddef>
#include <string>

#include <msgpack.hpp>

namespace kvgate::events::detail {

struct StringSink {
  std::string* out;
  void write(const char* data, size_t n) { out->append(data, n); }
};
using Packer = msgpack::packer<StringSink>;

inline void pack_str(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

}  // namespace kvgate::events::detail
