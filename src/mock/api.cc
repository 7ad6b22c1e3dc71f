// The mock's reading of OpenAI requests (completions, chat, Responses; pooling, tokenize and
// detokenize, answered here too). Generation answers are written in api_render.cc.
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
