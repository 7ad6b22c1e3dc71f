#include "kvgate/events/decode.h"

#include <algorithm>
#include <limits>

#include "events/detail/cbor.h"

namespace kvgate::events {
namespace {

using msgpack::object;
namespace mt = msgpack::type;

constexpr std::string_view kStored = "BlockStored";
constexpr std::string_view kRemoved = "BlockRemoved";
constexpr std::string_view kCleared = "AllBlocksCleared";

bool reference_all(mt::object_type, size_t, void*) { return true; }

// ---- First pass: where does the next item end? --------------------------------------------

// Finds the end of the msgpack item at `off` without a stack (a count of items still owed), so a
// nesting bomb costs time linear in its bytes and no memory. An array or map cannot hold more
// items than bytes remain, so a claim beyond that fails at once.
std::optional<DropReason> skip_item(const uint8_t* p, size_t len, size_t& off) {
  uint64_t owed = 1;
  size_t o = off;
  auto need = [&](size_t n) { return len - o >= n; };
  auto be = [&](size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | p[at + i];
    return v;
  };
  while (owed > 0) {
    if (!need(1)) return DropReason::kTruncated;
    const uint8_t b = p[o++];
    --owed;
    uint64_t body = 0, items = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      // fixint, negative fixint, nil, false, true
    } else if ((b & 0xf0) == 0x80) {
      items = 2 * uint64_t{b & 0x0fu};
    } else if ((b & 0xf0) == 0x90) {
      items = b & 0x0fu;
    } else if ((b & 0xe0) == 0xa0) {
      body = b & 0x1fu;
    } else {
      switch (b) {
        case 0xc4:
        case 0xc5:
        case 0xc6:
        case 0xd9:
        case 0xda:
        case 0xdb: {  // bin, str
          const size_t w = (b == 0xc4 || b == 0xd9) ? 1 : (b == 0xc5 || b == 0xda) ? 2 : 4;
          if (!need(w)) return DropReason::kTruncated;
          body = be(o, w);
          o += w;
          break;
        }
        case 0xc7:
        case 0xc8:
        case 0xc9: {  // ext 8/16/32: length, type, data
          const size_t w = b == 0xc7 ? 1 : b == 0xc8 ? 2 : 4;
          if (!need(w)) return DropReason::kTruncated;
          body = be(o, w) + 1;
          o += w;
          break;
        }
        case 0xca:
          body = 4;
          break;
        case 0xcb:
          body = 8;
          break;
        case 0xcc:
        case 0xd0:
          body = 1;
          break;
        case 0xcd:
        case 0xd1:
          body = 2;
          break;
        case 0xce:
        case 0xd2:
          body = 4;
          break;
        case 0xcf:
        case 0xd3:
          body = 8;
          break;
        case 0xd4:
          body = 2;
          break;  // fixext 1..16: type byte + data
        case 0xd5:
          body = 3;
          break;
        case 0xd6:
          body = 5;
          break;
        case 0xd7:
          body = 9;
          break;
        case 0xd8:
          body = 17;
          break;
        case 0xdc:
        case 0xdd:
        case 0xde:
        case 0xdf: {
          const size_t w = (b == 0xdc || b == 0xde) ? 2 : 4;
          if (!need(w)) return DropReason::kTruncated;
          items = be(o, w) * ((b == 0xde || b == 0xdf) ? 2 : 1);
          o += w;
          break;
        }
        default:  // 0xc1: never used
          return DropReason::kMalformed;
      }
    }
    if (body > len - o) return DropReason::kTruncated;
    o += body;
    owed += items;
    if (owed > len - o) return DropReason::kTruncated;  // every owed item needs a byte
  }
  off = o;
  return std::nullopt;
}

struct ItemError {
  DropReason reason;
  bool fatal;  // the bytes broke: nothing after this item can be located
};

// Reads the next item at `off` into `obj` (strings and bins are views into `p`), advancing `off`
// past it. Limits are msgpack-c's: checked before it allocates for a length, and the item is
// known complete first, so its arrays cannot claim more elements than it has bytes.
std::optional<ItemError> next_item(msgpack::zone& zone, const uint8_t* p, size_t len, size_t& off,
                                   const DecodeLimits& limits, object* obj) {
  size_t end = off;
  if (auto r = skip_item(p, len, end)) return ItemError{*r, true};
  const size_t start = off;
  off = end;
  try {
    bool referenced = false;
    size_t pos = 0;
    const msgpack::unpack_limit ul(limits.max_array, limits.max_map, limits.max_str, limits.max_bin,
                                   limits.max_bin, limits.max_depth);
    *obj = msgpack::unpack(zone, reinterpret_cast<const char*>(p + start), end - start, pos,
                           referenced, reference_all, nullptr, ul);
  } catch (const msgpack::depth_size_overflow&) {
    return ItemError{DropReason::kTooDeep, false};
  } catch (const msgpack::size_overflow&) {
    return ItemError{DropReason::kTooLarge, false};
  } catch (const msgpack::insufficient_bytes&) {
    return ItemError{DropReason::kTruncated, false};
  } catch (...) {
    return ItemError{DropReason::kMalformed, false};
  }
  return std::nullopt;
}

enum class Header { kOk, kOther, kTruncated };

// Reads an array (or map) header by hand: the batch and its events list are walked item by item
// so that a broken event does not cost the ones before it.
Header read_header(const uint8_t* p, size_t len, size_t& off, bool map, uint32_t* n) {
  if (off >= len) return Header::kTruncated;
  const uint8_t b = p[off];
  const uint8_t fix = map ? 0x80 : 0x90, w16 = map ? 0xde : 0xdc, w32 = map ? 0xdf : 0xdd;
  if ((b & 0xf0) == fix) {
    *n = b & 0x0f;
    off += 1;
    return Header::kOk;
  }
  size_t w;
  if (b == w16)
    w = 2;
  else if (b == w32)
    w = 4;
  else
    return Header::kOther;
  if (len - off < 1 + w) return Header::kTruncated;
  uint32_t v = 0;
  for (size_t i = 0; i < w; ++i) v = (v << 8) | p[off + 1 + i];
  *n = v;
  off += 1 + w;
  return Header::kOk;
}

// ---- Second pass: fields of one event ---------------------------------------------------------

bool is_nil(const object* o) { return o == nullptr || o->type == mt::NIL; }
bool is_str(const object& o) { return o.type == mt::STR; }
std::string_view str_of(const object& o) { return {o.via.str.ptr, o.via.str.size}; }

std::optional<EngineHash> read_hash(const object& o, LayoutHints& hints) {
  switch (o.type) {
    case mt::POSITIVE_INTEGER:
      return o.via.u64;
    case mt::NEGATIVE_INTEGER:
      hints.sglang_signs = true;
      return static_cast<EngineHash>(o.via.i64);
    case mt::BIN: {
      if (o.via.bin.size < 8) return std::nullopt;
      hints.bin_hashes = true;
      const auto* p = reinterpret_cast<const uint8_t*>(o.via.bin.ptr) + o.via.bin.size - 8;
      EngineHash v = 0;
      for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
      return v;
    }
    default:
      return std::nullopt;
  }
}

// nil -> nullopt; an int that fits int64 -> value; anything else -> false.
bool read_opt_int(const object* o, std::optional<int64_t>* out) {
  if (is_nil(o)) return true;
  if (o->type == mt::POSITIVE_INTEGER) {
    if (o->via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(o->via.u64);
    return true;
  }
  if (o->type == mt::NEGATIVE_INTEGER) {
    *out = o->via.i64;
    return true;
  }
  return false;
}

bool read_opt_str(const object* o, std::optional<std::string_view>* out) {
  if (is_nil(o)) return true;
  if (!is_str(*o)) return false;
  *out = str_of(*o);
  return true;
}

bool read_u32(const object& o, uint32_t* out) {
  if (o.type != mt::POSITIVE_INTEGER || o.via.u64 > std::numeric_limits<uint32_t>::max()) {
    return false;
  }
  *out = static_cast<uint32_t>(o.via.u64);
  return true;
}

// msgpack -> the canonical CBOR cbor2 writes for the same Python value. False for values vLLM's
// extra keys never hold (floats, maps, ext), whose canonical form we do not reproduce.
bool to_cbor(const object& o, std::string* out) {
  switch (o.type) {
    case mt::NIL:
      out->push_back(detail::kCborNull);
      return true;
    case mt::BOOLEAN:
      out->push_back(o.via.boolean ? detail::kCborTrue : detail::kCborFalse);
      return true;
    case mt::POSITIVE_INTEGER:
      detail::cbor_head(out, detail::kCborUint, o.via.u64);
      return true;
    case mt::NEGATIVE_INTEGER:
      detail::cbor_head(out, detail::kCborNegInt, static_cast<uint64_t>(-1 - o.via.i64));
      return true;
    case mt::STR:
      detail::cbor_text(out, str_of(o));
      return true;
    case mt::BIN:
      detail::cbor_bytes(out, std::string_view(o.via.bin.ptr, o.via.bin.size));
      return true;
    case mt::ARRAY:
      detail::cbor_head(out, detail::kCborArray, o.via.array.size);
      for (uint32_t i = 0; i < o.via.array.size; ++i) {
        if (!to_cbor(o.via.array.ptr[i], out)) return false;
      }
      return true;
    default:
      return false;
  }
}

// The fields of an event, wherever the layout put them (nullptr: absent, which reads as nil).
struct Fields {
  const object* hashes = nullptr;
  const object* parent = nullptr;
  const object* tokens = nullptr;
  const object* block_size = nullptr;
  const object* lora_id = nullptr;
  const object* medium = nullptr;
  const object* lora_name = nullptr;
  const object* extra_keys = nullptr;
  const object* group_idx = nullptr;
  const object* spec_kind = nullptr;
  const object* window = nullptr;
  const object* cache_salt = nullptr;
  const object* session_id = nullptr;
  const object* metadata = nullptr;
};

class EventReader {
 public:
  explicit EventReader(DecodedBatch* out) : out_(out) {}

  // Appends the event to out_ or returns why it was dropped (buffers rolled back).
  std::optional<DropReason> read(const object& o) {
    const size_t h = out_->hashes.size(), t = out_->tokens.size(), p = out_->pair_words.size(),
                 c = out_->cbor.size(), x = out_->extra_ranges.size();
    auto r = read_event(o);
    if (r) {
      out_->hashes.resize(h);
      out_->tokens.resize(t);
      out_->pair_words.resize(p);
      out_->cbor.resize(c);
      out_->extra_ranges.resize(x);
    }
    return r;
  }

 private:
  std::optional<DropReason> read_event(const object& o) {
    Fields f;
    std::string_view tag;
    if (o.type == mt::ARRAY) {
      out_->hints.array_events = true;
      const auto& a = o.via.array;
      if (a.size == 0) return DropReason::kNotAnEvent;
      if (!is_str(a.ptr[0])) return DropReason::kBadTag;
      tag = str_of(a.ptr[0]);
      auto at = [&](uint32_t i) -> const object* { return i < a.size ? &a.ptr[i] : nullptr; };
      f.hashes = at(1);
      if (tag == kStored) {
        f.parent = at(2);
        f.tokens = at(3);
        f.block_size = at(4);
        f.lora_id = at(5);
        f.medium = at(6);
        if (const object* seventh = at(7)) {
          if (seventh->type == mt::MAP) {
            f.metadata = seventh;  // SGLang's metadata map
          } else {
            f.lora_name = seventh;  // vLLM
            if (seventh->type == mt::STR) out_->hints.vllm_signs = true;
          }
        }
        f.extra_keys = at(8);
        f.group_idx = at(9);
        f.spec_kind = at(10);
        f.window = at(11);
        if (a.size > 8) out_->hints.vllm_signs = true;
      } else {
        f.medium = at(2);
        f.group_idx = at(3);
      }
    } else if (o.type == mt::MAP) {
      out_->hints.map_events = true;
      const object* type = nullptr;
      bool lora_name_key = false;
      const auto& m = o.via.map;
      for (uint32_t i = 0; i < m.size; ++i) {
        const object& k = m.ptr[i].key;
        if (!is_str(k)) continue;  // unknown key
        const std::string_view key = str_of(k);
        const object* v = &m.ptr[i].val;
        if (key == "type")
          type = v;
        else if (key == "block_hashes")
          f.hashes = v;
        else if (key == "parent_block_hash")
          f.parent = v;
        else if (key == "token_ids")
          f.tokens = v;
        else if (key == "block_size")
          f.block_size = v;
        else if (key == "lora_id")
          f.lora_id = v;
        else if (key == "medium")
          f.medium = v;
        else if (key == "lora_name")
          f.lora_name = v, lora_name_key = true;
        else if (key == "extra_keys")
          f.extra_keys = v, out_->hints.vllm_signs = true;
        else if (key == "group_idx")
          f.group_idx = v, out_->hints.vllm_signs = true;
        else if (key == "kv_cache_spec_kind")
          f.spec_kind = v, out_->hints.vllm_signs = true;
        else if (key == "kv_cache_spec_sliding_window")
          f.window = v;
        else if (key == "cache_salt")
          f.cache_salt = v, out_->hints.sglang_signs = true;
        else if (key == "session_id")
          f.session_id = v, out_->hints.sglang_signs = true;
        else if (key == "metadata")
          f.metadata = v;
      }
      if (type == nullptr) return DropReason::kNotAnEvent;
      if (!is_str(*type)) return DropReason::kBadTag;
      tag = str_of(*type);
      // vLLM always sends lora_name (nil when unset); SGLang only when set.
      if (lora_name_key && is_nil(f.lora_name)) out_->hints.vllm_signs = true;
    } else {
      return DropReason::kNotAnEvent;
    }

    DecodedEvent e;
    if (tag == kCleared) {
      e.kind = index::EventKind::kCleared;
      out_->events.push_back(e);
      return std::nullopt;
    }
    if (tag == kStored) {
      e.kind = index::EventKind::kStored;
      if (auto r = read_stored(f, e)) return r;
    } else if (tag == kRemoved) {
      e.kind = index::EventKind::kRemoved;
      if (auto r = read_hashes(f.hashes, e)) return r;
      if (!read_opt_str(f.medium, &e.medium)) return DropReason::kBadField;
      if (!read_opt_int(f.group_idx, &e.group_idx)) return DropReason::kBadField;
    } else {
      return DropReason::kUnknownTag;
    }
    out_->events.push_back(e);
    return std::nullopt;
  }

  std::optional<DropReason> read_hashes(const object* o, DecodedEvent& e) {
    if (o == nullptr || o->type != mt::ARRAY) return DropReason::kBadBlockHashes;
    e.hash_begin = static_cast<uint32_t>(out_->hashes.size());
    const auto& a = o->via.array;
    for (uint32_t i = 0; i < a.size; ++i) {
      auto h = read_hash(a.ptr[i], out_->hints);
      if (!h) return DropReason::kBadHash;
      out_->hashes.push_back(*h);
    }
    e.hash_count = a.size;
    return std::nullopt;
  }

  std::optional<DropReason> read_tokens(const object* o, DecodedEvent& e) {
    if (o == nullptr || o->type != mt::ARRAY) return DropReason::kBadTokenIds;
    const auto& a = o->via.array;
    e.token_begin = static_cast<uint32_t>(out_->tokens.size());
    e.pair_begin = static_cast<uint32_t>(out_->pair_words.size());
    size_t pairs = 0;
    for (uint32_t i = 0; i < a.size; ++i) {
      const object& t = a.ptr[i];
      uint32_t v;
      if (read_u32(t, &v)) {
        out_->tokens.push_back(v);
        continue;
      }
      uint32_t x, y;
      if (t.type != mt::ARRAY || t.via.array.size != 2 || !read_u32(t.via.array.ptr[0], &x) ||
          !read_u32(t.via.array.ptr[1], &y)) {
        return DropReason::kBadTokenIds;
      }
      out_->tokens.push_back(pair_token(x, y));
      out_->pair_words.push_back(x);
      out_->pair_words.push_back(y);
      ++pairs;
    }
    e.token_count = a.size;
    if (pairs == a.size && pairs > 0) {
      e.pair_count = static_cast<uint32_t>(2 * pairs);
    } else {
      out_->pair_words.resize(e.pair_begin);  // mixed lists keep only the folded ids
    }
    return std::nullopt;
  }

  std::optional<DropReason> read_stored(const Fields& f, DecodedEvent& e) {
    if (auto r = read_hashes(f.hashes, e)) return r;
    if (!is_nil(f.parent)) {
      auto h = read_hash(*f.parent, out_->hints);
      if (!h) return DropReason::kBadParent;
      e.has_parent = true;
      e.parent = *h;
    }
    if (auto r = read_tokens(f.tokens, e)) return r;
    if (f.block_size == nullptr || !read_u32(*f.block_size, &e.block_size) || e.block_size == 0) {
      return DropReason::kBadBlockSize;
    }
    if (!read_opt_int(f.lora_id, &e.lora_id) || !read_opt_str(f.medium, &e.medium) ||
        !read_opt_str(f.lora_name, &e.lora_name) || !read_opt_int(f.group_idx, &e.group_idx) ||
        !read_opt_str(f.spec_kind, &e.spec_kind) || !read_opt_int(f.window, &e.sliding_window)) {
      return DropReason::kBadField;
    }
    if (!read_opt_str(f.cache_salt, &e.cache_salt) || !read_opt_str(f.session_id, &e.session_id)) {
      return DropReason::kBadMetadata;
    }
    if (!is_nil(f.metadata)) {
      if (f.metadata->type != mt::MAP) return DropReason::kBadMetadata;
      out_->hints.sglang_signs = true;
      const auto& m = f.metadata->via.map;
      for (uint32_t i = 0; i < m.size; ++i) {
        if (!is_str(m.ptr[i].key)) continue;
        const std::string_view key = str_of(m.ptr[i].key);
        std::optional<std::string_view>* dst = key == "cache_salt"   ? &e.cache_salt
                                               : key == "session_id" ? &e.session_id
                                               : key == "lora_name"  ? &e.lora_name
                                                                     : nullptr;
        if (dst && !read_opt_str(&m.ptr[i].val, dst)) return DropReason::kBadMetadata;
      }
    }
    if (!is_nil(f.extra_keys)) {
      if (f.extra_keys->type != mt::ARRAY) return DropReason::kBadExtraKeys;
      read_extra_keys(f.extra_keys->via.array, e);
    }
    return std::nullopt;
  }

  void read_extra_keys(const msgpack::object_array& a, DecodedEvent& e) {
    e.has_extra_keys = true;
    e.extra_begin = static_cast<uint32_t>(out_->extra_ranges.size());
    const size_t cbor_begin = out_->cbor.size();
    for (uint32_t i = 0; i < a.size; ++i) {
      const size_t start = out_->cbor.size();
      if (!to_cbor(a.ptr[i], &out_->cbor)) {
        e.extra_opaque = true;
        out_->cbor.resize(cbor_begin);
        break;
      }
      out_->extra_ranges.emplace_back(static_cast<uint32_t>(start),
                                      static_cast<uint32_t>(out_->cbor.size() - start));
    }
    if (e.extra_opaque) {
      out_->extra_ranges.resize(e.extra_begin);
      e.extra_count = 0;
    } else {
      e.extra_count = a.size;
    }
    // vLLM puts the cache salt in block 0's extra keys, after the LoRA name and the multimodal
    // (identifier, offset) tuples: the first string there that is not the LoRA name.
    if (!e.cache_salt && a.size > 0 && a.ptr[0].type == mt::ARRAY) {
      const auto& k = a.ptr[0].via.array;
      uint32_t i = 0;
      if (e.lora_name && k.size > 0 && is_str(k.ptr[0]) && str_of(k.ptr[0]) == *e.lora_name) i = 1;
      for (; i < k.size; ++i) {
        if (is_str(k.ptr[i])) {
          e.cache_salt = str_of(k.ptr[i]);
          break;
        }
      }
    }
  }

  DecodedBatch* out_;
};

}  // namespace

std::string_view drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kNotABatch:
      return "not_a_batch";
    case DropReason::kPayloadTooLarge:
      return "payload_too_large";
    case DropReason::kTruncated:
      return "truncated";
    case DropReason::kMalformed:
      return "malformed";
    case DropReason::kTooLarge:
      return "too_large";
    case DropReason::kTooDeep:
      return "too_deep";
    case DropReason::kNotAnEvent:
      return "not_an_event";
    case DropReason::kBadTag:
      return "bad_tag";
    case DropReason::kUnknownTag:
      return "unknown_tag";
    case DropReason::kBadBlockHashes:
      return "bad_block_hashes";
    case DropReason::kBadHash:
      return "bad_hash";
    case DropReason::kBadParent:
      return "bad_parent";
    case DropReason::kBadTokenIds:
      return "bad_token_ids";
    case DropReason::kBadBlockSize:
      return "bad_block_size";
    case DropReason::kBadField:
      return "bad_field";
    case DropReason::kBadExtraKeys:
      return "bad_extra_keys";
    case DropReason::kBadMetadata:
      return "bad_metadata";
    case DropReason::kTokenCountMismatch:
      return "token_count_mismatch";
    case DropReason::kSlidingWindowGroup:
      return "sliding_window_group";
    case DropReason::kEmptyEvent:
      return "empty_event";
  }
  return "unknown";
}

std::optional<WireFormat> LayoutHints::guess() const {
  if (!array_events && !map_events) return std::nullopt;
  const bool sglang = sglang_signs;
  if (map_events && !array_events) return sglang ? WireFormat::kSglangMap : WireFormat::kVllmMap;
  return sglang ? WireFormat::kSglangArray : WireFormat::kVllmArray;
}

void DecodedBatch::clear() {
  ts = 0;
  ts_valid = false;
  dp_rank.reset();
  dp_rank_valid = true;
  events.clear();
  hashes.clear();
  tokens.clear();
  pair_words.clear();
  cbor.clear();
  extra_ranges.clear();
  events_in_payload = 0;
  dropped.fill(0);
  rejected.reset();
  hints = LayoutHints{};
}

uint32_t DecodedBatch::dropped_total() const {
  uint32_t n = 0;
  for (uint32_t c : dropped) n += c;
  return n;
}

std::string_view DecodedBatch::extra_keys_of(const DecodedEvent& e, size_t block) const {
  if (!e.has_extra_keys || block >= e.extra_count) return {};
  const auto [off, size] = extra_ranges[e.extra_begin + block];
  return std::string_view(cbor).substr(off, size);
}

bool BatchDecoder::decode(std::span<const uint8_t> payload, DecodedBatch* out) {
  out->clear();
  zone_.clear();
  auto reject = [&](DropReason r) {
    out->rejected = r;
    return false;
  };
  if (payload.size() > limits_.max_payload_bytes) return reject(DropReason::kPayloadTooLarge);
  const uint8_t* p = payload.data();
  const size_t len = payload.size();
  size_t off = 0;

  auto read_ts = [&](const object& o) {
    if (o.type == mt::FLOAT64 || o.type == mt::FLOAT32) {
      out->ts = o.via.f64;
      out->ts_valid = true;
    } else if (o.type == mt::POSITIVE_INTEGER) {
      out->ts = static_cast<double>(o.via.u64);
      out->ts_valid = true;
    }
  };
  auto read_rank = [&](const object& o) {
    std::optional<int64_t> r;
    if (!read_opt_int(&o, &r) || (r && *r < 0)) {
      out->dp_rank_valid = false;
      return;
    }
    out->dp_rank = r;
  };
  // The events array at `off`: each event on its own, so one bad event costs only itself.
  // Returns false when the bytes break (the rest of the payload is unreadable).
  auto read_events = [&]() -> bool {
    uint32_t n = 0;
    switch (read_header(p, len, off, /*map=*/false, &n)) {
      case Header::kOther:
        reject(DropReason::kNotABatch);
        return false;
      case Header::kTruncated:
        reject(DropReason::kTruncated);
        return false;
      case Header::kOk:
        break;
    }
    if (n > limits_.max_events) {
      reject(DropReason::kTooLarge);
      return false;
    }
    out->events_in_payload = n;
    EventReader reader(out);
    for (uint32_t i = 0; i < n; ++i) {
      object o;
      if (auto err = next_item(zone_, p, len, off, limits_, &o)) {
        if (!err->fatal) {
          ++out->dropped[static_cast<size_t>(err->reason)];
          continue;
        }
        out->dropped[static_cast<size_t>(err->reason)] += n - i;
        return false;
      }
      if (auto r = reader.read(o)) ++out->dropped[static_cast<size_t>(*r)];
      zone_.clear();  // the event is copied out; its objects are done with
    }
    return true;
  };

  uint32_t items = 0;
  if (read_header(p, len, off, /*map=*/false, &items) == Header::kOk) {
    if (items < 2) return reject(DropReason::kNotABatch);
    object ts;
    if (auto err = next_item(zone_, p, len, off, limits_, &ts)) {
      if (err->fatal) return reject(err->reason);
    } else {
      read_ts(ts);
    }
    if (!read_events()) return !out->rejected;
    if (items >= 3) {
      object rank;
      if (next_item(zone_, p, len, off, limits_, &rank)) {
        out->dp_rank_valid = false;  // the events are whole; only the rank is lost
      } else {
        read_rank(rank);
      }
    }
    return true;
  }
  off = 0;
  if (read_header(p, len, off, /*map=*/true, &items) != Header::kOk) {
    return reject(DropReason::kNotABatch);
  }
  // The map-shaped batch {ts, events, data_parallel_rank}, keys in any order.
  out->hints.map_batch = true;
  bool saw_events = false;
  for (uint32_t i = 0; i < items; ++i) {
    object key;
    std::optional<ItemError> err = next_item(zone_, p, len, off, limits_, &key);
    if (err && !err->fatal) {  // an unreadable key: skip its value too
      object skipped;
      err = next_item(zone_, p, len, off, limits_, &skipped);
      if (!err || !err->fatal) continue;
    }
    if (err) {
      if (!saw_events) return reject(err->reason);
      break;
    }
    const std::string_view k = is_str(key) ? str_of(key) : std::string_view();
    if (k == "events" && !saw_events) {
      saw_events = true;
      if (!read_events()) return !out->rejected;
      continue;
    }
    object value;
    if ((err = next_item(zone_, p, len, off, limits_, &value))) {
      if (!err->fatal) continue;
      if (!saw_events) return reject(err->reason);
      break;
    }
    if (k == "ts")
      read_ts(value);
    else if (k == "data_parallel_rank" || k == "dp_rank" || k == "attn_dp_rank")
      read_rank(value);
  }
  if (!saw_events) return reject(DropReason::kNotABatch);
  return true;
}

WireBatch to_wire(const DecodedBatch& b) {
  WireBatch w;
  w.ts = b.ts;
  w.dp_rank = b.dp_rank;
  auto str = [](const std::optional<std::string_view>& s) -> std::optional<std::string> {
    if (!s) return std::nullopt;
    return std::string(*s);
  };
  for (const DecodedEvent& e : b.events) {
    switch (e.kind) {
      case index::EventKind::kCleared:
        w.events.push_back(AllBlocksCleared{});
        break;
      case index::EventKind::kRemoved: {
        BlockRemoved r;
        const auto h = b.hashes_of(e);
        r.block_hashes.assign(h.begin(), h.end());
        r.medium = str(e.medium);
        r.group_idx = e.group_idx;
        w.events.push_back(std::move(r));
        break;
      }
      case index::EventKind::kStored: {
        BlockStored s;
        const auto h = b.hashes_of(e);
        s.block_hashes.assign(h.begin(), h.end());
        if (e.has_parent) s.parent = e.parent;
        const auto t = b.tokens_of(e);
        s.token_ids.assign(t.begin(), t.end());
        const auto pw = b.pair_words_of(e);
        s.pair_words.assign(pw.begin(), pw.end());
        s.block_size = e.block_size;
        s.lora_id = e.lora_id;
        s.medium = str(e.medium);
        s.lora_name = str(e.lora_name);
        s.cache_salt = str(e.cache_salt);
        s.session_id = str(e.session_id);
        s.group_idx = e.group_idx;
        s.kv_cache_spec_kind = str(e.spec_kind);
        s.kv_cache_spec_sliding_window = e.sliding_window;
        s.extra_keys_opaque = e.extra_opaque;
        if (e.has_extra_keys && !e.extra_opaque) {
          s.extra_keys_cbor.emplace();
          for (size_t i = 0; i < e.extra_count; ++i) {
            s.extra_keys_cbor->emplace_back(b.extra_keys_of(e, i));
          }
        }
        w.events.push_back(std::move(s));
        break;
      }
    }
  }
  return w;
}

}  // namespace kvgate::events
