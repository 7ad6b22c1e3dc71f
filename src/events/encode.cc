#include "kvgate/events/encode.h"

#include <cstring>
#include <type_traits>

#include "events/detail/msgpack_sink.h"
#include "kvgate/events/engine_hash.h"

namespace kvgate::events {
namespace {

using detail::pack_str;
using detail::Packer;

bool is_vllm(WireFormat f) { return f == WireFormat::kVllmArray || f == WireFormat::kVllmMap; }
bool is_map(WireFormat f) { return f == WireFormat::kVllmMap || f == WireFormat::kSglangMap; }

// Writes one CBOR item of the subset detail/cbor.h produces as the msgpack value vLLM would have
// sent (tuples as arrays, str as str, bytes as bin). Returns false on bytes outside that subset.
bool cbor_to_msgpack(Packer& pk, std::string_view& in, int depth) {
  if (in.empty() || depth > 16) return false;
  const auto ib = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  const uint8_t major = ib >> 5, ai = ib & 31;
  if (major == 7) {
    if (ai == 20)
      pk.pack_false();
    else if (ai == 21)
      pk.pack_true();
    else if (ai == 22)
      pk.pack_nil();
    else
      return false;
    return true;
  }
  uint64_t v = ai;
  if (ai >= 24) {
    if (ai > 27) return false;
    const size_t n = size_t{1} << (ai - 24);
    if (in.size() < n) return false;
    v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
    in.remove_prefix(n);
  }
  switch (major) {
    case 0:
      pk.pack_uint64(v);
      return true;
    case 1:
      pk.pack_int64(-1 - static_cast<int64_t>(v));
      return true;
    case 2:
    case 3:
      if (in.size() < v) return false;
      if (major == 2) {
        pk.pack_bin(static_cast<uint32_t>(v));
        pk.pack_bin_body(in.data(), static_cast<uint32_t>(v));
      } else {
        pack_str(pk, in.substr(0, v));
      }
      in.remove_prefix(v);
      return true;
    case 4:
      if (v > in.size()) return false;
      pk.pack_array(static_cast<uint32_t>(v));
      for (uint64_t i = 0; i < v; ++i) {
        if (!cbor_to_msgpack(pk, in, depth + 1)) return false;
      }
      return true;
    default:
      return false;
  }
}

void pack_hash(Packer& pk, EngineHash h, WireFormat f) {
  if (is_vllm(f)) {
    pk.pack_uint64(h);
  } else {
    pk.pack_int64(static_cast<int64_t>(h));
  }
}

void pack_hashes(Packer& pk, const std::vector<EngineHash>& hashes, WireFormat f) {
  pk.pack_array(static_cast<uint32_t>(hashes.size()));
  for (EngineHash h : hashes) pack_hash(pk, h, f);
}

template <class T>
void pack_opt(Packer& pk, const std::optional<T>& v) {
  if (!v) {
    pk.pack_nil();
  } else if constexpr (std::is_same_v<T, std::string>) {
    pack_str(pk, *v);
  } else {
    pk.pack_int64(*v);
  }
}

void pack_tokens(Packer& pk, const BlockStored& e) {
  const bool pairs = !e.pair_words.empty() && e.pair_words.size() == 2 * e.token_ids.size();
  pk.pack_array(static_cast<uint32_t>(e.token_ids.size()));
  for (size_t i = 0; i < e.token_ids.size(); ++i) {
    if (pairs) {
      pk.pack_array(2);
      pk.pack_uint32(e.pair_words[2 * i]);
      pk.pack_uint32(e.pair_words[2 * i + 1]);
    } else {
      pk.pack_uint32(e.token_ids[i]);
    }
  }
}

// vLLM's extra_keys: the event's own when it has them, else what vLLM derives from the LoRA name
// and cache salt (so that a salt survives the vLLM wire, which has no other place for it).
bool has_extra_keys(const BlockStored& e) {
  return e.extra_keys_cbor.has_value() || e.lora_name.has_value() ||
         (e.cache_salt.has_value() && !e.cache_salt->empty());
}

void pack_extra_keys(Packer& pk, const BlockStored& e) {
  const size_t n = e.block_hashes.size();
  pk.pack_array(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    std::string synthesized;
    std::string_view item;
    if (e.extra_keys_cbor && i < e.extra_keys_cbor->size()) {
      item = (*e.extra_keys_cbor)[i];
    } else {
      // A store that continues a chain (has a parent) never holds the request's block 0.
      synthesized =
          VllmSha256Cbor::extra_keys_cbor(e.lora_name, e.cache_salt, i + (e.parent ? 1 : 0));
      item = synthesized;
    }
    std::string_view rest = item;
    if (!cbor_to_msgpack(pk, rest, 0)) pk.pack_nil();  // unreachable for well-formed entries
  }
}

void pack_stored(Packer& pk, const BlockStored& e, WireFormat f) {
  switch (f) {
    case WireFormat::kVllmArray:
      pk.pack_array(12);
      pack_str(pk, "BlockStored");
      pack_hashes(pk, e.block_hashes, f);
      if (e.parent)
        pack_hash(pk, *e.parent, f);
      else
        pk.pack_nil();
      pack_tokens(pk, e);
      pk.pack_uint32(e.block_size);
      pack_opt(pk, e.lora_id);
      pack_opt(pk, e.medium);
      pack_opt(pk, e.lora_name);
      if (has_extra_keys(e))
        pack_extra_keys(pk, e);
      else
        pk.pack_nil();
      pack_opt(pk, e.group_idx);
      pack_opt(pk, e.kv_cache_spec_kind);
      pack_opt(pk, e.kv_cache_spec_sliding_window);
      return;
    case WireFormat::kVllmMap: {
      const bool extra = has_extra_keys(e);
      pk.pack_map(8 + (extra ? 1 : 0) + (e.group_idx ? 1 : 0) + (e.kv_cache_spec_kind ? 1 : 0) +
                  (e.kv_cache_spec_sliding_window ? 1 : 0));
      pack_str(pk, "type");
      pack_str(pk, "BlockStored");
      pack_str(pk, "block_hashes");
      pack_hashes(pk, e.block_hashes, f);
      pack_str(pk, "parent_block_hash");
      if (e.parent)
        pack_hash(pk, *e.parent, f);
      else
        pk.pack_nil();
      pack_str(pk, "token_ids");
      pack_tokens(pk, e);
      pack_str(pk, "block_size");
      pk.pack_uint32(e.block_size);
      pack_str(pk, "lora_id");
      pack_opt(pk, e.lora_id);
      pack_str(pk, "medium");
      pack_opt(pk, e.medium);
      pack_str(pk, "lora_name");
      pack_opt(pk, e.lora_name);
      if (extra) {
        pack_str(pk, "extra_keys");
        pack_extra_keys(pk, e);
      }
      if (e.group_idx) {
        pack_str(pk, "group_idx");
        pack_opt(pk, e.group_idx);
      }
      if (e.kv_cache_spec_kind) {
        pack_str(pk, "kv_cache_spec_kind");
        pack_opt(pk, e.kv_cache_spec_kind);
      }
      if (e.kv_cache_spec_sliding_window) {
        pack_str(pk, "kv_cache_spec_sliding_window");
        pack_opt(pk, e.kv_cache_spec_sliding_window);
      }
      return;
    }
    case WireFormat::kSglangArray: {
      const bool meta = e.cache_salt.has_value() || e.session_id.has_value();
      pk.pack_array(meta ? 8 : 7);
      pack_str(pk, "BlockStored");
      pack_hashes(pk, e.block_hashes, f);
      if (e.parent)
        pack_hash(pk, *e.parent, f);
      else
        pk.pack_nil();
      pack_tokens(pk, e);
      pk.pack_uint32(e.block_size);
      pack_opt(pk, e.lora_id);
      pack_opt(pk, e.medium);
      if (meta) {
        pk.pack_map((e.cache_salt ? 1 : 0) + (e.session_id ? 1 : 0));
        if (e.cache_salt) {
          pack_str(pk, "cache_salt");
          pack_str(pk, *e.cache_salt);
        }
        if (e.session_id) {
          pack_str(pk, "session_id");
          pack_str(pk, *e.session_id);
        }
      }
      return;
    }
    case WireFormat::kSglangMap:
      pk.pack_map(7 + (e.cache_salt ? 1 : 0) + (e.session_id ? 1 : 0) + (e.lora_name ? 1 : 0));
      pack_str(pk, "type");
      pack_str(pk, "BlockStored");
      pack_str(pk, "block_hashes");
      pack_hashes(pk, e.block_hashes, f);
      pack_str(pk, "parent_block_hash");
      if (e.parent)
        pack_hash(pk, *e.parent, f);
      else
        pk.pack_nil();
      pack_str(pk, "token_ids");
      pack_tokens(pk, e);
      pack_str(pk, "block_size");
      pk.pack_uint32(e.block_size);
      pack_str(pk, "lora_id");
      pack_opt(pk, e.lora_id);
      pack_str(pk, "medium");
      pack_opt(pk, e.medium);
      if (e.cache_salt) {
        pack_str(pk, "cache_salt");
        pack_str(pk, *e.cache_salt);
      }
      if (e.session_id) {
        pack_str(pk, "session_id");
        pack_str(pk, *e.session_id);
      }
      if (e.lora_name) {
        pack_str(pk, "lora_name");
        pack_str(pk, *e.lora_name);
      }
      return;
  }
}

void pack_removed(Packer& pk, const BlockRemoved& e, WireFormat f) {
  switch (f) {
    case WireFormat::kVllmArray:
      pk.pack_array(4);
      pack_str(pk, "BlockRemoved");
      pack_hashes(pk, e.block_hashes, f);
      pack_opt(pk, e.medium);
      pack_opt(pk, e.group_idx);
      return;
    case WireFormat::kSglangArray:
      pk.pack_array(3);
      pack_str(pk, "BlockRemoved");
      pack_hashes(pk, e.block_hashes, f);
      pack_opt(pk, e.medium);
      return;
    case WireFormat::kVllmMap:
    case WireFormat::kSglangMap: {
      const bool group = f == WireFormat::kVllmMap && e.group_idx.has_value();
      pk.pack_map(group ? 4 : 3);
      pack_str(pk, "type");
      pack_str(pk, "BlockRemoved");
      pack_str(pk, "block_hashes");
      pack_hashes(pk, e.block_hashes, f);
      pack_str(pk, "medium");
      pack_opt(pk, e.medium);
      if (group) {
        pack_str(pk, "group_idx");
        pack_opt(pk, e.group_idx);
      }
      return;
    }
  }
}

void pack_cleared(Packer& pk, WireFormat f) {
  if (is_map(f)) {
    pk.pack_map(1);
    pack_str(pk, "type");
  } else {
    pk.pack_array(1);
  }
  pack_str(pk, "AllBlocksCleared");
}

}  // namespace

void encode_batch(const WireBatch& batch, WireFormat format, std::string* out) {
  detail::StringSink sink{out};
  Packer pk(sink);
  pk.pack_array(3);
  // msgpack-c writes an integral double as an int; the engines always send float64.
  uint64_t ts_bits;
  std::memcpy(&ts_bits, &batch.ts, sizeof ts_bits);
  out->push_back('\xcb');
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>(ts_bits >> (8 * i)));
  pk.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const WireEvent& ev : batch.events) {
    if (const auto* s = std::get_if<BlockStored>(&ev)) {
      pack_stored(pk, *s, format);
    } else if (const auto* r = std::get_if<BlockRemoved>(&ev)) {
      pack_removed(pk, *r, format);
    } else {
      pack_cleared(pk, format);
    }
  }
  if (batch.dp_rank)
    pk.pack_int64(*batch.dp_rank);
  else
    pk.pack_nil();
}

std::array<uint8_t, 8> encode_seq(uint64_t seq) {
  std::array<uint8_t, 8> out;
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(seq >> (56 - 8 * i));
  return out;
}

std::optional<uint64_t> decode_seq(std::span<const uint8_t> frame) {
  if (frame.size() != 8) return std::nullopt;
  uint64_t v = 0;
  for (uint8_t b : frame) v = (v << 8) | b;
  return v;
}

}  // namespace kvgate::events
