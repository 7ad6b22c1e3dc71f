// Reading a Mooncake request trace (JSON lines, see bench/traces/README.md):
//   {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [int, ...]}
// where each hash id names one 512-token block of the prompt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvgate/core/result.h"

namespace kvgate::corpus {

inline constexpr uint32_t kTraceBlockTokens = 512;

struct TraceRow {
  uint64_t timestamp_ms = 0;
  uint64_t input_length = 0;
  uint64_t output_length = 0;
  std::vector<uint64_t> hash_ids;
};

struct Trace {
  std::vector<TraceRow> rows;
  uint64_t max_hash_id = 0;
};

// Reads at most `max_rows` rows (0: all). A malformed line is an error naming the line.
Result<Trace> read_trace(const std::string& path, size_t max_rows = 0);
// The same from text (for tests).
Result<Trace> parse_trace(const std::string& text, const std::string& name, size_t max_rows = 0);

}  // namespace kvgate::corpus
