#include "events/detail/cbor.h"

namespace kvgate::events::detail {

void cbor_head(std::string* out, CborMajor major, uint64_t v) {
  const auto m = static_cast<uint8_t>(major << 5);
  auto put = [&](uint8_t ai, int bytes) {
    out->push_back(static_cast<char>(m | ai));
    for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  if (v < 24) {
    out->push_back(static_cast<char>(m | v));
  } else if (v <= 0xff) {
    put(24, 1);
  } else if (v <= 0xffff) {
    put(25, 2);
  } else if (v <= 0xffffffffULL) {
    put(26, 4);
  } else {
    put(27, 8);
  }
}

void cbor_text(std::string* out, std::string_view s) {
  cbor_head(out, kCborText, s.size());
  out->append(s);
}

void cbor_bytes(std::string* out, std::string_view s) {
  cbor_head(out, kCborBytes, s.size());
  out->append(s);
}

}  // namespace kvgate::events::detail
