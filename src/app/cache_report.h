// What an engine says it found cached for a prompt, against what the index predicted there
// (workers/cache_agreement.h keeps the tally per worker).
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvgate/core/json_writer.h"
#include "kvgate/workers/worker.h"

namespace spdlog {
class logger;
}

namespace kvgate::app {

// The tokens the index predicts an engine will find cached: the matched blocks, at most the
// whole blocks before the prompt's last token (engines always compute that one).
uint64_t predicted_cached_tokens(uint32_t matched_blocks, uint64_t prompt_tokens,
                                 uint32_t block_size);

// The number after the last "cached_tokens" key in `answer` (vLLM's
// usage.prompt_tokens_details.cached_tokens, SGLang's meta_info.cached_tokens), or nullopt when
// the answer says none (absent, null).
std::optional<uint64_t> reported_cached_tokens(std::string_view answer);
// The number after the last `quoted_key` (with its quotes, "\"completion_tokens\"") in `answer`.
std::optional<uint64_t> reported_count(std::string_view answer, std::string_view quoted_key);

// Adds an answer's reported cached tokens (when it says them) and the prediction to the
// worker's CacheAgreement, and says on `log` when the worker starts or stops disagreeing.
void note_cached_tokens(workers::Worker& worker, uint64_t predicted, std::string_view answer,
                        spdlog::logger& log);

// "cached_tokens": {"predicted", "reported", "agreement", "disagreeing"} of `a`, as GET /workers
// and the dashboard show it.
void write_cached_tokens(JsonWriter& w, const workers::CacheAgreement& a);

// A streamed OpenAI request whose client did not ask for usage: `body` with
// "stream_options":{"include_usage":true} added, so the engine ends the stream with its usage
// (cached tokens among it) for the gateway, which strips that event (stream_events.h). Nullopt when
// the body cannot take it (not an object).
std::optional<std::string> with_stream_usage(std::string_view body);

}  // namespace kvgate::app
