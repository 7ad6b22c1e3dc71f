// What the replay knows about one request when it has ended.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvgate::replay {

enum class OracleSource { kNone, kEvents, kMock };
const char* oracle_source_name(OracleSource s);

struct RequestRecord {
  size_t row = 0;          // row number in the trace file (0-based)
  double scheduled_s = 0;  // due time, seconds from the replay's start
  double actual_s = 0;     // when it was sent, seconds from the replay's start
  std::string worker;      // x-kvgate-worker, or the target when it is a worker
  // x-kvgate-prefill-worker: a prefill/decode pair's prefill. Its record (joined by request_id)
  // gives the request's cached and oracle tokens: the prompt was computed there.
  std::string prefill_worker;
  std::string request_id;           // sent as x-request-id
  std::optional<uint32_t> dp_rank;  // x-kvgate-dp-rank: the rank the gateway pinned
  unsigned status = 0;              // HTTP status of the answer head (0: none)
  bool answered = false;            // 200 and the stream ended with [DONE]
  double ttft_s = -1;               // first content chunk, from the send (-1: none)
  double e2e_s = -1;                // end of the stream, from the send
  std::vector<float> itl_s;         // gaps between consecutive content chunks
  uint64_t prompt_tokens = 0;       // sent
  bool has_usage = false;           // the stream carried usage (else the next three are estimates)
  uint64_t usage_prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t output_tokens = 0;  // usage.completion_tokens, else content chunks
  uint64_t max_tokens = 0;
  std::optional<uint64_t> oracle_tokens;
  OracleSource oracle_source = OracleSource::kNone;
  // The event oracle's figure for the holder that served the request (its rank, when pinned; else
  // the worker's best rank), at arrival: below oracle_tokens the router chose a shallower holder;
  // above cached_tokens the prefix was lost (evicted) while the request waited for admission.
  std::optional<uint64_t> routed_oracle_tokens;
  std::string response_id;  // the engine's id (joins the mock's request records)
  std::string error_kind;   // empty when answered
  std::string error;
};

}  // namespace kvgate::replay
