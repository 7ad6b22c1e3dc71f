// The engine's answer to a v2 Generate, read into chunks and the Complete (grpc_generate_v2.h).
#include "app/grpc_generate_v2.h"

namespace kvgate::app::gateway_v2 {
namespace {

using simdjson::SUCCESS;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// `v` from `result`, left as it was when the field is absent or of another type.
template <class Result, class T>
void read_into(Result&& result, T& v) {
  T got;
  if (std::forward<Result>(result).get(got) == SUCCESS) v = std::move(got);
}

v2::FinishReason finish_reason_of(std::string_view reason) {
  if (reason == "length") return v2::FINISH_REASON_LENGTH;
  if (reason == "abort") return v2::FINISH_REASON_ABORT;
  if (reason == "tool_calls") return v2::FINISH_REASON_TOOL_CALLS;
  if (reason == "content_filter") return v2::FINISH_REASON_CONTENT_FILTER;
  return v2::FINISH_REASON_STOP;  // "stop", and an engine's own words for a stop
}

void add_ids(element list, v2::Chunk* chunk, size_t skip = 0) {
  array ids;
  if (list.get_array().get(ids) != SUCCESS) return;
  size_t i = 0;
  for (element id : ids) {
    uint64_t v = 0;
    if (i++ < skip || id.get_uint64().get(v) != SUCCESS) continue;
    chunk->add_token_ids(static_cast<uint32_t>(v));
  }
}

// A completion's logprobs: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}]}.
void add_completion_logprobs(object lp, v2::Chunk* chunk) {
  array tokens, values, tops;
  if (lp["tokens"].get_array().get(tokens) != SUCCESS) return;
  read_into(lp["token_logprobs"].get_array(), values);
  read_into(lp["top_logprobs"].get_array(), tops);
  size_t i = 0;
  for (element t : tokens) {
    v2::TokenLogprob* out = chunk->add_logprobs();
    std::string_view token;
    if (t.get_string().get(token) == SUCCESS) out->set_token(std::string(token));
    double v = 0;
    if (values.size() > i && values.at(i).get_double().get(v) == SUCCESS) out->set_logprob(v);
    object top;
    if (tops.size() > i && tops.at(i).get_object().get(top) == SUCCESS) {
      for (auto [key, value] : top) {
        v2::TopLogprob* alt = out->add_top_logprobs();
        alt->set_token(std::string(key));
        if (value.get_double().get(v) == SUCCESS) alt->set_logprob(v);
      }
    }
    ++i;
  }
}

// A chat answer's logprobs: {"content": [{"token", "logprob", "top_logprobs": [{...}]}]}.
void add_chat_logprobs(object lp, v2::Chunk* chunk) {
  array content;
  if (lp["content"].get_array().get(content) != SUCCESS) return;
  for (element e : content) {
    v2::TokenLogprob* out = chunk->add_logprobs();
    std::string_view token;
    double v = 0;
    if (e["token"].get_string().get(token) == SUCCESS) out->set_token(std::string(token));
    if (e["logprob"].get_double().get(v) == SUCCESS) out->set_logprob(v);
    array tops;
    if (e["top_logprobs"].get_array().get(tops) != SUCCESS) continue;
    for (element t : tops) {
      v2::TopLogprob* alt = out->add_top_logprobs();
      if (t["token"].get_string().get(token) == SUCCESS) alt->set_token(std::string(token));
      if (t["logprob"].get_double().get(v) == SUCCESS) alt->set_logprob(v);
    }
  }
}

// Tool calls as a chat stream's delta or a whole message carries them.
void add_tool_calls(array calls, v2::Chunk* chunk) {
  uint32_t position = 0;
  for (element c : calls) {
    v2::ToolCallDelta* out = chunk->add_tool_calls();
    uint64_t index = position++;
    read_into(c["index"].get_uint64(), index);
    out->set_index(static_cast<uint32_t>(index));
    std::string_view s;
    if (c["id"].get_string().get(s) == SUCCESS) out->set_id(std::string(s));
    if (c["function"]["name"].get_string().get(s) == SUCCESS) out->set_name(std::string(s));
    if (c["function"]["arguments"].get_string().get(s) == SUCCESS) {
      out->set_arguments(std::string(s));
    }
  }
}

// Tool call deltas joined into the calls they make up.
void join_tool_calls(const v2::Chunk& chunk, v2::Choice* choice) {
  for (const v2::ToolCallDelta& d : chunk.tool_calls()) {
    while (choice->tool_calls_size() <= static_cast<int>(d.index())) choice->add_tool_calls();
    v2::ToolCall* call = choice->mutable_tool_calls(static_cast<int>(d.index()));
    if (!d.id().empty()) call->set_id(d.id());
    if (call->type().empty()) call->set_type("function");
    if (!d.name().empty()) call->mutable_function()->set_name(d.name());
    call->mutable_function()->mutable_arguments()->append(d.arguments());
  }
}

}  // namespace

void merge_chunk(v2::Chunk& into, const v2::Chunk& more) {
  into.mutable_token_ids()->Add(more.token_ids().begin(), more.token_ids().end());
  into.mutable_text()->append(more.text());
  for (const auto& lp : more.logprobs()) *into.add_logprobs() = lp;
  for (const auto& call : more.tool_calls()) *into.add_tool_calls() = call;
  if (more.finish_reason() != v2::FINISH_REASON_UNSPECIFIED) {
    into.set_finish_reason(more.finish_reason());
  }
}

void AnswerReader::take(std::string_view json, std::vector<v2::Chunk>* out) {
  element doc;
  if (parser_.parse(json.data(), json.size()).get(doc) != SUCCESS) return;
  element err;
  if (doc["error"].get(err) == SUCCESS) {
    std::string_view message;
    error_ = err["message"].get_string().get(message) == SUCCESS ? std::string(message)
             : err.get_string().get(message) == SUCCESS          ? std::string(message)
                                                                 : "the worker failed";
    uint64_t code = 0;
    if (err["code"].get_uint64().get(code) == SUCCESS) error_status_ = unsigned(code);
    return;
  }
  if (sglang_) {
    take_sglang(doc, out);
    return;
  }
  array choices;
  if (doc["choices"].get_array().get(choices) == SUCCESS) {
    for (element c : choices) take_openai_choice(c, out);
  }
  take_usage(doc);
}

void AnswerReader::take_openai_choice(element c, std::vector<v2::Chunk>* out) {
  v2::Chunk chunk;
  uint64_t index = 0;
  read_into(c["index"].get_uint64(), index);
  chunk.set_index(static_cast<uint32_t>(index));
  std::string_view text, reason;
  // A completion's text, a chat chunk's delta, or a whole chat answer's message.
  if (return_text_ && (c["text"].get_string().get(text) == SUCCESS ||
                       c["delta"]["content"].get_string().get(text) == SUCCESS ||
                       c["message"]["content"].get_string().get(text) == SUCCESS)) {
    chunk.set_text(std::string(text));
  }
  element ids;
  if (c["token_ids"].get(ids) == SUCCESS) add_ids(ids, &chunk);
  object lp;
  if (c["logprobs"].get_object().get(lp) == SUCCESS) {
    if (lp["content"].error() == SUCCESS) {
      add_chat_logprobs(lp, &chunk);
    } else {
      add_completion_logprobs(lp, &chunk);
    }
  }
  array calls;
  if (c["delta"]["tool_calls"].get_array().get(calls) == SUCCESS ||
      c["message"]["tool_calls"].get_array().get(calls) == SUCCESS) {
    add_tool_calls(calls, &chunk);
  }
  if (c["finish_reason"].get_string().get(reason) == SUCCESS) {
    chunk.set_finish_reason(finish_reason_of(reason));
  }
  deliver(std::move(chunk), out);
}

// SGLang's /generate event: `text` and `output_ids` so far (or, with its incremental streaming,
// the new ids alone: then completion_tokens counts more than the list holds), and meta_info.
void AnswerReader::take_sglang(element doc, std::vector<v2::Chunk>* out) {
  v2::Chunk chunk;
  std::string_view text;
  if (return_text_ && doc["text"].get_string().get(text) == SUCCESS) {
    if (text.size() >= sglang_text_) chunk.set_text(std::string(text.substr(sglang_text_)));
    sglang_text_ = text.size();
  }
  object meta;
  const bool has_meta = doc["meta_info"].get_object().get(meta) == SUCCESS;
  uint64_t completion = 0, v = 0;
  if (has_meta) read_into(meta["completion_tokens"].get_uint64(), completion);
  array ids;
  if (doc["output_ids"].get_array().get(ids) == SUCCESS) {
    const bool cumulative = ids.size() == completion && completion >= sglang_ids_;
    add_ids(doc["output_ids"].value_unsafe(), &chunk, cumulative ? sglang_ids_ : 0);
    sglang_ids_ = cumulative ? ids.size() : sglang_ids_ + ids.size();
  }
  if (has_meta) {
    std::string_view reason;
    if (meta["finish_reason"]["type"].get_string().get(reason) == SUCCESS) {
      chunk.set_finish_reason(finish_reason_of(reason));
    }
    if (meta["prompt_tokens"].get_uint64().get(v) == SUCCESS) usage_.set_prompt_tokens(v);
    usage_.set_completion_tokens(static_cast<uint32_t>(completion));
    if (meta["cached_tokens"].get_uint64().get(v) == SUCCESS) usage_.set_cached_tokens(v);
  }
  deliver(std::move(chunk), out);
}

void AnswerReader::take_usage(element doc) {
  object usage;
  if (doc["usage"].get_object().get(usage) != SUCCESS) return;
  uint64_t v = 0;
  if (usage["prompt_tokens"].get_uint64().get(v) == SUCCESS) usage_.set_prompt_tokens(v);
  if (usage["completion_tokens"].get_uint64().get(v) == SUCCESS) usage_.set_completion_tokens(v);
  if (usage["prompt_tokens_details"]["cached_tokens"].get_uint64().get(v) == SUCCESS) {
    usage_.set_cached_tokens(static_cast<uint32_t>(v));
  }
}

void AnswerReader::deliver(v2::Chunk chunk, std::vector<v2::Chunk>* out) {
  v2::Choice& choice = choices_[chunk.index()];
  choice.set_index(chunk.index());
  if (chunk.finish_reason() != v2::FINISH_REASON_UNSPECIFIED) {
    choice.set_finish_reason(chunk.finish_reason());
  }
  if (stream_) {
    const bool says = chunk.token_ids_size() > 0 || !chunk.text().empty() ||
                      chunk.logprobs_size() > 0 || chunk.tool_calls_size() > 0 ||
                      chunk.finish_reason() != v2::FINISH_REASON_UNSPECIFIED;
    if (says) out->push_back(std::move(chunk));
    return;
  }
  choice.mutable_token_ids()->Add(chunk.token_ids().begin(), chunk.token_ids().end());
  choice.mutable_text()->append(chunk.text());
  for (auto& lp : *chunk.mutable_logprobs()) *choice.add_logprobs() = std::move(lp);
  join_tool_calls(chunk, &choice);
}

bool AnswerReader::finished() const {
  if (choices_.empty()) return false;
  for (const auto& [index, choice] : choices_) {
    if (choice.finish_reason() == v2::FINISH_REASON_UNSPECIFIED) return false;
  }
  return true;
}

v2::Complete AnswerReader::complete() {
  v2::Complete done;
  for (auto& [index, choice] : choices_) *done.add_choices() = std::move(choice);
  *done.mutable_usage() = usage_;
  return done;
}

}  // namespace kvgate::app::gateway_v2
