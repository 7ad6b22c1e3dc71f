// The engines' KV-event wire, decoded but not yet normalized (../design WIRE.md facts, kept in
// docs/wire.md). Decoders (decode.h) produce these from msgpack; encoders (encode.h) write them in
// any of the layouts the engines really send, for the mock engine and for tests.
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
std::optional<WireFormat> parse_wire_format(std::string_view s);  // "vllm-array", "vllm-map", "sglang", "sglang-map"

// How an engine's hash looked on the wire, normalized to 64 bits:
//   uint64 as is; negative int64 (SGLang) reinterpreted as its two's-complement uint64;
//   bin of >= 8 bytes (vLLM with int hashes off): its last 8 bytes read big-endian, which is the
//   value the same engine would have sent as an int.
struct BlockStored {
  std::vector<EngineHash> block_hashes;
  std::optional<EngineHash> parent;  // nullopt: the first block starts a sequence
  std::vector<TokenId> token_ids;    // all blocks' tokens concatenated (n_blocks * block_size)
  uint32_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<std::string> medium;  // nullopt means GPU
  std::optional<std::string> lora_name;
  std::optional<std::string> cache_salt;  // vLLM: from extra_keys of block 0; SGLang: metadata / map key
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
