#include "kvgate/events/engine_hash.h"

#include <openssl/sha.h>

#include "events/detail/cbor.h"

namespace kvgate::events {
namespace {

Digest sha256(std::string_view bytes) {
  Digest d;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d.data());
  return d;
}

std::string_view as_chars(const Digest& d) {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

uint64_t read_be64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

VllmSha256Cbor::VllmSha256Cbor(std::string_view seed) {
  std::string cbor;
  detail::cbor_text(&cbor, seed);
  none_hash_ = sha256(cbor);
}

Digest VllmSha256Cbor::block(const Digest& parent, std::span<const TokenId> tokens) const {
  return block(parent, tokens, std::string_view(&detail::kCborNull, 1));
}

Digest VllmSha256Cbor::block(const Digest& parent, std::span<const TokenId> tokens,
                             std::string_view extra_keys_cbor) const {
  // Reused per thread: the check hashes every stored block of every checked worker.
  thread_local std::string buf;
  buf.clear();
  detail::cbor_head(&buf, detail::kCborArray, 3);
  detail::cbor_bytes(&buf, as_chars(parent));
  detail::cbor_head(&buf, detail::kCborArray, tokens.size());
  for (TokenId t : tokens) detail::cbor_head(&buf, detail::kCborUint, t);
  if (extra_keys_cbor.empty()) {
    buf.push_back(detail::kCborNull);
  } else {
    buf.append(extra_keys_cbor);
  }
  return sha256(buf);
}

std::string VllmSha256Cbor::extra_keys_cbor(std::optional<std::string_view> lora_name,
                                            std::optional<std::string_view> cache_salt,
                                            size_t block_index) {
  const bool salt = cache_salt && !cache_salt->empty() && block_index == 0;
  const size_t n = (lora_name ? 1 : 0) + (salt ? 1 : 0);
  std::string out;
  if (n == 0) {
    out.push_back(detail::kCborNull);
    return out;
  }
  detail::cbor_head(&out, detail::kCborArray, n);
  if (lora_name) detail::cbor_text(&out, *lora_name);
  if (salt) detail::cbor_text(&out, *cache_salt);
  return out;
}

index::EngineHash VllmSha256Cbor::wire_value(const Digest& d) { return read_be64(d.data() + 24); }

std::optional<Digest> SglangSha256::salted_root(std::string_view salt) {
  if (salt.empty()) return std::nullopt;
  std::string buf("sglang-cache-salt-v1", 20);
  buf.push_back('\0');
  buf.append(salt);
  return sha256(buf);
}

Digest SglangSha256::block(const Digest* parent, std::span<const TokenId> tokens) {
  thread_local std::string buf;
  buf.clear();
  if (parent) buf.append(as_chars(*parent));
  for (TokenId t : tokens) {
    for (int i = 0; i < 4; ++i) buf.push_back(static_cast<char>((t >> (8 * i)) & 0xff));
  }
  return sha256(buf);
}

index::EngineHash SglangSha256::wire_value(const Digest& d) { return read_be64(d.data()); }

}  // namespace kvgate::events
