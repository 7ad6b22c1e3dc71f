// The KV-event batch decoder: one msgpack payload of any layout the engines send (docs/wire.md)
// into a flat, reusable DecodedBatch.
//
// Bad input costs only what it touches: a field that cannot be read drops that event with a
// reason (DropReason) and the rest of the batch is kept; bytes that are not msgpack, or end too
// early, drop the event they are in and every event after it (nothing after a broken item can be
// located). Lengths and nesting are bounded before anything is allocated for them, so a 5-byte
// payload claiming 2^32 elements costs nothing. The decoder never throws.
//
// Allocation: the decoder and the DecodedBatch keep their buffers across calls; in steady state a
// decode allocates nothing. Strings in a DecodedEvent are views into the payload.
//
// Threading: a BatchDecoder is used by one thread at a time (each subscription owns one).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "kvgate/events/wire.h"
#include "kvgate/index/indexer.h"

namespace kvgate::events {

// Why an event (or, for the batch-level reasons, a whole payload) was not used.
enum class DropReason : uint8_t {
  // Batch level: the payload as a whole.
  kNotABatch,        // not an array/map batch, or its events are not an array
  kPayloadTooLarge,  // payload over DecodeLimits::max_payload_bytes
  // Byte level: this event and every later one in the payload.
  kTruncated,  // the payload ends inside the event
  kMalformed,  // bytes that are not msgpack
  kTooLarge,   // a length over the limits (array, map, str, bin, ext)
  kTooDeep,    // nesting deeper than DecodeLimits::max_depth
  // Event level: this event only.
  kNotAnEvent,      // neither a tagged array nor a map with "type"
  kBadTag,          // tag missing or not a string
  kUnknownTag,      // a tag other than BlockStored / BlockRemoved / AllBlocksCleared
  kBadBlockHashes,  // block_hashes missing or not an array
  kBadHash,         // a hash that is not uint64, int64 or bin of >= 8 bytes
  kBadParent,       // parent_block_hash not nil or a hash
  kBadTokenIds,     // token_ids missing, not an array, or an element not a u32 or [u32, u32]
  kBadBlockSize,    // block_size missing, zero, or not a u32
  kBadField,        // lora_id / medium / lora_name / group / kv_cache_spec_* of the wrong type
  kBadExtraKeys,    // extra_keys not nil or an array
  kBadMetadata,     // SGLang metadata / cache_salt / session_id of the wrong type
  // Normalization (normalize.h): the event decoded but cannot be applied.
  kTokenCountMismatch,  // token_ids is not block_size tokens per block hash
  kSlidingWindowGroup,  // a sliding-window KV-cache group while a full-attention group exists
  kEmptyEvent,          // a store or removal with no block hashes
};
inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kEmptyEvent) + 1;
std::string_view drop_reason_name(DropReason r);
using DropCounts = std::array<uint32_t, kDropReasonCount>;

struct DecodeLimits {
  size_t max_payload_bytes = size_t{64} << 20;
  uint32_t max_events = 1u << 20;  // per batch
  uint32_t max_array = 1u << 22;   // elements in one array (token_ids is the longest)
  uint32_t max_map = 256;          // pairs in one map
  uint32_t max_str = 1u << 16;     // bytes in one string
  uint32_t max_bin = 1u << 16;     // bytes in one bin (hashes, prompt-embeds digests)
  uint32_t max_depth = 8;          // nesting inside one event
};

// Which layout the events looked like (for the operator's tool and the hash-scheme auto mode).
struct LayoutHints {
  bool array_events = false;
  bool map_events = false;
  bool map_batch = false;
  bool sglang_signs = false;  // negative hashes, a metadata map, cache_salt/session_id keys
  bool vllm_signs = false;    // lora_name / extra_keys / group fields, array stores > 8 fields
  bool bin_hashes = false;
  // The best guess: SGLang when any sign of it, else vLLM; arrays vs maps by the first event.
  std::optional<WireFormat> guess() const;
};

// One decoded event. Ranges index into the owning DecodedBatch's buffers; string views point
// into the payload.
struct DecodedEvent {
  index::EventKind kind = index::EventKind::kCleared;
  uint32_t hash_begin = 0, hash_count = 0;  // DecodedBatch::hashes
  bool has_parent = false;
  EngineHash parent = 0;
  uint32_t token_begin = 0, token_count = 0;  // DecodedBatch::tokens (pairs folded)
  uint32_t pair_begin = 0, pair_count = 0;    // DecodedBatch::pair_words (all-pair stores only)
  uint32_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<int64_t> group_idx;
  std::optional<int64_t> sliding_window;
  std::optional<std::string_view> medium;
  std::optional<std::string_view> lora_name;
  std::optional<std::string_view> cache_salt;
  std::optional<std::string_view> session_id;
  std::optional<std::string_view> spec_kind;
  bool has_extra_keys = false;                // extra_keys present (entries in extra_ranges)
  bool extra_opaque = false;                  // present but not reproducible as CBOR
  uint32_t extra_begin = 0, extra_count = 0;  // DecodedBatch::extra_ranges
};

struct DecodedBatch {
  double ts = 0;
  bool ts_valid = false;  // false: missing or not a number (ts stays 0)
  std::optional<int64_t> dp_rank;
  bool dp_rank_valid = true;  // false: present but not a non-negative int (dp_rank unset)
  std::vector<DecodedEvent> events;
  std::vector<EngineHash> hashes;
  std::vector<TokenId> tokens;
  std::vector<TokenId> pair_words;
  std::string cbor;                                         // extra keys, re-encoded
  std::vector<std::pair<uint32_t, uint32_t>> extra_ranges;  // (offset, size) into cbor
  uint32_t events_in_payload = 0;                           // what the batch header announced
  DropCounts dropped{};                                     // events dropped, per reason
  std::optional<DropReason> rejected;  // set when the whole payload was rejected
  LayoutHints hints;

  void clear();
  uint32_t dropped_total() const;
  std::span<const EngineHash> hashes_of(const DecodedEvent& e) const {
    return {hashes.data() + e.hash_begin, e.hash_count};
  }
  std::span<const TokenId> tokens_of(const DecodedEvent& e) const {
    return {tokens.data() + e.token_begin, e.token_count};
  }
  std::span<const TokenId> pair_words_of(const DecodedEvent& e) const {
    return {pair_words.data() + e.pair_begin, e.pair_count};
  }
  // Block i's extra keys as canonical CBOR ("" when the event has none for that block).
  std::string_view extra_keys_of(const DecodedEvent& e, size_t block) const;
};

class BatchDecoder {
 public:
  explicit BatchDecoder(DecodeLimits limits = {}) : limits_(limits), zone_(kZoneChunkBytes) {}

  // Decodes `payload` into `out` (cleared first, capacity reused). Returns false when the whole
  // payload was rejected (out->rejected says why); per-event drops are in out->dropped.
  bool decode(std::span<const uint8_t> payload, DecodedBatch* out);
  bool decode(std::string_view payload, DecodedBatch* out) {
    return decode(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()),
        out);
  }

  const DecodeLimits& limits() const { return limits_; }

 private:
  // msgpack-c builds each item's objects here; it is emptied after every event (strings stay in
  // the payload), so an ordinary event fits in the first chunk and costs no allocation.
  static constexpr size_t kZoneChunkBytes = 64 * 1024;
  DecodeLimits limits_;
  msgpack::zone zone_;
};

// The owning wire model of a decoded batch (tools and tests; allocates).
WireBatch to_wire(const DecodedBatch& batch);

}  // namespace kvgate::events
