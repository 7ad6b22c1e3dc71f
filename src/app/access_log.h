// AccessLog: one line per request answered, on stdout (the process log stays on stderr), so an
// operator can follow traffic, or ship it, apart from the gateway's own messages.
//
//   --access-log text   POST /v1/completions 200 model=m worker=http://w:8000 rank=- matched=12
//                       decision_us=4.2 ttft_ms=35.1 duration_ms=812.4 attempts=1 id=3f2a...
//                       branch=affinity decision="policy=cache_aware; branch=affinity; ..."
//   --access-log json   the same fields as one JSON object per line, and "time" (when the line
//                       was written, UTC, RFC 3339 with milliseconds), "client" (the peer's
//                       address), and on generation routes prompt_tokens and completion_tokens;
//                       times in ms and µs to three decimals
//
// Generation routes log everything the decision knew; other routes log method, path, status,
// duration and request id. A field that does not apply is "-" (text) or absent (JSON).
//
// Threading: immutable after construction; write() from any thread (one write(2) per line, so
// lines never interleave).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "kvgate/core/result.h"
#include "kvgate/http/message.h"

namespace kvgate::app {

enum class AccessLogFormat { kOff, kText, kJson };
Result<AccessLogFormat> parse_access_log_format(std::string_view s);

struct AccessRecord {
  std::string_view method;
  std::string_view path;
  std::string_view request_id;
  std::string_view client;  // the peer's address ("" when not known)
  unsigned status = 0;
  double duration_ms = 0;
  // Generation routes only:
  std::string_view model;
  std::string_view worker;          // the last worker tried ("" when none was)
  std::string_view prefill_worker;  // its prefill worker, when that was a prefill/decode pair
  int32_t rank = -1;                // the pinned data-parallel rank, -1 for none
  bool routed = false;              // a decision was made (matched and decision_us hold)
  uint32_t matched_blocks = 0;
  double decision_us = 0;
  std::string_view branch;    // the policy's branch (routed)
  std::string_view decision;  // the x-kvgate-decision text (app/decision_report.h), the last try's
  double ttft_ms = -1;        // streams: to the first byte from the worker
  double queued_ms = -1;      // the wait in the admission queue (-1: no queue, or not admitted)
  uint32_t attempts = 0;
  std::string_view tenant;         // its key's tenant (--api-keys-file), "" for none
  std::string_view priority;       // its class (critical, standard, sheddable), "" before admission
  int64_t prompt_tokens = -1;      // as routed (-1: not parsed)
  int64_t completion_tokens = -1;  // as the engine's usage said (-1: not said)
};

// The address `req` came from ("" when it did not come from a socket: the gRPC front).
std::string peer_address(const http::Request& req);

// A sink that appends lines to `path`, rotated at 100 MiB with five files kept (--log-dir).
Result<std::function<void(std::string_view)>> rotating_access_log(const std::string& path);

class AccessLog {
 public:
  using Sink = std::function<void(std::string_view line)>;
  // `sink` receives each line with its newline (default: stdout).
  explicit AccessLog(AccessLogFormat format, Sink sink = {});

  bool enabled() const { return format_ != AccessLogFormat::kOff; }
  void write(const AccessRecord& r) const;
  // The line for `r`, newline included.
  static std::string line(AccessLogFormat format, const AccessRecord& r);

 private:
  AccessLogFormat format_;
  Sink sink_;
};

}  // namespace kvgate::app
