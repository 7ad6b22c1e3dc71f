#include "batch_json.h"

#include "kvgate/core/json_writer.h"

namespace kvgate::events::tool {
namespace {

std::string_view kind_name(index::EventKind k) {
  switch (k) {
    case index::EventKind::kStored:
      return "stored";
    case index::EventKind::kRemoved:
      return "removed";
    case index::EventKind::kCleared:
      return "cleared";
  }
  return "unknown";
}

std::string_view tier_name_of(index::Tier t) {
  switch (t) {
    case index::Tier::kDevice:
      return "device";
    case index::Tier::kHost:
      return "host";
    case index::Tier::kDisk:
      return "disk";
    case index::Tier::kExternal:
      return "external";
  }
  return "unknown";
}

template <class T>
void opt(JsonWriter& w, std::string_view key, const std::optional<T>& v) {
  if (!v) return;
  w.key(key);
  if constexpr (std::is_same_v<T, std::string_view>) {
    w.value(*v);
  } else {
    w.value(static_cast<int64_t>(*v));
  }
}

void drops(JsonWriter& w, const DropCounts& counts) {
  w.key("dropped").begin_object();
  for (size_t i = 0; i < kDropReasonCount; ++i) {
    if (counts[i] > 0) w.member(drop_reason_name(static_cast<DropReason>(i)), counts[i]);
  }
  w.end_object();
}

}  // namespace

void append_batch_json(const DecodedBatch& b, const NormalizedBatch* normalized, std::string* out) {
  JsonWriter w(out);
  w.begin_object();
  if (b.rejected) {
    w.member("rejected", drop_reason_name(*b.rejected));
  }
  if (b.ts_valid) w.member("ts", b.ts);
  if (b.dp_rank) w.member("dp_rank", *b.dp_rank);
  if (!b.dp_rank_valid) w.member("dp_rank_invalid", true);
  if (auto g = b.hints.guess()) w.member("layout", wire_format_name(*g));
  if (b.hints.map_batch) w.member("map_batch", true);
  w.member("events_in_payload", b.events_in_payload);
  w.key("events").begin_array();
  for (const DecodedEvent& e : b.events) {
    w.begin_object();
    w.member("type", kind_name(e.kind));
    if (e.kind != index::EventKind::kCleared) {
      w.key("block_hashes").begin_array();
      for (EngineHash h : b.hashes_of(e)) w.value(h);
      w.end_array();
    }
    if (e.kind == index::EventKind::kStored) {
      if (e.has_parent) w.member("parent", e.parent);
      w.member("block_size", e.block_size);
      w.key("token_ids").begin_array();
      for (TokenId t : b.tokens_of(e)) w.value(t);
      w.end_array();
      if (e.pair_count > 0) {
        w.key("pair_words").begin_array();
        for (TokenId t : b.pair_words_of(e)) w.value(t);
        w.end_array();
      }
      opt(w, "lora_id", e.lora_id);
      opt(w, "lora_name", e.lora_name);
      opt(w, "cache_salt", e.cache_salt);
      opt(w, "session_id", e.session_id);
      opt(w, "kv_cache_spec_kind", e.spec_kind);
      opt(w, "kv_cache_spec_sliding_window", e.sliding_window);
      if (e.has_extra_keys) w.member("extra_keys", e.extra_opaque ? "opaque" : "cbor");
    }
    opt(w, "medium", e.medium);
    opt(w, "group_idx", e.group_idx);
    w.end_object();
  }
  w.end_array();
  if (normalized) {
    // What the index receives: tiers, parents and the router's local hashes.
    w.key("index_events").begin_array();
    for (const index::Event& e : normalized->events) {
      w.begin_object();
      w.member("type", kind_name(e.kind));
      if (e.kind != index::EventKind::kCleared) {
        w.member("tier", tier_name_of(e.tier));
        w.key("engine_hashes").begin_array();
        for (EngineHash h : e.engine_hashes) w.value(h);
        w.end_array();
      }
      if (e.kind == index::EventKind::kStored) {
        if (e.has_parent) w.member("parent", e.parent);
        w.key("local_hashes").begin_array();
        for (LocalHash h : e.local_hashes) w.value(h);
        w.end_array();
      }
      w.end_object();
    }
    w.end_array();
  }
  drops(w, normalized ? normalized->dropped : b.dropped);
  w.end_object();
}

void append_report_json(const MessageReport& r, std::string* out) {
  JsonWriter w(out);
  w.begin_object();
  w.member("source", r.from_replay ? "replay" : "live");
  if (r.seq) w.member("seq", *r.seq);
  w.member("verdict", r.verdict);
  if (r.batch && !r.replay_end) {
    if (r.batch->rejected) w.member("rejected", drop_reason_name(*r.batch->rejected));
    if (r.batch->ts_valid) w.member("ts", r.batch->ts);
    w.member("events", static_cast<uint64_t>(r.batch->events.size()));
    drops(w, r.dropped);
  }
  w.end_object();
}

}  // namespace kvgate::events::tool
