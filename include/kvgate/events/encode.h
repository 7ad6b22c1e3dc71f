// Writes KV-event batches exactly as the engines put them on the wire (docs/wire.md), for the mock
// engine's publisher and for tests. Not a hot path for the gateway.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "kvgate/events/wire.h"

namespace kvgate::events {

// Appends the msgpack payload of `batch` in `format` to `out`:
//   vllm-array  : [ts, [[tag, ...positional fields, every field known, trailing nils kept]...],
//   dp_rank] vllm-map    : [ts, [{type, block_hashes, parent_block_hash, token_ids, block_size,
//   lora_id, medium,
//                        lora_name, and extra_keys/group_idx/kv_cache_spec_* only when set}...],
//                        dp_rank]
//   sglang      : array events; a salted store appends the metadata map {"cache_salt": ...}
//   sglang-map  : map events with cache_salt / session_id / lora_name
// vLLM layouts write hashes as msgpack uint64; SGLang layouts as signed int64 (negative values
// occur). A batch without dp_rank is written with a nil third element.
void encode_batch(const WireBatch& batch, WireFormat format, std::string* out);

// The 8-byte big-endian sequence frame of a live message and of replay requests/replies.
std::array<uint8_t, 8> encode_seq(uint64_t seq);
// Reads a sequence frame; nullopt unless it is exactly 8 bytes.
std::optional<uint64_t> decode_seq(std::span<const uint8_t> frame);
// The replay socket's end-of-replay marker sequence (ff ff ff ff ff ff ff ff).
inline constexpr uint64_t kReplayEndSeq = ~uint64_t{0};

}  // namespace kvgate::events
