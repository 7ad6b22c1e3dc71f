#include "mock/detail/api.h"

#include <limits>

#include "kvgate/core/json_writer.h"

namespace kvgate::mock::detail {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

Status bad(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

bool is_int(const element& e) {
  return e.type() == element_type::INT64 || e.type() == element_type::UINT64;
}

// Reads an array of token ids.
Status read_ids(const element& e, std::vector<TokenId>* out, std::string_view what) {
  array arr;
  if (e.get(arr) != simdjson::SUCCESS) return bad(std::string(what) + " must be an array of ints");
  for (element x : arr) {
    int64_t v = 0;
    uint64_t u = 0;
    if (x.type() == element_type::INT64 && x.get(v) == simdjson::SUCCESS && v >= 0 &&
        v <= std::numeric_limits<uint32_t>::max()) {
      out->push_back(static_cast<TokenId>(v));
    } else if (x.type() == element_type::UINT64 && x.get(u) == simdjson::SUCCESS &&
               u <= std::numeric_limits<uint32_t>::max()) {
      out->push_back(static_cast<TokenId>(u));
    } else {
      return bad(std::string(what) + " holds a value that is not a token id");
    }
  }
  if (out->empty()) return bad(std::string(what) + " is empty");
  return Status();
}

// A prompt given as text, token ids, a list of texts or a list of token-id lists.
Status read_prompts(const element& e, const TestTokenizer& tok, ApiRequest* r,
                    std::string_view what) {
  std::string_view text;
  if (e.get(text) == simdjson::SUCCESS) {
    r->prompts.emplace_back();
    tok.encode(text, &r->prompts.back());
    if (r->prompts.back().empty()) return bad(std::string(what) + " is empty");
    return Status();
  }
  array arr;
  if (e.get(arr) != simdjson::SUCCESS || arr.size() == 0) {
    return bad(std::string(what) + " must be a string, token ids, or a non-empty list of them");
  }
  element first = arr.at(0).value_unsafe();
  if (is_int(first)) {
    r->prompts.emplace_back();
    return read_ids(e, &r->prompts.back(), what);
  }
  r->batch = true;
  for (element x : arr) {
    r->prompts.emplace_back();
    if (x.get(text) == simdjson::SUCCESS) {
      tok.encode(text, &r->prompts.back());
      if (r->prompts.back().empty()) return bad(std::string(what) + " holds an empty prompt");
    } else if (Status s = read_ids(x, &r->prompts.back(), what); !s.ok()) {
      return s;
    }
  }
  return Status();
}

Result<uint32_t> read_count(const object& o, std::string_view key, uint32_t fallback) {
  element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS || e.is_null()) return fallback;
  int64_t v = 0;
  uint64_t u = 0;
  if (e.get(v) == simdjson::SUCCESS && v >= 0 && v <= std::numeric_limits<uint32_t>::max()) {
    return static_cast<uint32_t>(v);
  }
  if (e.get(u) == simdjson::SUCCESS && u <= std::numeric_limits<uint32_t>::max()) {
    return static_cast<uint32_t>(u);
  }
  return bad(std::string(key) + " must be a non-negative integer");
}

bool read_bool(const object& o, std::string_view key) {
  bool b = false;
  return o.at_key(key).get(b) == simdjson::SUCCESS && b;
}

Status read_chat(const element& messages, const TestTokenizer& tok, ApiRequest* r) {
  array arr;
  if (messages.get(arr) != simdjson::SUCCESS || arr.size() == 0) {
    return bad("messages must be a non-empty array");
  }
  std::vector<std::string> contents;
  std::vector<std::string_view> roles;
  for (element m : arr) {
    object mo;
    std::string_view role;
    if (m.get(mo) != simdjson::SUCCESS || mo.at_key("role").get(role) != simdjson::SUCCESS) {
      return bad("each message needs a role");
    }
    element content;
    std::string text;
    if (mo.at_key("content").get(content) == simdjson::SUCCESS) {
      std::string_view s;
      array parts;
      if (content.get(s) == simdjson::SUCCESS) {
        text = s;
      } else if (content.get(parts) == simdjson::SUCCESS) {
        for (element p : parts) {  // content parts: the text ones, concatenated
          std::string_view t;
          if (p.at_key("text").get(t) == simdjson::SUCCESS) text.append(t);
        }
      } else if (!content.is_null()) {
        return bad("message content must be a string or an array of parts");
      }
    }
    roles.push_back(role);
    contents.push_back(std::move(text));
  }
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < roles.size(); ++i) msgs.push_back({roles[i], contents[i]});
  r->prompts.emplace_back();
  tok.encode(render_chat(msgs), &r->prompts.back());
  return Status();
}

constexpr std::string_view kWords[] = {
    "the",  "of",    "and",   "to",    "in",   "is",   "that", "for",  "it",   "as",   "was",
    "on",   "with",  "be",    "by",    "at",   "this", "are",  "from", "or",   "an",   "not",
    "but",  "all",   "have",  "we",    "can",  "more", "one",  "new",  "time", "data", "cache",
    "key",  "block", "token", "model", "fast", "mock", "gate", "node", "path", "tree", "load",
    "rank", "seq",   "step",  "pool",  "hit",  "miss", "warm", "cold", "kv",   "page", "fill",
    "copy", "hash",  "chain", "root",  "leaf", "run",  "lane", "ring", "queue"};

void write_usage(JsonWriter& w, const std::vector<ChoiceResult>& choices) {
  uint64_t prompt = 0, completion = 0, cached = 0;
  for (const auto& c : choices) {
    prompt += c.prompt_tokens;
    completion += c.output_tokens;
    cached += c.cached_tokens;
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

}  // namespace

Result<ApiRequest> parse_api_request(ApiKind kind, std::string_view body,
                                     const TestTokenizer& tokenizer,
                                     simdjson::dom::parser& parser) {
  element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    return bad("body is not valid JSON");
  }
  object o;
  if (doc.get(o) != simdjson::SUCCESS) return bad("body must be a JSON object");
  ApiRequest r;
  r.kind = kind;
  std::string_view model;
  if (o.at_key("model").get(model) == simdjson::SUCCESS) r.model = model;
  r.stream = read_bool(o, "stream");
  object so;
  if (o.at_key("stream_options").get(so) == simdjson::SUCCESS) {
    r.include_usage = read_bool(so, "include_usage");
  }
  auto rank = read_count(o, "data_parallel_rank", std::numeric_limits<uint32_t>::max());
  if (!rank.ok()) return rank.status();
  if (*rank != std::numeric_limits<uint32_t>::max()) r.dp_rank = *rank;

  element e;
  switch (kind) {
    case ApiKind::kCompletion: {
      if (o.at_key("prompt").get(e) != simdjson::SUCCESS) return bad("prompt is required");
      if (Status s = read_prompts(e, tokenizer, &r, "prompt"); !s.ok()) return s;
      auto n = read_count(o, "n", 1);
      if (!n.ok()) return n.status();
      if (*n != 1) return bad("n other than 1 is not supported");
      auto mt = read_count(o, "max_tokens", 16);
      if (!mt.ok()) return mt.status();
      r.max_tokens = *mt;
      break;
    }
    case ApiKind::kChat: {
      if (o.at_key("messages").get(e) != simdjson::SUCCESS) return bad("messages is required");
      if (Status s = read_chat(e, tokenizer, &r); !s.ok()) return s;
      auto mt = read_count(o, "max_completion_tokens", 0);
      if (!mt.ok()) return mt.status();
      auto legacy = read_count(o, "max_tokens", 16);
      if (!legacy.ok()) return legacy.status();
      r.max_tokens = *mt > 0 ? *mt : *legacy;
      break;
    }
    case ApiKind::kGenerate: {
      if (o.at_key("input_ids").get(e) == simdjson::SUCCESS) {
        if (Status s = read_prompts(e, tokenizer, &r, "input_ids"); !s.ok()) return s;
      } else if (o.at_key("text").get(e) == simdjson::SUCCESS) {
        if (Status s = read_prompts(e, tokenizer, &r, "text"); !s.ok()) return s;
      } else {
        return bad("input_ids or text is required");
      }
      r.max_tokens = 128;  // SGLang's default max_new_tokens
      object sp;
      if (o.at_key("sampling_params").get(sp) == simdjson::SUCCESS) {
        auto mt = read_count(sp, "max_new_tokens", 128);
        if (!mt.ok()) return mt.status();
        r.max_tokens = *mt;
      }
      break;
    }
  }
  if (r.max_tokens == 0) return bad("max_tokens must be at least 1");
  return r;
}

void append_token_text(std::span<const TokenId> tokens, std::string* out) {
  constexpr size_t n = sizeof(kWords) / sizeof(kWords[0]);
  for (TokenId t : tokens) {
    out->push_back(' ');
    out->append(kWords[t % n]);
  }
}

std::string render_response(const ApiRequest& req, const ResponseIds& ids,
                            const std::vector<ChoiceResult>& choices, double e2e_seconds) {
  std::string out;
  JsonWriter w(&out);
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
    w.key("logprobs").null();
    write_finish(w, choices[i]);
    w.end_object();
  }
  w.end_array();
  write_usage(w, choices);
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
  w.key("logprobs").null();
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
  write_usage(w, choices);
  w.end_object();
  return out;
}

}  // namespace kvgate::mock::detail
