// StreamReader: reads one OpenAI completions SSE stream (already split into events by
// http::SseParser) into a RequestRecord: the response id, the time of each content chunk, usage
// (prompt, completion and cached tokens, from the usage chunk that `stream_options.include_usage`
// asks for, or from a final chunk that carries usage), an error event, and [DONE].
//
// A chunk that is not JSON costs only that chunk: it is counted (bad_chunks) and skipped.
//
// Threading: one instance per request; its simdjson parser is per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "replay/record.h"

namespace kvgate::replay {

class StreamReader {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  StreamReader(RequestRecord* record, TimePoint sent) : rec_(record), sent_(sent) {}

  // One SSE data payload, received at `now`.
  void on_event(std::string_view data, TimePoint now);
  // The stream ended at `now` (cleanly or not): fills e2e, and output tokens without usage.
  void finish(TimePoint now);

  bool done() const { return done_; }
  bool errored() const { return errored_; }
  uint64_t content_chunks() const { return chunks_; }
  uint64_t bad_chunks() const { return bad_chunks_; }

 private:
  RequestRecord* rec_;
  TimePoint sent_;
  TimePoint last_{};
  uint64_t chunks_ = 0;
  uint64_t bad_chunks_ = 0;
  bool done_ = false;
  bool errored_ = false;
};

}  // namespace kvgate::replay
