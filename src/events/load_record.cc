#include "kvgate/events/load_record.h"

#include <msgpack.hpp>

#include "events/detail/msgpack_sink.h"

namespace kvgate::events {

void encode_load_record(const LoadRecord& r, std::string* out) {
  out->clear();
  detail::StringSink sink{out};
  detail::Packer pk(sink);
  pk.pack_map(r.dp_rank ? 6 : 5);
  detail::pack_str(pk, "running");
  pk.pack_uint32(r.running);
  detail::pack_str(pk, "waiting");
  pk.pack_uint32(r.waiting);
  detail::pack_str(pk, "kv_usage");
  pk.pack_double(r.kv_usage);
  detail::pack_str(pk, "queued_prefill_tokens");
  pk.pack_uint64(r.queued_prefill_tokens);
  detail::pack_str(pk, "ts");
  pk.pack_double(r.ts);
  if (r.dp_rank) {
    detail::pack_str(pk, "dp_rank");
    pk.pack_uint32(*r.dp_rank);
  }
}

namespace {

std::optional<uint64_t> as_uint(const msgpack::object& o) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) return o.via.u64;
  return std::nullopt;
}

std::optional<double> as_double(const msgpack::object& o) {
  if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64) return o.via.f64;
  if (o.type == msgpack::type::POSITIVE_INTEGER) return static_cast<double>(o.via.u64);
  return std::nullopt;
}

}  // namespace

std::optional<LoadRecord> decode_load_record(std::span<const uint8_t> payload) {
  if (payload.empty() || payload.size() > 4096) return std::nullopt;
  msgpack::object_handle handle;
  try {
    // Small limits: a load record is a flat map of a few numbers.
    const msgpack::unpack_limit limits(16, 16, 64, 64, 16, 2);
    handle = msgpack::unpack(reinterpret_cast<const char*>(payload.data()), payload.size(), nullptr,
                             nullptr, limits);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const msgpack::object& o = handle.get();
  if (o.type != msgpack::type::MAP) return std::nullopt;
  LoadRecord r;
  bool have_running = false;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const msgpack::object_kv& kv = o.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) continue;
    const std::string_view key(kv.key.via.str.ptr, kv.key.via.str.size);
    if (key == "running" || key == "waiting") {
      const auto v = as_uint(kv.val);
      if (!v || *v > UINT32_MAX) return std::nullopt;
      (key == "running" ? r.running : r.waiting) = static_cast<uint32_t>(*v);
      have_running |= key == "running";
    } else if (key == "kv_usage") {
      const auto v = as_double(kv.val);
      if (!v || !(*v >= 0 && *v <= 1)) return std::nullopt;
      r.kv_usage = *v;
    } else if (key == "queued_prefill_tokens") {
      const auto v = as_uint(kv.val);
      if (!v) return std::nullopt;
      r.queued_prefill_tokens = *v;
    } else if (key == "ts") {
      const auto v = as_double(kv.val);
      if (!v) return std::nullopt;
      r.ts = *v;
    } else if (key == "dp_rank") {
      const auto v = as_uint(kv.val);
      if (!v || *v > UINT32_MAX) return std::nullopt;
      r.dp_rank = static_cast<uint32_t>(*v);
    }
  }
  if (!have_running) return std::nullopt;
  return r;
}

}  // namespace kvgate::events
