#include "mock/detail/api.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
Status read_prompts(const element& e, const tokenizer::PromptTokenizer& tok, ApiRequest* r,
                    std::string_view what) {
  std::string_view text;
  if (e.get(text) == simdjson::SUCCESS) {
    r->prompts.emplace_back();
    if (Status s = tok.encode(text, &r->prompts.back()); !s.ok())
      return bad(std::string(s.message()));
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
      if (Status s = tok.encode(text, &r->prompts.back()); !s.ok())
        return bad(std::string(s.message()));
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

// A bootstrap field's value: itself, or a batch's list of them (its first entry).
bool bootstrap_value(const object& o, std::string_view key, element* out) {
  if (o.at_key(key).get(*out) != simdjson::SUCCESS || out->is_null()) return false;
  array arr;
  if (out->get(arr) == simdjson::SUCCESS) {
    if (arr.size() == 0) return false;
    *out = arr.at(0).value_unsafe();
  }
  return !out->is_null();
}

Status read_bootstrap(const object& o, BootstrapFields* b) {
  element e;
  if (bootstrap_value(o, "bootstrap_host", &e)) {
    std::string_view host;
    if (e.get(host) != simdjson::SUCCESS || host.empty()) {
      return bad("bootstrap_host must be a host name");
    }
    b->host = std::string(host);
  }
  if (bootstrap_value(o, "bootstrap_port", &e)) {
    int64_t v = 0;
    if (e.get(v) != simdjson::SUCCESS || v <= 0 || v > 65535) {
      return bad("bootstrap_port must be a port number");
    }
    b->port = static_cast<uint16_t>(v);
  }
  if (bootstrap_value(o, "bootstrap_room", &e)) {
    int64_t v = 0;  // an int64: SGLang draws rooms in [0, 2^63 - 1]
    if (e.get(v) != simdjson::SUCCESS || v < 0) {
      return bad("bootstrap_room must be an integer in [0, 2^63 - 1]");
    }
    b->room = static_cast<uint64_t>(v);
  }
  return Status();
}

Status read_kv_transfer(const object& o, KvTransferParams* kv) {
  element e;
  if (o.at_key("kv_transfer_params").get(e) != simdjson::SUCCESS || e.is_null()) return Status();
  object p;
  if (e.get(p) != simdjson::SUCCESS) return bad("kv_transfer_params must be an object");
  kv->present = true;
  auto flag = [&p](std::string_view key, bool* out) {
    element v;
    if (p.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) return true;
    return v.get(*out) == simdjson::SUCCESS;
  };
  if (!flag("do_remote_decode", &kv->do_remote_decode) ||
      !flag("do_remote_prefill", &kv->do_remote_prefill)) {
    return bad("kv_transfer_params: do_remote_decode and do_remote_prefill must be booleans");
  }
  std::string_view text;
  if (p.at_key("remote_engine_id").get(e) == simdjson::SUCCESS && !e.is_null()) {
    if (e.get(text) != simdjson::SUCCESS || text.empty()) {
      return bad("kv_transfer_params.remote_engine_id must be a string");
    }
    kv->engine_id = std::string(text);
  }
  if (p.at_key("remote_host").get(e) == simdjson::SUCCESS && !e.is_null()) {
    if (e.get(text) != simdjson::SUCCESS || text.empty()) {
      return bad("kv_transfer_params.remote_host must be a host name");
    }
    kv->host = std::string(text);
  }
  if (p.at_key("remote_port").get(e) == simdjson::SUCCESS && !e.is_null()) {
    int64_t v = 0;
    if (e.get(v) != simdjson::SUCCESS || v <= 0 || v > 65535) {
      return bad("kv_transfer_params.remote_port must be a port number");
    }
    kv->port = static_cast<uint16_t>(v);
  }
  array ids;
  if (p.at_key("remote_block_ids").get(e) == simdjson::SUCCESS && !e.is_null()) {
    if (e.get(ids) != simdjson::SUCCESS) {
      return bad("kv_transfer_params.remote_block_ids must be a list of block ids");
    }
    kv->block_ids.emplace();
    for (element x : ids) {
      uint64_t v = 0;
      if (x.get(v) != simdjson::SUCCESS) {
        return bad("kv_transfer_params.remote_block_ids must be a list of block ids");
      }
      kv->block_ids->push_back(v);
    }
  }
  return Status();
}

// The prompt text of a chat request, rendered as vLLM renders it (the model's chat template when
// the tokenizer has one, with the request's tools and chat_template_kwargs), and its ids.
Status encode_chat(const object& o, std::span<const ChatMessage> msgs,
                   const tokenizer::PromptTokenizer& tok, std::vector<TokenId>* out) {
  tokenizer::ChatPrompt prompt{.messages = msgs};
  std::string messages_json, tools_json, kwargs_json;
  if (tok.has_chat_template()) {
    element e;
    if (o.at_key("messages").get(e) == simdjson::SUCCESS) messages_json = simdjson::minify(e);
    if (o.at_key("tools").get(e) == simdjson::SUCCESS && !e.is_null()) {
      tools_json = simdjson::minify(e);
    }
    if (o.at_key("chat_template_kwargs").get(e) == simdjson::SUCCESS && !e.is_null()) {
      kwargs_json = simdjson::minify(e);
    }
    prompt.messages_json = messages_json;
    prompt.tools_json = tools_json;
    prompt.template_kwargs_json = kwargs_json;
  }
  bool b = false;
  if (o.at_key("add_generation_prompt").get(b) == simdjson::SUCCESS) {
    prompt.add_generation_prompt = b;
  }
  if (o.at_key("continue_final_message").get(b) == simdjson::SUCCESS) {
    prompt.continue_final_message = b;
  }
  auto text = tok.render_chat(prompt);
  if (!text.ok()) return bad(std::string(message_of(text.status())));
  return tok.encode_chat(*text, static_cast<size_t>(-1), out);
}

Status read_chat(const object& o, const tokenizer::PromptTokenizer& tok, ApiRequest* r) {
  element messages;
  if (o.at_key("messages").get(messages) != simdjson::SUCCESS) return bad("messages is required");
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
  return encode_chat(o, msgs, tok, &r->prompts.back());
}

// A Responses request's prompt: `instructions` as a system message, then `input` (a text, or
// message items whose content is a text or a list of parts), rendered as a chat.
Status read_responses_input(const object& o, const tokenizer::PromptTokenizer& tok, ApiRequest* r) {
  std::vector<ChatMessage> msgs;
  std::vector<std::string> texts;  // owns what msgs point into
  std::string_view instructions;
  if (o.at_key("instructions").get(instructions) == simdjson::SUCCESS && !instructions.empty()) {
    texts.emplace_back(instructions);
  }
  element input;
  if (o.at_key("input").get(input) != simdjson::SUCCESS) return bad("input is required");
  std::vector<std::string_view> roles;
  if (!texts.empty()) roles.push_back("system");
  std::string_view text;
  array items;
  if (input.get(text) == simdjson::SUCCESS) {
    roles.push_back("user");
    texts.emplace_back(text);
  } else if (input.get(items) == simdjson::SUCCESS && items.size() > 0) {
    for (element item : items) {
      object io;
      std::string_view role;
      if (item.get(io) != simdjson::SUCCESS) return bad("input items must be objects");
      if (io.at_key("role").get(role) != simdjson::SUCCESS) continue;  // not a message item
      std::string content;
      element c;
      array parts;
      if (io.at_key("content").get(c) == simdjson::SUCCESS) {
        if (c.get(text) == simdjson::SUCCESS) {
          content = text;
        } else if (c.get(parts) == simdjson::SUCCESS) {
          for (element part : parts) {
            if (part.at_key("text").get(text) == simdjson::SUCCESS) content.append(text);
          }
        } else {
          return bad("input item content must be a string or a list of parts");
        }
      }
      roles.push_back(role);
      texts.push_back(std::move(content));
    }
  } else {
    return bad("input must be a string or a non-empty list of items");
  }
  if (roles.empty()) return bad("input holds no message");
  for (size_t i = 0; i < roles.size(); ++i) msgs.push_back({roles[i], texts[i]});
  r->prompts.emplace_back();
  tokenizer::ChatPrompt prompt{.messages = msgs};
  auto rendered = tok.render_chat(prompt);
  if (!rendered.ok()) return bad(std::string(message_of(rendered.status())));
  return tok.encode_chat(*rendered, static_cast<size_t>(-1), &r->prompts.back());
}

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

// `logprobs` as the completions API (a count) or the chat API (a flag and top_logprobs) says it.
Status read_logprobs(const object& o, ApiRequest* r) {
  element e;
  if (o.at_key("logprobs").get(e) != simdjson::SUCCESS || e.is_null()) return Status();
  bool on = false;
  if (r->kind == ApiKind::kChat && e.get(on) == simdjson::SUCCESS) {
    if (!on) return Status();
    auto top = read_count(o, "top_logprobs", 0);
    if (!top.ok()) return top.status();
    r->logprobs = *top;
    return Status();
  }
  auto top = read_count(o, "logprobs", 0);
  if (!top.ok()) return top.status();
  r->logprobs = *top;
  return Status();
}

// OpenAI's n: choices per prompt, each prompt then listed n times in a row (choice index
// prompt * n + j, as vLLM numbers them).
Status read_choices_per_prompt(const object& o, ApiRequest* r) {
  constexpr uint32_t kMostChoices = 128;
  auto n = read_count(o, "n", 1);
  if (!n.ok()) return n.status();
  if (*n == 0 || *n > kMostChoices) return bad("n must be between 1 and 128");
  r->n = *n;
  if (*n == 1) return Status();
  std::vector<std::vector<TokenId>> each;
  each.reserve(r->prompts.size() * *n);
  for (const auto& p : r->prompts) each.insert(each.end(), *n, p);
  r->prompts = std::move(each);
  return Status();
}

}  // namespace

Result<ApiRequest> parse_api_request(ApiKind kind, std::string_view body,
                                     const tokenizer::PromptTokenizer& tokenizer,
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
  r.return_token_ids = read_bool(o, "return_token_ids");
  object so;
  if (o.at_key("stream_options").get(so) == simdjson::SUCCESS) {
    r.include_usage = read_bool(so, "include_usage");
  }
  auto rank = read_count(o, "data_parallel_rank", std::numeric_limits<uint32_t>::max());
  if (!rank.ok()) return rank.status();
  if (*rank != std::numeric_limits<uint32_t>::max()) r.dp_rank = *rank;
  if (Status s = read_bootstrap(o, &r.bootstrap); !s.ok())
    r.bootstrap.error = std::string(s.message());
  if (kind == ApiKind::kCompletion || kind == ApiKind::kChat) {  // vLLM's routes only
    if (Status s = read_kv_transfer(o, &r.kv_transfer); !s.ok()) {
      r.kv_transfer.present = true;
      r.kv_transfer.error = std::string(s.message());
    }
  }

  element e;
  switch (kind) {
    case ApiKind::kCompletion: {
      if (o.at_key("prompt").get(e) != simdjson::SUCCESS) return bad("prompt is required");
      if (Status s = read_prompts(e, tokenizer, &r, "prompt"); !s.ok()) return s;
      auto mt = read_count(o, "max_tokens", 16);
      if (!mt.ok()) return mt.status();
      r.max_tokens = *mt;
      break;
    }
    case ApiKind::kChat: {
      if (Status s = read_chat(o, tokenizer, &r); !s.ok()) return s;
      auto mt = read_count(o, "max_completion_tokens", 0);
      if (!mt.ok()) return mt.status();
      auto legacy = read_count(o, "max_tokens", 16);
      if (!legacy.ok()) return legacy.status();
      r.max_tokens = *mt > 0 ? *mt : *legacy;
      break;
    }
    case ApiKind::kResponses: {
      if (Status s = read_responses_input(o, tokenizer, &r); !s.ok()) return s;
      auto mt = read_count(o, "max_output_tokens", 16);
      if (!mt.ok()) return mt.status();
      r.max_tokens = *mt;
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
  if (kind == ApiKind::kCompletion || kind == ApiKind::kChat) {
    if (Status s = read_choices_per_prompt(o, &r); !s.ok()) return s;
    if (Status s = read_logprobs(o, &r); !s.ok()) return s;
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

namespace kvgate::mock::detail {
namespace {

// encoding_format: "float" (the default: a JSON array) or "base64" (the little-endian float32
// values' bytes, base64: what the OpenAI SDKs ask for unless told otherwise).
Result<bool> wants_base64(const object& o) {
  element e;
  if (o.at_key("encoding_format").get(e) != simdjson::SUCCESS || e.is_null()) return false;
  std::string_view format;
  if (e.get(format) != simdjson::SUCCESS || (format != "float" && format != "base64")) {
    return absl::InvalidArgumentError("encoding_format must be \"float\" or \"base64\"");
  }
  return format == "base64";
}

std::string base64_of(std::span<const unsigned char> bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{bytes[i]} << 16) |
                       (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

void write_embedding(JsonWriter& w, const std::vector<double>& v, bool base64) {
  if (!base64) {
    w.key("embedding").begin_array();
    for (double x : v) w.value(x);
    w.end_array();
    return;
  }
  std::vector<unsigned char> bytes;
  for (double x : v) {
    const float f = static_cast<float>(x);
    uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<unsigned char>(u >> (8 * k)));
  }
  w.member("embedding", base64_of(bytes));
}

// A deterministic unit vector for a prompt: the mock's "embedding".
std::vector<double> embed(std::span<const TokenId> tokens) {
  constexpr size_t kDims = 8;
  std::vector<double> v(kDims, 0.0);
  for (TokenId t : tokens) {
    for (size_t d = 0; d < kDims; ++d) {
      v[d] += static_cast<double>((uint64_t{t} * 2654435761u + d * 40503u) % 1000) / 1000.0 - 0.5;
    }
  }
  double norm = 0;
  for (double x : v) norm += x * x;
  norm = std::sqrt(norm);
  if (norm > 0) {
    for (double& x : v) x /= norm;
  }
  return v;
}

// How much of the query a document covers: the share of the query's distinct tokens it holds.
double relevance(std::span<const TokenId> query, std::span<const TokenId> doc) {
  std::vector<TokenId> q(query.begin(), query.end()), d(doc.begin(), doc.end());
  std::sort(q.begin(), q.end());
  q.erase(std::unique(q.begin(), q.end()), q.end());
  std::sort(d.begin(), d.end());
  if (q.empty()) return 0;
  size_t hit = 0;
  for (TokenId t : q) hit += std::binary_search(d.begin(), d.end(), t);
  return static_cast<double>(hit) / static_cast<double>(q.size());
}

// Texts given as one string or a list of strings (rerank documents may be {"text": ...}).
Status read_texts(const element& e, std::string_view what, const tokenizer::PromptTokenizer& tok,
                  std::vector<std::string>* texts, std::vector<std::vector<TokenId>>* tokens) {
  std::string_view text;
  array arr;
  if (e.get(text) == simdjson::SUCCESS) {
    texts->emplace_back(text);
  } else if (e.get(arr) == simdjson::SUCCESS && arr.size() > 0) {
    for (element x : arr) {
      if (x.get(text) != simdjson::SUCCESS && x.at_key("text").get(text) != simdjson::SUCCESS) {
        return bad(std::string(what) + " must hold strings");
      }
      texts->emplace_back(text);
    }
  } else {
    return bad(std::string(what) + " must be a string or a non-empty list of strings");
  }
  for (const auto& t : *texts) {
    if (Status s = tok.encode(t, &tokens->emplace_back()); !s.ok())
      return bad(std::string(s.message()));
  }
  return Status();
}

void write_pool_usage(JsonWriter& w, uint64_t tokens) {
  w.key("usage").begin_object().member("prompt_tokens", tokens).member("total_tokens", tokens);
  w.end_object();
}

}  // namespace

Result<std::string> render_pooling(PoolingKind kind, std::string_view body,
                                   const tokenizer::PromptTokenizer& tokenizer,
                                   simdjson::dom::parser& parser, const ResponseIds& ids) {
  element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    return bad("body is not valid JSON");
  }
  object o;
  if (doc.get(o) != simdjson::SUCCESS) return bad("body must be a JSON object");
  std::string out;
  JsonWriter w(&out);
  uint64_t used = 0;
  element e;
  switch (kind) {
    case PoolingKind::kEmbeddings: {
      ApiRequest r;
      if (o.at_key("input").get(e) != simdjson::SUCCESS) return bad("input is required");
      if (Status s = read_prompts(e, tokenizer, &r, "input"); !s.ok()) return s;
      const Result<bool> base64 = wants_base64(o);
      if (!base64.ok()) return base64.status();
      w.begin_object().member("id", ids.id).member("object", "list");
      w.member("created", ids.created).member("model", ids.model);
      w.key("data").begin_array();
      for (size_t i = 0; i < r.prompts.size(); ++i) {
        used += r.prompts[i].size();
        w.begin_object().member("index", i).member("object", "embedding");
        write_embedding(w, embed(r.prompts[i]), *base64);
        w.end_object();
      }
      w.end_array();
      break;
    }
    case PoolingKind::kRerank: {
      std::vector<std::string> query_text, docs;
      std::vector<std::vector<TokenId>> query, doc_tokens;
      if (o.at_key("query").get(e) != simdjson::SUCCESS) return bad("query is required");
      std::string_view q;
      if (e.get(q) != simdjson::SUCCESS) return bad("query must be a string");
      if (Status s = read_texts(e, "query", tokenizer, &query_text, &query); !s.ok()) return s;
      if (o.at_key("documents").get(e) != simdjson::SUCCESS) return bad("documents is required");
      if (Status s = read_texts(e, "documents", tokenizer, &docs, &doc_tokens); !s.ok()) return s;
      auto top_n = read_count(o, "top_n", static_cast<uint32_t>(docs.size()));
      if (!top_n.ok()) return top_n.status();
      std::vector<std::pair<double, size_t>> ranked;
      used = query[0].size();
      for (size_t i = 0; i < docs.size(); ++i) {
        used += query[0].size() + doc_tokens[i].size();
        ranked.emplace_back(relevance(query[0], doc_tokens[i]), i);
      }
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      ranked.resize(std::min<size_t>(ranked.size(), *top_n));
      w.begin_object().member("id", ids.id).member("model", ids.model);
      w.key("results").begin_array();
      for (const auto& [score, i] : ranked) {
        w.begin_object().member("index", i);
        w.key("document").begin_object().member("text", docs[i]).end_object();
        w.member("relevance_score", score).end_object();
      }
      w.end_array();
      break;
    }
    case PoolingKind::kScore: {
      std::vector<std::string> t1, t2;
      std::vector<std::vector<TokenId>> k1, k2;
      if (o.at_key("text_1").get(e) != simdjson::SUCCESS) return bad("text_1 is required");
      if (Status s = read_texts(e, "text_1", tokenizer, &t1, &k1); !s.ok()) return s;
      if (o.at_key("text_2").get(e) != simdjson::SUCCESS) return bad("text_2 is required");
      if (Status s = read_texts(e, "text_2", tokenizer, &t2, &k2); !s.ok()) return s;
      if (k1.size() != 1 && k1.size() != k2.size()) {
        return bad("text_1 must be one text or as many texts as text_2");
      }
      w.begin_object().member("id", ids.id).member("object", "list");
      w.member("created", ids.created).member("model", ids.model);
      w.key("data").begin_array();
      for (size_t i = 0; i < k2.size(); ++i) {
        const auto& first = k1.size() == 1 ? k1[0] : k1[i];
        used += first.size() + k2[i].size();
        w.begin_object().member("index", i).member("object", "score");
        w.member("score", relevance(first, k2[i])).end_object();
      }
      w.end_array();
      break;
    }
  }
  write_pool_usage(w, used);
  w.end_object();
  return out;
}

Result<std::string> render_tokenize(std::string_view body,
                                    const tokenizer::PromptTokenizer& tokenizer,
                                    simdjson::dom::parser& parser, uint32_t max_model_len) {
  element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    return bad("body is not valid JSON");
  }
  const bool chat = doc.is_object() && doc["messages"].error() == simdjson::SUCCESS;
  auto r = parse_api_request(chat ? ApiKind::kChat : ApiKind::kCompletion, body, tokenizer, parser);
  if (!r.ok()) return r.status();
  if (r->prompts.size() != 1) return bad("tokenize takes one prompt");
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("count", r->prompts[0].size()).member("max_model_len", max_model_len);
  w.key("tokens").begin_array();
  for (TokenId t : r->prompts[0]) w.value(t);
  w.end_array().key("token_strs").null().end_object();
  return out;
}

Result<std::string> render_detokenize(std::string_view body, simdjson::dom::parser& parser) {
  element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    return bad("body is not valid JSON");
  }
  array list;
  if (doc["tokens"].get(list) != simdjson::SUCCESS) return bad("tokens must be a list of ids");
  std::vector<TokenId> ids;
  for (element e : list) {
    uint64_t id = 0;
    if (e.get(id) != simdjson::SUCCESS || id > std::numeric_limits<TokenId>::max()) {
      return bad("tokens must be a list of ids");
    }
    ids.push_back(static_cast<TokenId>(id));
  }
  std::string text;
  append_token_text(ids, &text);
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("prompt", text).end_object();
  return out;
}

}  // namespace kvgate::mock::detail
