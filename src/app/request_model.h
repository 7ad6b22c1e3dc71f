// The request model: what the gateway reads from an OpenAI-style body to route it. The body itself
// is forwarded to the worker byte for byte; nothing is re-serialized.
//
//   /v1/completions       model, prompt (text | token ids | list of texts | list of id lists:
//                         the first one routes), stream, cache_salt
//   /v1/chat/completions  model, messages [{role, content (text | [{type:"text", text}])}],
//                         stream, cache_salt; rendered (PromptTokenizer::render_chat) then
//                         tokenized
//   /generate (SGLang)    text | input_ids, stream (top level or in sampling params: top level)
//   /v1/embeddings        model, input (as a completions prompt: the first one routes)
//   /v1/responses         model, instructions, input (text | message items), stream; rendered
//                         as a chat (instructions as the system message) then tokenized
//   /v1/rerank            model, query (routes), documents (a list)
//   /v1/score             model, text_1 (text or list: the first routes), text_2
//
// A body that is not JSON, or a known field of the wrong type, is a client error (400) naming the
// field. Unknown fields are ignored.
//
// Threading: parse_request() is reentrant; it keeps a per-thread parser and buffer (no allocation
// per request once warm, beyond the token vector).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/result.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"

namespace kvgate::app {

using tokenizer::PromptTokenizer;
using tokenizer::PromptTokenizers;

enum class ApiRoute {
  kCompletions,
  kChatCompletions,
  kGenerate,
  kEmbeddings,
  kResponses,
  kRerank,
  kScore,
};
inline constexpr size_t kApiRouteCount = 7;
const char* api_route_name(ApiRoute r);

struct ParsedRequest {
  std::string model;
  bool stream = false;
  // The client's stream_options: absent, or whether it asked for the stream's usage.
  bool has_stream_options = false;
  bool include_usage = false;
  std::string cache_salt;
  std::vector<TokenId> tokens;  // the prompt's token ids (given, or tokenized from its text)
  bool tokens_given = false;    // the body carried ids (no tokenization happened)
  // Prompts in the request: a list of texts or of id lists is a batch (the first one routes).
  uint32_t batch = 1;
};

inline constexpr size_t kNoTokenLimit = static_cast<size_t>(-1);

// Fills `out` from `body`. InvalidArgument (-> 400) names the offending field; OutOfRange (-> 400)
// says the prompt has more than `max_prompt_tokens` tokens, found without tokenizing all of it,
// and before any of it is copied: a huge text prompt is refused from its byte length before the
// body is parsed, chat messages and Responses input from the raw length of their texts, summed
// as they are met, before one is decoded or rendered. Text is tokenized with the request's
// model's tokenizer. `readable_past_end`: bytes after the body that may be read (not written);
// with http::kPayloadPadding of them a large body is parsed where it lies, without a copy.
Status parse_request(ApiRoute route, std::string_view body, const PromptTokenizers& tokenizers,
                     size_t max_prompt_tokens, ParsedRequest* out, size_t readable_past_end = 0);

// A generation request that arrives typed (the gRPC API's GenerateRequest), not as a JSON body:
// its prompt is token ids, a text, or a conversation (the one that is not empty; a conversation
// is a chat completion). parse_typed_request fills `out` as parse_request fills it from the body
// these fields stand for (the same tokenizer, template, bounds and errors), without any JSON.
struct TypedRequest {
  std::string_view model;
  bool stream = false;
  bool include_usage = false;  // the engine is asked for the stream's usage
  std::span<const TokenId> token_ids;
  std::string_view text;
  std::span<const ChatMessage> messages;
};
Status parse_typed_request(const TypedRequest& request, const PromptTokenizers& tokenizers,
                           size_t max_prompt_tokens, ParsedRequest* out);

// The raw length in bytes (escapes undecoded) of the string value of top-level `key` in the JSON
// object `body`, found by a scan that decodes nothing; nullopt when the key is absent, its value
// is not a string, or the body is not an object.
std::optional<size_t> top_level_string_bytes(std::string_view body, std::string_view key);

}  // namespace kvgate::app
