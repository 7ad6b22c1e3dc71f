// Runner: the open-loop sender. Every selected row becomes one streamed /v1/completions request
// (or /v1/chat/completions with a chat tokenizer), sent at its due time whatever the answers
// before it are doing.
//
// One scheduler coroutine waits for each due time and spawns the request as a coroutine on the
// next context of a small IoPool (never a thread per request). A request builds its prompt, asks
// the oracle (if any) for the fleet's best prefix right before it is sent, then streams the
// answer through http::SseParser into a StreamReader. Keep-alive connections are pooled per
// context, so each pool is touched by its own thread only.
//
// Threading: run() from one control thread; it returns when every request has ended.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kvgate/corpus/mooncake_trace.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"
#include "replay/fleet.h"
#include "replay/oracle.h"
#include "replay/progress.h"
#include "replay/prompt.h"
#include "replay/record.h"
#include "replay/schedule.h"

namespace kvgate::replay {

struct RunnerOptions {
  std::string target_url;  // http://HOST:PORT
  // Replicas of the gateway at target_url (http://HOST:PORT each): row i goes to the i-th of
  // target_url and these, round-robin, as a load balancer in front of the replicas would send.
  std::vector<std::string> replica_urls;
  std::string model = "mock-8b";
  uint64_t max_output_tokens = 0;  // 0: the row's output_length as is
  size_t threads = 2;
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{300'000};  // up to the answer's head
  std::chrono::milliseconds idle_timeout{120'000};     // between two pieces of a stream
  // Not null: chat requests (chat_messages()), rendered and encoded with it for the oracle.
  const tokenizer::PromptTokenizer* chat_tokenizer = nullptr;
  uint32_t chat_words_per_id = 40;
};

struct RunInput {
  std::vector<const corpus::TraceRow*> rows;  // the selection, in trace order
  std::vector<size_t> row_numbers;            // their row numbers in the file
  Schedule schedule;                          // of the same rows
};

class Runner {
 public:
  Runner(RunnerOptions options, const PromptBuilder& prompts, const EventOracle* oracle)
      : options_(std::move(options)), prompts_(prompts), oracle_(oracle) {}

  // Records in the order of input.rows. `counters` are bumped as requests go and end.
  Result<std::vector<RequestRecord>> run(const RunInput& input, Counters* counters);

  // Wall time of the last run(), from its start to the end of its last request.
  double wall_seconds() const { return wall_s_; }

 private:
  class Run;
  RunnerOptions options_;
  const PromptBuilder& prompts_;
  const EventOracle* oracle_;
  double wall_s_ = 0;
};

// The max_tokens sent for a row: its output_length, capped by `cap` (0: no cap), at least 1.
uint64_t max_tokens_for(uint64_t output_length, uint64_t cap);

}  // namespace kvgate::replay
