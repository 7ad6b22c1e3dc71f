#include "app/answer_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>

#include "app/request_model.h"
#include "simdjson.h"

namespace kvgate::app {
namespace {

namespace dom = simdjson::dom;

// What one choice object adds: its message's (or, streamed, its delta's) content. False when the
// answer has no one text to keep (another choice, tool calls).
bool add_choice(dom::element choice, bool stream, std::string* text) {
  uint64_t index = 0;
  if (choice["index"].get_uint64().get(index) == simdjson::SUCCESS && index != 0) return false;
  dom::element part;
  if (choice[stream ? "delta" : "message"].get(part) != simdjson::SUCCESS) return true;
  dom::array calls;
  if (part["tool_calls"].get_array().get(calls) == simdjson::SUCCESS && calls.size() > 0) {
    return false;
  }
  std::string_view content;
  if (part["content"].get_string().get(content) == simdjson::SUCCESS) text->append(content);
  return true;
}

// What one answer object (a whole answer, or one streamed chunk) adds.
bool add_answer(dom::parser& parser, std::string_view json, bool stream, std::string* text) {
  dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) return false;
  dom::array choices;
  if (doc["choices"].get_array().get(choices) != simdjson::SUCCESS) return stream;
  if (!stream && choices.size() != 1) return false;
  for (dom::element choice : choices) {
    if (!add_choice(choice, stream, text)) return false;
  }
  return true;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

std::optional<std::string> chat_answer_text(std::string_view answer, bool stream) {
  thread_local dom::parser parser;
  std::string text;
  if (!stream) {
    if (!add_answer(parser, answer, false, &text)) return std::nullopt;
  } else {
    // One "data:" line per chunk (engines write each event on one line), "[DONE]" last.
    for (size_t at = 0; at < answer.size();) {
      size_t end = answer.find('\n', at);
      if (end == std::string_view::npos) end = answer.size();
      const std::string_view line = answer.substr(at, end - at);
      at = end + 1;
      if (!line.starts_with("data:")) continue;
      const std::string_view data = trimmed(line.substr(5));
      if (data.empty() || data == "[DONE]") continue;
      if (!add_answer(parser, data, true, &text)) return std::nullopt;
    }
  }
  if (text.empty()) return std::nullopt;
  return text;
}

std::optional<std::string> with_next_turn(std::string_view body, std::string_view answer) {
  thread_local simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(obj) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) return std::nullopt;
    if (key != "messages") continue;
    simdjson::ondemand::array messages;
    std::string_view raw;
    if (field.value().get_array().get(messages) != simdjson::SUCCESS ||
        messages.raw_json().get(raw) != simdjson::SUCCESS) {
      return std::nullopt;
    }
    const std::optional<std::string> next = tokenizer::next_turn_messages(raw, answer);
    if (!next) return std::nullopt;
    const auto start = static_cast<size_t>(raw.data() - padded.data());
    std::string out;
    out.reserve(body.size() + next->size() - raw.size());
    out.append(body.substr(0, start)).append(*next).append(body.substr(start + raw.size()));
    return out;
  }
  return std::nullopt;
}

void AnswerCapture::add(std::string_view piece) {
  if (overflowed_) return;
  if (bytes_.size() + piece.size() > kMaxBytes) {
    overflowed_ = true;
    std::string().swap(bytes_);
    return;
  }
  bytes_.append(piece);
}

std::optional<std::string> AnswerCapture::take() {
  if (overflowed_) return std::nullopt;
  return std::move(bytes_);
}

AnswerMemory::AnswerMemory(const tokenizer::PromptTokenizers& tokenizers)
    : tokenizers_(tokenizers), thread_([this] { run(); }) {}

AnswerMemory::~AnswerMemory() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void AnswerMemory::submit(std::string body, std::string answer, bool stream) {
  const size_t bytes = body.size() + answer.size();
  {
    MutexLock lock(&mu_);
    if (stopping_ || backlog_bytes_ + bytes > kMaxBacklogBytes) {
      ++stats_.dropped;
      return;
    }
    backlog_bytes_ += bytes;
    jobs_.push_back({std::move(body), std::move(answer), stream});
  }
  wake_.notify_one();
}

void AnswerMemory::remember(std::string_view body, std::string_view answer, bool stream) {
  const auto t0 = std::chrono::steady_clock::now();
  bool encoded = false;
  const std::optional<std::string> text = chat_answer_text(answer, stream);
  if (text) {
    const std::optional<std::string> next = with_next_turn(body, *text);
    ParsedRequest parsed;
    encoded =
        next &&
        parse_request(ApiRoute::kChatCompletions, *next, tokenizers_, kNoTokenLimit, &parsed).ok();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MutexLock lock(&mu_);
  stats_.seconds += seconds;
  if (!text) {
    ++stats_.no_answer;
  } else if (encoded) {
    ++stats_.encoded;
  } else {
    ++stats_.failed;
  }
}

AnswerMemoryStats AnswerMemory::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

void AnswerMemory::run() {
  // Below the executors and the large-body parser (nice 5): this work only saves a later
  // request time, it never holds one up.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
  for (;;) {
    Job job;
    {
      MutexLock lock(&mu_);
      while (jobs_.empty() && !stopping_) wake_.wait(&mu_);
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      backlog_bytes_ -= job.body.size() + job.answer.size();
    }
    remember(job.body, job.answer, job.stream);
  }
}

}  // namespace kvgate::app
