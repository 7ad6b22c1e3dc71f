// The mock's answers to generation requests: whole OpenAI answers, stream chunks, and the
// Responses API's objects and stream events, as vLLM writes them.
#include "mock/detail/api.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kvgate/core/json_writer.h"

namespace kvgate::mock::detail {
namespace {

constexpr std::string_view kWords[] = {
    "the",  "of",    "and",   "to",    "in",   "is",   "that", "for",  "it",   "as",   "was",
    "on",   "with",  "be",    "by",    "at",   "this", "are",  "from", "or",   "an",   "not",
    "but",  "all",   "have",  "we",    "can",  "more", "one",  "new",  "time", "data", "cache",
    "key",  "block", "token", "model", "fast", "mock", "gate", "node", "path", "tree", "load",
    "rank", "seq",   "step",  "pool",  "hit",  "miss", "warm", "cold", "kv",   "page", "fill",
    "copy", "hash",  "chain", "root",  "leaf", "run",  "lane", "ring", "queue"};

// A prompt's tokens count once however many choices it has (n): vLLM computes it once.
void write_usage(JsonWriter& w, const std::vector<ChoiceResult>& choices, uint32_t n) {
  uint64_t prompt = 0, completion = 0, cached = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    if (i % std::max<uint32_t>(n, 1) == 0) {
      prompt += c.prompt_tokens;
      cached += c.cached_tokens;
    }
    completion += c.output_tokens;
  }
  w.key("usage").begin_object();
  w.member("prompt_tokens", prompt).member("completion_tokens", completion);
  w.member("total_tokens", prompt + completion);
  w.key("prompt_tokens_details").begin_object().member("cached_tokens", cached).end_object();
  w.end_object();
}

std::string_view finish_reason(const ChoiceResult& c) {
  return c.aborted ? "abort" : c.finished ? "length" : "";
}

// vLLM's `token_ids` of a choice (return_token_ids): the tokens this answer or chunk carries.
void write_token_ids(JsonWriter& w, std::span<const TokenId> tokens) {
  w.key("token_ids").begin_array();
  for (TokenId t : tokens) w.value(t);
  w.end_array();
}

void write_finish(JsonWriter& w, const ChoiceResult& c) {
  w.key("finish_reason");
  if (c.finished || c.aborted) {
    w.value(finish_reason(c));
  } else {
    w.null();
  }
}

void write_meta_info(JsonWriter& w, const ResponseIds& ids, const ChoiceResult& c, size_t index,
                     double e2e) {
  w.key("meta_info").begin_object();
  w.member("id", index == 0 ? ids.id : ids.id + "-" + std::to_string(index));
  w.member("prompt_tokens", c.prompt_tokens).member("completion_tokens", c.output_tokens);
  w.member("cached_tokens", c.cached_tokens);
  w.key("finish_reason");
  if (c.finished || c.aborted) {
    w.begin_object().member("type", finish_reason(c));
    if (c.finished) w.member("length", c.output_tokens);
    w.end_object();
  } else {
    w.null();
  }
  if (e2e >= 0) w.member("e2e_latency", e2e);
  w.end_object();
}

// A made-up log probability of token `t` (fixed per id, so a client can check it).
double token_logprob(TokenId t) { return -0.125 * static_cast<double>(t % 8 + 1); }

// The answer's `logprobs`: null unless asked; a completion's {tokens, token_logprobs,
// top_logprobs, text_offset} or a chat answer's {content: [{token, logprob, top_logprobs}]}, the
// alternatives being the next ids after each token's.
void write_logprobs(JsonWriter& w, const ApiRequest& req, std::span<const TokenId> tokens) {
  w.key("logprobs");
  if (!req.logprobs) {
    w.null();
    return;
  }
  std::string text;
  auto word = [&text](TokenId t) -> const std::string& {
    text.clear();
    append_token_text(std::span<const TokenId>(&t, 1), &text);
    return text;
  };
  const uint32_t top = *req.logprobs;
  w.begin_object();
  if (req.kind == ApiKind::kChat) {
    w.key("content").begin_array();
    for (TokenId t : tokens) {
      w.begin_object().member("token", word(t)).member("logprob", token_logprob(t));
      w.key("top_logprobs").begin_array();
      for (uint32_t k = 0; k < top; ++k) {
        w.begin_object().member("token", word(t + k)).member("logprob", token_logprob(t + k));
        w.end_object();
      }
      w.end_array().end_object();
    }
    w.end_array().end_object();
    return;
  }
  w.key("tokens").begin_array();
  for (TokenId t : tokens) w.value(word(t));
  w.end_array().key("token_logprobs").begin_array();
  for (TokenId t : tokens) w.value(token_logprob(t));
  w.end_array().key("top_logprobs").begin_array();
  for (TokenId t : tokens) {
    w.begin_object();
    for (uint32_t k = 0; k < top; ++k) w.member(word(t + k), token_logprob(t + k));
    w.end_object();
  }
  w.end_array().end_object();
}

}  // namespace

void append_token_text(std::span<const TokenId> tokens, std::string* out) {
  constexpr size_t n = sizeof(kWords) / sizeof(kWords[0]);
  for (TokenId t : tokens) {
    out->push_back(' ');
    out->append(kWords[t % n]);
  }
}

namespace {

// The Responses API's response object for one choice; the mock stops only at the token limit,
// which the API reports as "incomplete" (max_output_tokens).
void write_responses_object(JsonWriter& w, const ResponseIds& ids, const ChoiceResult& c,
                            bool done) {
  std::string text;
  append_token_text(c.tokens, &text);
  w.begin_object().member("id", ids.id).member("object", "response");
  w.member("created_at", ids.created).member("model", ids.model);
  const bool cut = c.finished && !c.aborted;
  w.member("status", !done       ? "in_progress"
                     : c.aborted ? "cancelled"
                     : cut       ? "incomplete"
                                 : "completed");
  if (done && cut) {
    w.key("incomplete_details").begin_object().member("reason", "max_output_tokens").end_object();
  }
  w.key("output").begin_array();
  if (done) {
    w.begin_object().member("type", "message").member("id", "msg_" + ids.id);
    w.member("role", "assistant").member("status", "completed");
    w.key("content").begin_array().begin_object().member("type", "output_text");
    w.member("text", text).key("annotations").begin_array().end_array();
    w.end_object().end_array().end_object();
  }
  w.end_array();
  w.key("usage").begin_object();
  w.member("input_tokens", c.prompt_tokens);
  w.key("input_tokens_details")
      .begin_object()
      .member("cached_tokens", c.cached_tokens)
      .end_object();
  w.member("output_tokens", c.output_tokens);
  w.key("output_tokens_details").begin_object().member("reasoning_tokens", 0).end_object();
  w.member("total_tokens", c.prompt_tokens + c.output_tokens);
  w.end_object();
  w.end_object();
}

}  // namespace

std::string render_response(const ApiRequest& req, const ResponseIds& ids,
                            const std::vector<ChoiceResult>& choices, double e2e_seconds,
                            std::string_view kv_transfer_params) {
  std::string out;
  JsonWriter w(&out);
  if (req.kind == ApiKind::kResponses) {
    write_responses_object(w, ids, choices.at(0), /*done=*/true);
    return out;
  }
  std::string text;
  if (req.kind == ApiKind::kGenerate) {
    if (req.batch) w.begin_array();
    for (size_t i = 0; i < choices.size(); ++i) {
      text.clear();
      append_token_text(choices[i].tokens, &text);
      w.begin_object().member("text", text);
      w.key("output_ids").begin_array();
      for (TokenId t : choices[i].tokens) w.value(t);
      w.end_array();
      write_meta_info(w, ids, choices[i], i, e2e_seconds);
      w.end_object();
    }
    if (req.batch) w.end_array();
    return out;
  }
  const bool chat = req.kind == ApiKind::kChat;
  w.begin_object().member("id", ids.id);
  w.member("object", chat ? "chat.completion" : "text_completion");
  w.member("created", ids.created).member("model", ids.model);
  w.key("choices").begin_array();
  for (size_t i = 0; i < choices.size(); ++i) {
    text.clear();
    append_token_text(choices[i].tokens, &text);
    w.begin_object().member("index", i);
    if (chat) {
      w.key("message").begin_object().member("role", "assistant").member("content", text);
      w.end_object();
    } else {
      w.member("text", text);
    }
    if (req.return_token_ids) write_token_ids(w, choices[i].tokens);
    write_logprobs(w, req, choices[i].tokens);
    write_finish(w, choices[i]);
    w.end_object();
  }
  w.end_array();
  write_usage(w, choices, req.n);
  if (!kv_transfer_params.empty()) w.key("kv_transfer_params").raw(kv_transfer_params);
  w.end_object();
  return out;
}

std::string render_chunk(const ApiRequest& req, const ResponseIds& ids, size_t index,
                         const ChoiceResult& choice, bool first_chunk,
                         std::string_view text_so_far) {
  std::string out;
  JsonWriter w(&out);
  if (req.kind == ApiKind::kGenerate) {
    w.begin_object().member("text", text_so_far);
    w.key("output_ids").begin_array();
    for (TokenId t : choice.tokens) w.value(t);
    w.end_array();
    w.member("index", index);
    write_meta_info(w, ids, choice, index, -1);
    w.end_object();
    return out;
  }
  const bool chat = req.kind == ApiKind::kChat;
  std::string text;
  append_token_text(choice.tokens, &text);
  w.begin_object().member("id", ids.id);
  w.member("object", chat ? "chat.completion.chunk" : "text_completion");
  w.member("created", ids.created).member("model", ids.model);
  w.key("choices").begin_array().begin_object().member("index", index);
  if (chat) {
    w.key("delta").begin_object();
    if (first_chunk) w.member("role", "assistant");
    w.member("content", text).end_object();
  } else {
    w.member("text", text);
  }
  if (req.return_token_ids) write_token_ids(w, choice.tokens);
  write_logprobs(w, req, choice.tokens);
  write_finish(w, choice);
  w.end_object().end_array();
  w.end_object();
  return out;
}

std::string render_usage_chunk(const ApiRequest& req, const ResponseIds& ids,
                               const std::vector<ChoiceResult>& choices) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("id", ids.id);
  w.member("object", req.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion");
  w.member("created", ids.created).member("model", ids.model);
  w.key("choices").begin_array().end_array();
  write_usage(w, choices, req.n);
  w.end_object();
  return out;
}

}  // namespace kvgate::mock::detail

namespace kvgate::mock::detail {

namespace {

// The message item of a Responses stream: in progress and empty, or completed with its text.
void write_message_item(JsonWriter& w, const ResponseIds& ids, const std::string* text) {
  w.begin_object().member("id", "msg_" + ids.id).member("type", "message");
  w.member("status", text != nullptr ? "completed" : "in_progress").member("role", "assistant");
  w.key("content").begin_array();
  if (text != nullptr) {
    w.begin_object().member("type", "output_text").member("text", *text);
    w.key("annotations").begin_array().end_array().end_object();
  }
  w.end_array().end_object();
}

void write_text_part(JsonWriter& w, std::string_view text) {
  w.begin_object().member("type", "output_text").member("text", text);
  w.key("annotations").begin_array().end_array().end_object();
}

// An event's head: its type and the next sequence number.
void begin_event(JsonWriter& w, std::string_view type, uint64_t* sequence) {
  w.begin_object().member("type", type).member("sequence_number", (*sequence)++);
}

// The item-level fields of a content event.
void write_content_place(JsonWriter& w, const ResponseIds& ids) {
  w.member("item_id", "msg_" + ids.id).member("output_index", 0).member("content_index", 0);
}

}  // namespace

std::vector<std::string> render_response_opening(const ResponseIds& ids, uint64_t* sequence) {
  std::vector<std::string> events(4);
  for (size_t i = 0; i < 2; ++i) {
    JsonWriter w(&events[i]);
    begin_event(w, i == 0 ? "response.created" : "response.in_progress", sequence);
    w.key("response");
    write_responses_object(w, ids, ChoiceResult{}, /*done=*/false);
    w.end_object();
  }
  JsonWriter item(&events[2]);
  begin_event(item, "response.output_item.added", sequence);
  item.member("output_index", 0).key("item");
  write_message_item(item, ids, nullptr);
  item.end_object();
  JsonWriter part(&events[3]);
  begin_event(part, "response.content_part.added", sequence);
  write_content_place(part, ids);
  part.key("part");
  write_text_part(part, "");
  part.end_object();
  return events;
}

std::string render_response_delta(const ResponseIds& ids, const ChoiceResult& choice,
                                  uint64_t* sequence) {
  std::string delta;
  append_token_text(choice.tokens, &delta);
  std::string out;
  JsonWriter w(&out);
  begin_event(w, "response.output_text.delta", sequence);
  write_content_place(w, ids);
  w.member("delta", delta).end_object();
  return out;
}

std::vector<std::string> render_response_closing(const ResponseIds& ids, const ChoiceResult& choice,
                                                 uint64_t* sequence) {
  std::string text;
  append_token_text(choice.tokens, &text);
  std::vector<std::string> events(4);
  JsonWriter done(&events[0]);
  begin_event(done, "response.output_text.done", sequence);
  write_content_place(done, ids);
  done.member("text", text).end_object();
  JsonWriter part(&events[1]);
  begin_event(part, "response.content_part.done", sequence);
  write_content_place(part, ids);
  part.key("part");
  write_text_part(part, text);
  part.end_object();
  JsonWriter item(&events[2]);
  begin_event(item, "response.output_item.done", sequence);
  item.member("output_index", 0).key("item");
  write_message_item(item, ids, &text);
  item.end_object();
  JsonWriter completed(&events[3]);
  begin_event(completed, "response.completed", sequence);
  completed.key("response");
  write_responses_object(completed, ids, choice, /*done=*/true);
  completed.end_object();
  return events;
}

}  // namespace kvgate::mock::detail
