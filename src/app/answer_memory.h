// AnswerMemory: each chat answer encoded into the tokenizer's encode cache after it went to its
// client, so that the client's next turn (the whole conversation again, this answer in it) finds
// the answer there and encodes only its new question.
//
// A chat client resends its conversation every turn, and the encode cache makes whatever an
// earlier request carried cheap to encode again; but the assistant's latest answer was never in a
// request, so without this every turn encodes an answer besides its question, on the request
// path, before routing. Here the answer is rendered where the next request will render it
// (tokenizer::next_turn_messages) and encoded on a thread of its own at a low priority. Exact by
// construction: the encode cache is keyed by content, so an answer the client edits, or a template
// that renders it differently next time, is a miss, never a wrong id.
//
// Threading: submit() and stats() from any thread; the work runs on the memory's own thread,
// started by the constructor and joined by the destructor. What would not fit the backlog
// (kMaxBacklogBytes) is dropped and counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "kvgate/core/thread_annotations.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"

namespace kvgate::app {

// The text of a chat answer the client keeps as the assistant's message: `answer` is a 200 answer
// to POST /v1/chat/completions, its JSON body or, when `stream`, its SSE events. Nullopt when there
// is no such one text: no content, tool calls (the next turn carries them as the client wrote
// them), several choices (which one the client keeps is unknown), or not an answer at all.
std::optional<std::string> chat_answer_text(std::string_view answer, bool stream);

// The chat request `body` with `answer` as the assistant's message and an empty user message
// appended to its "messages" (next_turn_messages), every other field as sent. Nullopt when the
// body has no list of messages.
std::optional<std::string> with_next_turn(std::string_view body, std::string_view answer);

// The bytes of a streamed answer, kept while they pass to the client, up to a bound.
class AnswerCapture {
 public:
  static constexpr size_t kMaxBytes = 8 << 20;
  void add(std::string_view piece);
  // Everything the stream sent; nullopt when it outgrew kMaxBytes.
  std::optional<std::string> take();

 private:
  std::string bytes_;
  bool overflowed_ = false;
};

struct AnswerMemoryStats {
  uint64_t encoded = 0;    // answers now in the encode cache
  uint64_t no_answer = 0;  // answers without one text to keep (chat_answer_text)
  uint64_t failed = 0;     // the next turn could not be rendered or encoded
  uint64_t dropped = 0;    // not taken: the backlog was full
  double seconds = 0;      // spent rendering and encoding
};

class AnswerMemory {
 public:
  // Answers waiting beyond this many bytes (requests and answers) are dropped.
  static constexpr size_t kMaxBacklogBytes = 64 << 20;

  explicit AnswerMemory(const tokenizer::PromptTokenizers& tokenizers);
  ~AnswerMemory();
  AnswerMemory(const AnswerMemory&) = delete;
  AnswerMemory& operator=(const AnswerMemory&) = delete;

  // A chat request as its client sent it and the worker's 200 answer to it (see
  // chat_answer_text); returns at once.
  void submit(std::string body, std::string answer, bool stream);
  // Renders and encodes one answer on the calling thread (what the memory's thread does).
  void remember(std::string_view body, std::string_view answer, bool stream);
  AnswerMemoryStats stats() const;

 private:
  struct Job {
    std::string body, answer;
    bool stream = false;
  };
  void run();

  const tokenizer::PromptTokenizers& tokenizers_;
  mutable Mutex mu_;
  CondVar wake_;
  std::deque<Job> jobs_ KVGATE_GUARDED_BY(mu_);
  size_t backlog_bytes_ KVGATE_GUARDED_BY(mu_) = 0;
  bool stopping_ KVGATE_GUARDED_BY(mu_) = false;
  AnswerMemoryStats stats_ KVGATE_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace kvgate::app
