#include "app/request_model.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace kvgate::app {
namespace {

namespace od = simdjson::ondemand;
using namespace std::string_view_literals;  // a literal compared as "x"sv costs no strlen

Status bad(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError("'" + std::string(field) + "' " + std::string(what));
}

Status not_json() { return absl::InvalidArgumentError("the request body is not valid JSON"); }

// Whether a lookup's error means the body breaks there, rather than a member being absent or of
// another type. simdjson then gives up on the document (its parser pointer is cleared), and any
// further use of it (a rewind, a reset, the next member) reads through that null pointer: the
// request must end with a 400 at once.
bool broken(simdjson::error_code e) {
  return e != simdjson::SUCCESS && e != simdjson::NO_SUCH_FIELD && e != simdjson::INCORRECT_TYPE;
}

// OpenAI's words (clients read the limit from them), then where the limit comes from.
Status too_long(size_t limit, size_t at_least) {
  return absl::OutOfRangeError(
      "This model's maximum context length is " + std::to_string(limit) +
      " tokens. However, your prompt has at least " + std::to_string(at_least) +
      " tokens. Please reduce the length of the prompt. (The limit is the longest max_model_len "
      "the workers report, else kvgate's --max-model-len.)");
}

// Tokenizes `text` unless it cannot fit: its bytes alone bound its tokens from below, so a text
// far over the limit is refused without a pass over it, and encoding stops past the limit.
// `chat`: the text is a rendered chat prompt (encode_chat()).
Status encode_within(const PromptTokenizer& tok, std::string_view text, size_t limit,
                     std::vector<TokenId>* out, bool chat = false) {
  const size_t at_least = text.size() / tok.max_token_bytes();
  if (at_least > limit) return too_long(limit, at_least);
  if (Status s = chat ? tok.encode_chat(text, limit, out) : tok.encode(text, limit, out); !s.ok()) {
    return absl::InvalidArgumentError("the prompt cannot be tokenized: " +
                                      std::string(s.message()));
  }
  if (out->size() > limit) return too_long(limit, out->size());
  return absl::OkStatus();
}

// Reads an array of non-negative integers that fit a token id.
Status read_ids(od::array arr, std::string_view field, std::vector<TokenId>* out) {
  for (auto el : arr) {
    uint64_t v = 0;
    if (el.get_uint64().get(v) != simdjson::SUCCESS || v > UINT32_MAX) {
      return bad(field, "must be a list of token ids (integers from 0 to 4294967295)");
    }
    out->push_back(static_cast<TokenId>(v));
  }
  return absl::OkStatus();
}

// A completions prompt: text, ids, a list of texts, or a list of id lists (the first routes).
Status read_prompt(od::value v, std::string_view field, const PromptTokenizer& tok, size_t limit,
                   ParsedRequest* out) {
  od::json_type t;
  if (v.type().get(t) != simdjson::SUCCESS) return bad(field, "is not valid JSON");
  if (t == od::json_type::string) {
    std::string_view text;
    if (v.get_string().get(text) != simdjson::SUCCESS) return bad(field, "is not a valid string");
    return encode_within(tok, text, limit, &out->tokens);
  }
  if (t != od::json_type::array)
    return bad(field, "must be a string, a list of token ids, or a list of those");
  od::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return bad(field, "is not a valid list");
  bool first = true;
  std::optional<od::json_type> kind;  // every element must be of the first one's kind
  for (auto el : arr) {
    od::value item;
    if (el.get(item) != simdjson::SUCCESS) return bad(field, "is not valid JSON");
    od::json_type it;
    if (item.type().get(it) != simdjson::SUCCESS) return bad(field, "is not valid JSON");
    if (kind && *kind != it) return bad(field, "mixes token ids, texts and lists");
    kind = it;
    if (it == od::json_type::number) {
      uint64_t id = 0;
      if (item.get_uint64().get(id) != simdjson::SUCCESS || id > UINT32_MAX) {
        return bad(field, "must hold token ids (integers from 0 to 4294967295)");
      }
      out->tokens.push_back(static_cast<TokenId>(id));
      out->tokens_given = true;
      if (out->tokens.size() > limit) return too_long(limit, out->tokens.size());
      continue;
    }
    // A batch of prompts: the first one decides the route; the others are validated for type.
    if (it == od::json_type::string || it == od::json_type::array)
      out->batch = first ? 1 : out->batch + 1;
    if (it == od::json_type::string) {
      std::string_view text;
      if (item.get_string().get(text) != simdjson::SUCCESS)
        return bad(field, "holds an invalid string");
      if (first) {
        if (Status s = encode_within(tok, text, limit, &out->tokens); !s.ok()) return s;
      }
    } else if (it == od::json_type::array) {
      od::array ids;
      if (item.get_array().get(ids) != simdjson::SUCCESS)
        return bad(field, "holds an invalid list");
      std::vector<TokenId> scratch;
      if (Status s = read_ids(ids, field, first ? &out->tokens : &scratch); !s.ok()) return s;
      if (first) out->tokens_given = true;
      if (out->tokens.size() > limit) return too_long(limit, out->tokens.size());
    } else {
      return bad(field, "must be a string, a list of token ids, or a list of those");
    }
    first = false;
  }
  return absl::OkStatus();
}

// The prompt's texts as they are met, measured before one is decoded: a string of n raw bytes
// decodes to at least n / 6 bytes (\uXXXX escapes are the densest), which are at least that many
// over max_token_bytes tokens. A body of megabytes of messages is refused before its texts are
// copied, joined, rendered or tokenized.
class TextBudget {
 public:
  TextBudget(size_t max_tokens, size_t max_token_bytes)
      : max_tokens_(max_tokens), max_token_bytes_(std::max<size_t>(max_token_bytes, 1)) {}
  // Takes string value `v` (not yet read) into the sum; OutOfRange once the sum cannot fit.
  Status take(od::value& v) {
    if (max_tokens_ == kNoTokenLimit) return absl::OkStatus();
    raw_bytes_ += v.raw_json_token().size();
    const size_t at_least = raw_bytes_ / 6 / max_token_bytes_;
    return at_least > max_tokens_ ? too_long(max_tokens_, at_least) : absl::OkStatus();
  }

 private:
  const size_t max_tokens_;
  const size_t max_token_bytes_;
  size_t raw_bytes_ = 0;
};

// One chat-style message object: its role and its content (a text, or a list of typed parts
// whose "text" members are joined; null as empty where `null_content_ok`). `field` names the
// list it came from in errors ("messages", "input").
Status read_message(od::object msg, std::string_view field, bool null_content_ok,
                    TextBudget& budget, std::string* role, std::string* content) {
  const auto sub = [&](const char* name) { return std::string(field) + "." + name; };
  for (auto f : msg) {
    std::string_view key;
    if (f.unescaped_key().get(key) != simdjson::SUCCESS) return bad(field, "holds an invalid key");
    od::value val;
    if (f.value().get(val) != simdjson::SUCCESS) return bad(field, "is not valid JSON");
    if (key == "role"sv) {
      std::string_view r;
      if (val.get_string().get(r) != simdjson::SUCCESS) return bad(sub("role"), "must be a string");
      *role = r;
    } else if (key == "content"sv) {
      od::json_type t;
      if (val.type().get(t) != simdjson::SUCCESS) return bad(sub("content"), "is not valid JSON");
      if (t == od::json_type::string) {
        if (Status s = budget.take(val); !s.ok()) return s;
        std::string_view c;
        if (val.get_string().get(c) != simdjson::SUCCESS)
          return bad(sub("content"), "is not a valid string");
        *content = c;
      } else if (t == od::json_type::array) {
        od::array parts;
        if (val.get_array().get(parts) != simdjson::SUCCESS)
          return bad(sub("content"), "is not a valid list");
        for (auto p : parts) {
          od::object part;
          if (p.get_object().get(part) != simdjson::SUCCESS)
            return bad(sub("content"), "parts must be objects");
          od::value text_value;
          simdjson::error_code e = part["text"].get(text_value);
          std::string_view text;
          if (e == simdjson::SUCCESS) {
            if (Status s = budget.take(text_value); !s.ok()) return s;
            e = text_value.get_string().get(text);
          }
          if (e == simdjson::SUCCESS) content->append(text);
          if (broken(e)) return bad(sub("content"), "is not valid JSON");
        }
      } else if (t != od::json_type::null || !null_content_ok) {
        return bad(sub("content"), "must be a string or a list of content parts");
      }
    }
  }
  return absl::OkStatus();
}

// What a chat request's template is rendered from; the views point into the request body.
struct ChatFields {
  std::vector<std::string> roles, contents;
  std::string_view messages_json, tools_json, kwargs_json;
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

// The messages, checked, and kept as sent for the template.
Status read_messages(od::value v, TextBudget& budget, ChatFields* chat) {
  od::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS)
    return bad("messages", "must be a list of messages");
  for (auto el : arr) {
    od::object msg;
    if (el.get_object().get(msg) != simdjson::SUCCESS) return bad("messages", "must hold objects");
    std::string role, content;
    if (Status s = read_message(msg, "messages", /*null_content_ok=*/true, budget, &role, &content);
        !s.ok())
      return s;
    if (role.empty()) return bad("messages.role", "is required");
    chat->roles.push_back(std::move(role));
    chat->contents.push_back(std::move(content));
  }
  if (arr.reset().error() != simdjson::SUCCESS ||
      arr.raw_json().get(chat->messages_json) != simdjson::SUCCESS) {
    return bad("messages", "is not valid JSON");
  }
  return absl::OkStatus();
}

// An optional list or object kept as sent ("tools", "chat_template_kwargs"); null is none.
Status read_raw(od::value v, std::string_view field, bool list, std::string_view* out) {
  od::json_type t;
  if (v.type().get(t) != simdjson::SUCCESS) return bad(field, "is not valid JSON");
  if (t == od::json_type::null) return absl::OkStatus();
  if (list) {
    od::array a;
    if (t != od::json_type::array || v.get_array().get(a) != simdjson::SUCCESS ||
        a.raw_json().get(*out) != simdjson::SUCCESS)
      return bad(field, "must be a list");
  } else {
    od::object o;
    if (t != od::json_type::object || v.get_object().get(o) != simdjson::SUCCESS ||
        o.raw_json().get(*out) != simdjson::SUCCESS)
      return bad(field, "must be an object");
  }
  return absl::OkStatus();
}

// The chat prompt rendered with the model's template and encoded.
Status encode_chat(const PromptTokenizer& tok, const ChatFields& f, size_t limit,
                   std::vector<TokenId>* out) {
  if (f.add_generation_prompt && f.continue_final_message) {
    return bad("continue_final_message",
               "cannot be true together with add_generation_prompt (set that to false)");
  }
  std::vector<ChatMessage> msgs;
  msgs.reserve(f.roles.size());
  for (size_t i = 0; i < f.roles.size(); ++i) msgs.push_back({f.roles[i], f.contents[i]});
  tokenizer::ChatPrompt prompt{.messages = msgs,
                               .messages_json = f.messages_json,
                               .tools_json = f.tools_json,
                               .template_kwargs_json = f.kwargs_json,
                               .add_generation_prompt = f.add_generation_prompt,
                               .continue_final_message = f.continue_final_message};
  auto text = tok.render_chat(prompt);
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  return encode_within(tok, *text, limit, out, /*chat=*/true);
}

// A Responses input: a text (one user message) or message items ({role, content}; items of other
// types, without a role, are skipped). Appends to `roles` and `texts`.
Status read_response_input(od::value v, TextBudget& budget, std::vector<std::string>* roles,
                           std::vector<std::string>* texts) {
  od::json_type t;
  if (v.type().get(t) != simdjson::SUCCESS) return bad("input", "is not valid JSON");
  if (t == od::json_type::string) {
    if (Status s = budget.take(v); !s.ok()) return s;
    std::string_view text;
    if (v.get_string().get(text) != simdjson::SUCCESS) return bad("input", "is not a valid string");
    roles->emplace_back("user");
    texts->emplace_back(text);
    return absl::OkStatus();
  }
  od::array items;
  if (t != od::json_type::array || v.get_array().get(items) != simdjson::SUCCESS)
    return bad("input", "must be a string or a list of items");
  for (auto el : items) {
    od::object item;
    if (el.get_object().get(item) != simdjson::SUCCESS) return bad("input", "must hold objects");
    std::string role, content;
    if (Status s = read_message(item, "input", /*null_content_ok=*/false, budget, &role, &content);
        !s.ok())
      return s;
    if (role.empty()) continue;  // not a message item (a tool call's output, a reference)
    roles->push_back(std::move(role));
    texts->push_back(std::move(content));
  }
  return absl::OkStatus();
}

struct ParserState {
  od::parser parser;
  std::string buffer;
};
// Bodies up to this size parse with the thread's parser, which keeps its buffers; a larger one
// gets a parser of its own, freed with it, so one huge request does not pin its memory forever.
constexpr size_t kKeptParserBytes = 1 << 20;
thread_local ParserState tl_state;

}  // namespace

const char* api_route_name(ApiRoute r) {
  switch (r) {
    case ApiRoute::kCompletions:
      return "completions";
    case ApiRoute::kChatCompletions:
      return "chat_completions";
    case ApiRoute::kGenerate:
      return "generate";
    case ApiRoute::kEmbeddings:
      return "embeddings";
    case ApiRoute::kResponses:
      return "responses";
    case ApiRoute::kRerank:
      return "rerank";
    case ApiRoute::kScore:
      return "score";
  }
  return "unknown";
}

namespace {

// The index of the '"' that ends the JSON string whose contents begin at `start` (npos: none).
// memchr to each quote, which is escaped when an odd run of backslashes precedes it: the scan of
// a huge prompt runs at memory speed, not a byte at a time.
size_t string_end(std::string_view body, size_t start) {
  for (size_t at = start; at < body.size();) {
    const void* q = std::memchr(body.data() + at, '"', body.size() - at);
    if (q == nullptr) return std::string_view::npos;
    const size_t pos = static_cast<size_t>(static_cast<const char*>(q) - body.data());
    size_t slashes = 0;
    while (pos - slashes > start && body[pos - slashes - 1] == '\\') ++slashes;
    if (slashes % 2 == 0) return pos;
    at = pos + 1;
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<size_t> top_level_string_bytes(std::string_view body, std::string_view key) {
  // A small scanner: tracks nesting and strings, and at depth 1 reads keys.
  size_t depth = 0;
  bool expect_key = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '"') {
      const size_t start = i + 1;
      const size_t j = string_end(body, start);
      if (j == std::string_view::npos) return std::nullopt;
      const std::string_view text = body.substr(start, j - start);
      i = j;
      if (depth == 1 && expect_key) {
        expect_key = false;
        if (text != key) continue;
        // The value: skip ':' and blanks; only a string is measured.
        size_t k = i + 1;
        while (k < body.size() && (body[k] == ':' || body[k] == ' ' || body[k] == '\n' ||
                                   body[k] == '\t' || body[k] == '\r'))
          ++k;
        if (k >= body.size() || body[k] != '"') return std::nullopt;
        const size_t e = string_end(body, k + 1);
        if (e == std::string_view::npos) return std::nullopt;
        return e - k - 1;
      }
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
      expect_key = c == '{' && depth == 1;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return std::nullopt;
      --depth;
    } else if (c == ',' && depth == 1) {
      expect_key = true;
    }
  }
  return std::nullopt;
}

namespace {

bool is_null(od::value& v) {
  od::json_type t;
  return v.type().get(t) == simdjson::SUCCESS && t == od::json_type::null;
}

// The text member whose raw size bounds a route's prompt before the body is parsed ("" if none).
std::string_view raw_prompt_key(ApiRoute route) {
  return route == ApiRoute::kCompletions  ? "prompt"
         : route == ApiRoute::kGenerate   ? "text"
         : route == ApiRoute::kEmbeddings ? "input"
         : route == ApiRoute::kResponses  ? "input"
         : route == ApiRoute::kRerank     ? "query"
         : route == ApiRoute::kScore      ? "text_1"
                                          : "";
}

// A huge text prompt is refused before the body is parsed: a string of n raw bytes decodes to at
// least n / 6 bytes (\uXXXX escapes are the densest), which are at least that many over
// max_token_bytes() tokens.
Status check_raw_prompt(ApiRoute route, std::string_view body, const PromptTokenizers& tokenizers,
                        size_t max_prompt_tokens) {
  if (body.size() <= kKeptParserBytes || max_prompt_tokens == kNoTokenLimit) {
    return absl::OkStatus();
  }
  const std::string_view key = raw_prompt_key(route);
  if (key.empty()) return absl::OkStatus();
  if (auto raw = top_level_string_bytes(body, key)) {
    const size_t at_least = *raw / 6 / tokenizers.max_token_bytes();
    if (at_least > max_prompt_tokens) return too_long(max_prompt_tokens, at_least);
  }
  return absl::OkStatus();
}

// The model decides the tokenizer, and may come after the prompt: look it up first.
Result<const PromptTokenizer*> tokenizer_for(od::document& doc,
                                             const PromptTokenizers& tokenizers) {
  const PromptTokenizer* chosen = &tokenizers.for_model("");
  if (tokenizers.per_model()) {
    std::string_view m;
    const simdjson::error_code e = doc["model"].get_string().get(m);
    if (e == simdjson::SUCCESS) chosen = &tokenizers.for_model(m);
    if (broken(e) || !doc.is_alive()) return not_json();
    doc.rewind();
  }
  return chosen;
}

// A request body's members, read in the order sent, and the prompt they add up to.
class BodyReader {
 public:
  BodyReader(ApiRoute route, const PromptTokenizer& tokenizer, size_t max_prompt_tokens,
             size_t max_token_bytes, ParsedRequest* out)
      : route_(route),
        tokenizer_(tokenizer),
        limit_(max_prompt_tokens),
        budget_(max_prompt_tokens, max_token_bytes),
        out_(out) {}

  Status read(std::string_view key, od::value& v) {
    bool known = false;
    if (Status s = read_shared(key, v, &known); !s.ok() || known) return s;
    return read_route_member(key, v);
  }

  // Once every member is read: a required one missing, else a chat or Responses prompt encoded.
  Status finish() {
    if (!have_prompt_) return missing_prompt();
    if (route_ == ApiRoute::kChatCompletions) {
      return encode_chat(tokenizer_, chat_, limit_, &out_->tokens);
    }
    if (route_ == ApiRoute::kRerank && !have_second_) return bad("documents", "is required");
    if (route_ == ApiRoute::kScore && !have_second_) return bad("text_2", "is required");
    if (route_ == ApiRoute::kResponses) return encode_responses();
    return absl::OkStatus();
  }

 private:
  // model, stream, stream_options and cache_salt: what every route reads alike.
  Status read_shared(std::string_view key, od::value& v, bool* known) {
    *known = true;
    if (key == "model"sv) {
      std::string_view m;
      if (v.get_string().get(m) != simdjson::SUCCESS) return bad("model", "must be a string");
      out_->model = m;
    } else if (key == "stream"sv) {
      if (is_null(v)) return absl::OkStatus();
      bool b = false;
      if (v.get_bool().get(b) != simdjson::SUCCESS) return bad("stream", "must be a boolean");
      out_->stream = b;
    } else if (key == "stream_options"sv) {
      out_->has_stream_options = true;  // even null: the body keeps the client's own key
      if (is_null(v)) return absl::OkStatus();
      od::object so;
      if (v.get_object().get(so) != simdjson::SUCCESS) {
        return bad("stream_options", "must be an object");
      }
      bool b = false;
      const simdjson::error_code e = so["include_usage"].get_bool().get(b);
      if (e == simdjson::SUCCESS) out_->include_usage = b;
      if (broken(e)) return bad("stream_options", "is not valid JSON");
    } else if (key == "cache_salt"sv) {
      if (is_null(v)) return absl::OkStatus();
      std::string_view s;
      if (v.get_string().get(s) != simdjson::SUCCESS) return bad("cache_salt", "must be a string");
      out_->cache_salt = s;
    } else {
      *known = false;
    }
    return absl::OkStatus();
  }

  // The members only some routes read: the prompt's and those that shape it.
  Status read_route_member(std::string_view key, od::value& v) {
    const ApiRoute r = route_;
    if ((r == ApiRoute::kCompletions && key == "prompt"sv) ||
        (r == ApiRoute::kGenerate && key == "input_ids"sv) ||
        (r == ApiRoute::kEmbeddings && key == "input"sv) ||
        (r == ApiRoute::kScore && key == "text_1"sv) ||
        (r == ApiRoute::kGenerate && key == "text"sv && !is_null(v))) {
      return take_prompt(read_prompt(v, key, tokenizer_, limit_, out_));
    }
    if (r == ApiRoute::kChatCompletions) return read_chat_member(key, v);
    if ((r == ApiRoute::kScore && key == "text_2"sv) ||
        (r == ApiRoute::kRerank && key == "documents"sv)) {
      od::array docs;
      if (r == ApiRoute::kRerank && v.get_array().get(docs) != simdjson::SUCCESS)
        return bad("documents", "must be a list of texts");
      have_second_ = true;
    } else if (r == ApiRoute::kRerank && key == "query"sv) {
      std::string_view q;
      if (v.get_string().get(q) != simdjson::SUCCESS) return bad("query", "must be a string");
      return take_prompt(encode_within(tokenizer_, q, limit_, &out_->tokens));
    } else if (r == ApiRoute::kResponses && key == "instructions"sv) {
      if (is_null(v)) return absl::OkStatus();
      std::string_view text;
      if (v.get_string().get(text) != simdjson::SUCCESS)
        return bad("instructions", "must be a string");
      instructions_ = text;
    } else if (r == ApiRoute::kResponses && key == "input"sv) {
      return take_prompt(read_response_input(v, budget_, &roles_, &texts_));
    }
    return absl::OkStatus();
  }

  Status read_chat_member(std::string_view key, od::value& v) {
    if (key == "messages"sv) return take_prompt(read_messages(v, budget_, &chat_));
    if (key == "tools"sv) return read_raw(v, key, /*list=*/true, &chat_.tools_json);
    if (key == "chat_template_kwargs"sv) {
      return read_raw(v, key, /*list=*/false, &chat_.kwargs_json);
    }
    if (key == "add_generation_prompt"sv || key == "continue_final_message"sv) {
      bool b = false;
      if (v.get_bool().get(b) != simdjson::SUCCESS) return bad(key, "must be a boolean");
      (key == "add_generation_prompt"sv ? chat_.add_generation_prompt
                                        : chat_.continue_final_message) = b;
    }
    return absl::OkStatus();
  }

  // A prompt member's reading: on success the request has its prompt.
  Status take_prompt(Status s) {
    if (s.ok()) have_prompt_ = true;
    return s;
  }

  Status missing_prompt() const {
    switch (route_) {
      case ApiRoute::kCompletions:
        return bad("prompt", "is required");
      case ApiRoute::kChatCompletions:
        return bad("messages", "is required");
      case ApiRoute::kGenerate:
        return bad("text", "or 'input_ids' is required");
      case ApiRoute::kEmbeddings:
      case ApiRoute::kResponses:
        return bad("input", "is required");
      case ApiRoute::kRerank:
        return bad("query", "is required");
      case ApiRoute::kScore:
        return bad("text_1", "is required");
    }
    return absl::OkStatus();
  }

  // Rendered as the chat route renders messages, so a conversation continued through either API
  // shares its prefix blocks.
  Status encode_responses() {
    ChatFields responses;
    if (!instructions_.empty()) {
      responses.roles.push_back("system");
      responses.contents.push_back(std::move(instructions_));
    }
    for (size_t i = 0; i < roles_.size(); ++i) {
      responses.roles.push_back(std::move(roles_[i]));
      responses.contents.push_back(std::move(texts_[i]));
    }
    if (responses.roles.empty()) return bad("input", "holds no message");
    return encode_chat(tokenizer_, responses, limit_, &out_->tokens);
  }

  const ApiRoute route_;
  const PromptTokenizer& tokenizer_;
  const size_t limit_;
  TextBudget budget_;
  ParsedRequest* const out_;
  bool have_prompt_ = false;
  bool have_second_ = false;  // rerank's documents, score's text_2
  std::string instructions_;  // a Responses request's, the system message before its input
  std::vector<std::string> roles_, texts_;
  ChatFields chat_;
};

}  // namespace

Status parse_request(ApiRoute route, std::string_view body, const PromptTokenizers& tokenizers,
                     size_t max_prompt_tokens, ParsedRequest* out, size_t readable_past_end) {
  *out = ParsedRequest{};
  if (Status s = check_raw_prompt(route, body, tokenizers, max_prompt_tokens); !s.ok()) return s;
  std::optional<ParserState> own;
  if (body.size() > kKeptParserBytes) own.emplace();
  ParserState& st = own ? *own : tl_state;
  // A large body whose room allows it is parsed where it lies (simdjson reads past the end, never
  // writes); any other is copied into padded room first.
  const bool in_place = own && readable_past_end >= simdjson::SIMDJSON_PADDING;
  if (!in_place) {
    st.buffer.resize(body.size() + simdjson::SIMDJSON_PADDING);
    std::memcpy(st.buffer.data(), body.data(), body.size());
  }
  const char* const json = in_place ? body.data() : st.buffer.data();
  od::document doc;
  if (st.parser.iterate(json, body.size(), body.size() + simdjson::SIMDJSON_PADDING).get(doc) !=
      simdjson::SUCCESS) {
    return not_json();
  }
  auto tokenizer = tokenizer_for(doc, tokenizers);
  if (!tokenizer.ok()) return tokenizer.status();
  od::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  BodyReader reader(route, **tokenizer, max_prompt_tokens, tokenizers.max_token_bytes(), out);
  for (auto field : obj) {
    // (A member's reader returns on any break it meets; this catches one it let pass.)
    if (!doc.is_alive()) return not_json();
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) return not_json();
    od::value v;
    if (field.value().get(v) != simdjson::SUCCESS) return not_json();
    if (Status s = reader.read(key, v); !s.ok()) return s;
  }
  return reader.finish();
}

Status parse_typed_request(const TypedRequest& request, const PromptTokenizers& tokenizers,
                           size_t max_prompt_tokens, ParsedRequest* out) {
  *out = ParsedRequest{};
  out->model = std::string(request.model);
  out->stream = request.stream;
  out->has_stream_options = request.stream;
  out->include_usage = request.stream && request.include_usage;
  const PromptTokenizer& tok = tokenizers.for_model(out->model);
  if (!request.token_ids.empty()) {
    if (request.token_ids.size() > max_prompt_tokens) {
      return too_long(max_prompt_tokens, request.token_ids.size());
    }
    out->tokens.assign(request.token_ids.begin(), request.token_ids.end());
    out->tokens_given = true;
    return absl::OkStatus();
  }
  if (!request.messages.empty()) {
    ChatFields chat;
    for (const ChatMessage& m : request.messages) {
      chat.roles.emplace_back(m.role);
      chat.contents.emplace_back(m.content);
    }
    return encode_chat(tok, chat, max_prompt_tokens, &out->tokens);
  }
  if (request.text.empty()) return bad("prompt", "is required");
  return encode_within(tok, request.text, max_prompt_tokens, &out->tokens);
}

}  // namespace kvgate::app
