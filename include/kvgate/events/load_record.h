// Pushed load records: an engine's load (running and waiting requests, KV usage, queued uncached
// prefill tokens) sent on its KV-event PUB socket, so load-aware routing need not wait for the
// gateway's next poll. The engines' KV-event wires carry no load; kvgate-mock pushes these records
// (`--push-loads`) after its steps and periodically while quiet, and any publisher may.
//
// The message: two frames, [kLoadTopic, msgpack map]. Subscribers that only read three-frame
// KV-event messages ([topic, seq, payload]) count it as a bad frame and go on. The map's keys:
// "running", "waiting" (uint), "kv_usage" (float 0..1), "queued_prefill_tokens" (uint), "ts"
// (float, publisher's wall clock, seconds since the epoch), "dp_rank" (uint, optional). Unknown
// keys are ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvgate::events {

inline constexpr std::string_view kLoadTopic = "kvgate-load";

struct LoadRecord {
  uint32_t running = 0;
  uint32_t waiting = 0;
  double kv_usage = 0;
  uint64_t queued_prefill_tokens = 0;
  double ts = 0;
  std::optional<uint32_t> dp_rank;
  friend bool operator==(const LoadRecord&, const LoadRecord&) = default;
};

void encode_load_record(const LoadRecord& record, std::string* out);
// nullopt for a payload that is not such a map (or out of range: usage outside 0..1, counts that
// do not fit).
std::optional<LoadRecord> decode_load_record(std::span<const uint8_t> payload);

}  // namespace kvgate::events
