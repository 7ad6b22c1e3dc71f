// The engines' KV-event wire, decoded but not yet normalized (docs/wire.md). Decoders (decode.h)
// produce these from msgpack; encoders (encode.h) write them in any of the layouts the engines
// really send, for the mock engine and for tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::events {

using index::EngineHash;

// The layouts a publisher may use for its events (the outer batch is an array in all of them).
enum class WireFormat {
  kVllmArray,    // vLLM <= 0.23: positional arrays, tag first, trailing fields may be missing
  kVllmMap,      // vLLM >= 0.24: maps with "type"
  kSglangArray,  // SGLang before its map change: arrays, optional metadata map as 8th element
  kSglangMap,    // SGLang after its map change: maps with cache_salt / session_id / lora_name
};
std::string_view wire_format_name(WireFormat f);
std::optional<WireFormat> parse_wire_format(
    std::string_view s);  // "vllm-array", "vllm-map", "sglang", "sglang-map"
inline constexpr WireFormat kAllWireFormats[] = {WireFormat::kVllmArray, WireFormat::kVllmMap,
                                                 WireFormat::kSglangArray, WireFormat::kSglangMap};

// The router's token id for an `[a, b]` pair (SGLang speculative bigram pages): the router hashes
// one u32 per token, so a pair is folded into one by this fixed, documented mix (docs/events.md).
// A request-side bigram key must be folded the same way to match.
constexpr TokenId pair_token(TokenId a, TokenId b) {
  const uint32_t x = a * 0x9E3779B1u;
  return ((x << 15) | (x >> 17)) ^ (b * 0x85EBCA77u) ^ 0x27D4EB2Fu;
}

// How an engine's hash looked on the wire, normalized to 64 bits:
//   uint64 as is; negative int64 (SGLang) reinterpreted as its two's-complement uint64;
//   bin of >= 8 bytes (vLLM with int hashes off): its last 8 bytes read big-endian, which is the
//   value the same engine would have sent as an int.
struct BlockStored {
  std::vector<EngineHash> block_hashes;
  std::optional<EngineHash> parent;  // nullopt: the first block starts a sequence
  std::vector<TokenId> token_ids;    // all blocks' tokens concatenated (n_blocks * block_size)
  // Set when the tokens arrived as [a, b] pairs: a0, b0, a1, b1, ... (token_ids[i] is then
  // pair_token(a_i, b_i)). The engine hashes both words; the router hashes the folded id.
  std::vector<TokenId> pair_words;
  uint32_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<std::string> medium;  // nullopt means GPU
  std::optional<std::string> lora_name;
  std::optional<std::string>
      cache_salt;  // vLLM: from extra_keys of block 0; SGLang: metadata / map key
  std::optional<std::string>
      session_id;  // SGLang metadata / map key; carried, not used for routing
  // vLLM extra_keys, one entry per block, each re-encoded as the canonical CBOR vLLM hashes
  // ("\xf6" for a nil entry): what the engine-hash check needs to reproduce salted / LoRA / mm
  // blocks. nullopt when the event had none (or nil). An entry vLLM could not have produced
  // (float, map, ext) leaves it nullopt and sets extra_keys_opaque.
  std::optional<std::vector<std::string>> extra_keys_cbor;
  bool extra_keys_opaque = false;
  std::optional<int64_t> group_idx;
  std::optional<std::string> kv_cache_spec_kind;
  std::optional<int64_t> kv_cache_spec_sliding_window;
  friend bool operator==(const BlockStored&, const BlockStored&) = default;
};

struct BlockRemoved {
  std::vector<EngineHash> block_hashes;
  std::optional<std::string> medium;
  std::optional<int64_t> group_idx;
  friend bool operator==(const BlockRemoved&, const BlockRemoved&) = default;
};

struct AllBlocksCleared {
  friend bool operator==(const AllBlocksCleared&, const AllBlocksCleared&) = default;
};

using WireEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

struct WireBatch {
  double ts = 0;  // publisher's wall clock, seconds since the epoch
  std::vector<WireEvent> events;
  std::optional<int64_t> dp_rank;
  friend bool operator==(const WireBatch&, const WireBatch&) = default;
};

}  // namespace kvgate::events
