// The engines' own block hash schemes, reproduced so that the mock engine publishes the hashes a
// real engine would, and so that the gateway can tell when a worker hashes differently from what
// it was told (another algorithm, block size or tokenizer): a mismatch rate per worker.
//
//   vLLM sha256_cbor: digest(block) = SHA-256(canonical CBOR of [parent digest as bytes,
//     [token ids as uints], extra keys or nil]); the parent of block 0 is NONE_HASH =
//     SHA-256(CBOR text string of the seed), the seed being PYTHONHASHSEED when set, else
//     "vllm-none-hash" (vLLM releases before that default drew 32 random bytes per process:
//     such a worker can only be checked with PYTHONHASHSEED set). The extra keys of a block are
//     nil or the tuple (LoRA name if any, (mm identifier, offset) per mm item, cache salt on
//     block 0 only if non-empty, prompt-embeds digest). On the wire: the digest's last 8 bytes
//     read big-endian (uint64).
//   SGLang: digest(block) = SHA-256(parent digest (32 bytes; absent for the first block of an
//     unsalted chain) || each token as uint32 little-endian; a bigram page hashes both words of
//     every [a, b] pair); a salted chain's first parent is SHA-256("sglang-cache-salt-v1\0" +
//     salt). On the wire: the first 8 bytes big-endian as a signed int64 (here stored as its
//     uint64 bit pattern).
//
// Facts checked against vLLM's vllm/utils/hashing.py (sha256_cbor: cbor2.dumps(canonical=True)),
// vllm/v1/core/kv_cache_utils.py (init_none_hash, hash_block_tokens,
// generate_block_hash_extra_keys) and SGLang's get_hash_str / hash_str_to_int64.
//
// Threading: all members are const; safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::events {

using Digest = std::array<uint8_t, 32>;

class VllmSha256Cbor {
 public:
  static constexpr std::string_view kDefaultSeed = "vllm-none-hash";
  explicit VllmSha256Cbor(std::string_view seed = kDefaultSeed);

  const Digest& none_hash() const { return none_hash_; }
  // The digest of one block whose parent digest is `parent` (none_hash() for block 0), with nil
  // extra keys.
  Digest block(const Digest& parent, std::span<const TokenId> tokens) const;
  // The same with the block's extra keys given as their canonical CBOR (one item; "\xf6" = nil),
  // e.g. from extra_keys_cbor() or a decoded event's BlockStored::extra_keys_cbor.
  Digest block(const Digest& parent, std::span<const TokenId> tokens,
               std::string_view extra_keys_cbor) const;
  // The canonical CBOR of the extra keys vLLM derives for block `block_index` of a request with
  // this LoRA name and cache salt (no multimodal items, no prompt embeds): "\xf6" when none.
  static std::string extra_keys_cbor(std::optional<std::string_view> lora_name,
                                     std::optional<std::string_view> cache_salt,
                                     size_t block_index);
  // The 64-bit value vLLM sends for a digest.
  static index::EngineHash wire_value(const Digest& d);

 private:
  Digest none_hash_;
};

class SglangSha256 {
 public:
  // The root digest of a salted chain (nullopt for an unsalted chain, including an empty salt).
  static std::optional<Digest> salted_root(std::string_view salt);
  // The digest of one block; `parent` is nullptr for the first block of an unsalted chain.
  static Digest block(const Digest* parent, std::span<const TokenId> tokens);
  // The 64-bit pattern of the signed int64 SGLang sends for a digest.
  static index::EngineHash wire_value(const Digest& d);
};

}  // namespace kvgate::events
