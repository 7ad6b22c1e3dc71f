// The mock's inference API: parsing OpenAI-style and SGLang-style request bodies into prompts of
// token ids, and rendering responses and stream chunks the way vLLM and SGLang shape them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/core/tokenizer.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"
#include "simdjson.h"

namespace kvgate::mock::detail {

// kResponses: OpenAI's Responses API (input items and instructions, rendered as a chat).
enum class ApiKind { kCompletion, kChat, kGenerate, kResponses };

// SGLang's prefill/decode fields, which its router adds to the body it sends both workers of a
// pair: the prefill's host and bootstrap port and the transfer's room. A batch carries a list of
// each (one per prompt); the mock keeps the first entry, as it binds a room to the first prompt.
struct BootstrapFields {
  std::optional<std::string> host;
  std::optional<uint16_t> port;
  std::optional<uint64_t> room;  // [0, 2^63 - 1]
  // What is wrong with a field given in the wrong shape. Kept, not failed at parsing: a regular
  // worker ignores the fields, whatever their shape.
  std::string error;
  bool any() const { return host || port || room; }
  bool complete() const { return host && port && room; }
};

// vLLM's prefill/decode field (NixlConnector), on /v1/completions and /v1/chat/completions: a
// router sends the prefill `{"do_remote_decode": true, ...}`, the prefill answers the params a
// decode needs (`do_remote_prefill` true, the remote_* fields naming its blocks and side channel),
// and the router hands those to the decode as they are.
struct KvTransferParams {
  bool present = false;  // given as an object (null or absent: not given)
  bool do_remote_decode = false;
  bool do_remote_prefill = false;
  std::optional<std::string> engine_id;
  std::optional<std::string> host;
  std::optional<uint16_t> port;
  std::optional<std::vector<uint64_t>> block_ids;
  // What is wrong with a field given in the wrong shape; kept, not failed at parsing, as
  // BootstrapFields::error is (a regular worker ignores the field).
  std::string error;
  bool remote_complete() const { return engine_id && host && port && block_ids; }
};

struct ApiRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::vector<std::vector<TokenId>> prompts;  // one per choice
  uint32_t n = 1;                             // choices per prompt (each listed n times)
  uint32_t max_tokens = 16;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool return_token_ids = false;  // vLLM's: each choice also carries its tokens as `token_ids`
  // Log probabilities asked for, and how many alternatives per token (completions: `logprobs`
  // N; chat: `logprobs` true and `top_logprobs` N). Made up: a fixed value per token id.
  std::optional<uint32_t> logprobs;
  bool batch = false;  // /generate given a list of prompts: answer with a list
  std::optional<uint32_t> dp_rank;
  std::string model;
  BootstrapFields bootstrap;
  KvTransferParams kv_transfer;
};

// Parses a request body. Errors are the client's (400) and say what is wrong.
Result<ApiRequest> parse_api_request(ApiKind kind, std::string_view body,
                                     const tokenizer::PromptTokenizer& tokenizer,
                                     simdjson::dom::parser& parser);

// What one choice produced.
struct ChoiceResult {
  std::vector<TokenId> tokens;  // the whole output (non-streaming) or the new tokens (a chunk)
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;
  uint32_t output_tokens = 0;  // in all, so far
  bool finished = false;
  bool aborted = false;
};

struct ResponseIds {
  std::string id;  // "cmpl-...", "chatcmpl-..." or the SGLang rid
  int64_t created = 0;
  std::string_view model;
};

// Appends the text the mock "generates" for `tokens` (one short word per token).
void append_token_text(std::span<const TokenId> tokens, std::string* out);

// A whole non-streaming response body.
// `kv_transfer_params`, when not empty, is a JSON object written as the answer's top-level
// member of that name (a vLLM prefill's answer to a remote-decode request).
std::string render_response(const ApiRequest& req, const ResponseIds& ids,
                            const std::vector<ChoiceResult>& choices, double e2e_seconds,
                            std::string_view kv_transfer_params = {});
// One streaming event's JSON for choice `index` (new tokens in `choice.tokens`); for /generate
// `text_so_far` is the cumulative text SGLang streams.
std::string render_chunk(const ApiRequest& req, const ResponseIds& ids, size_t index,
                         const ChoiceResult& choice, bool first_chunk,
                         std::string_view text_so_far);
// The final usage-only chunk (stream_options.include_usage).
std::string render_usage_chunk(const ApiRequest& req, const ResponseIds& ids,
                               const std::vector<ChoiceResult>& choices);
// A Responses stream, event by event as OpenAI sends them, each numbered from `*sequence` on
// (consecutive from 0 over the stream): before the first delta, response.created,
// response.in_progress, response.output_item.added and response.content_part.added; each
// response.output_text.delta; after the last, response.output_text.done,
// response.content_part.done, response.output_item.done and response.completed (carrying the
// whole response, `choice` being all of its tokens).
std::vector<std::string> render_response_opening(const ResponseIds& ids, uint64_t* sequence);
std::string render_response_delta(const ResponseIds& ids, const ChoiceResult& choice,
                                  uint64_t* sequence);
std::vector<std::string> render_response_closing(const ResponseIds& ids, const ChoiceResult& choice,
                                                 uint64_t* sequence);

// vLLM's POST /tokenize: {"prompt": text or ids} or {"messages": [...]} (rendered as the chat
// route renders it) -> {"count", "max_model_len", "tokens", "token_strs": null}; and
// /detokenize: {"tokens": [...]} -> {"prompt"}. A client error (400) says what is wrong.
Result<std::string> render_tokenize(std::string_view body,
                                    const tokenizer::PromptTokenizer& tokenizer,
                                    simdjson::dom::parser& parser, uint32_t max_model_len);
Result<std::string> render_detokenize(std::string_view body, simdjson::dom::parser& parser);

// Pooling endpoints (vLLM serves them for embedding and cross-encoder models): answered at once,
// from the prompt's tokens, with no generation and no KV events.
enum class PoolingKind { kEmbeddings, kRerank, kScore };
// The whole answer body for `body`, or a client error (400) saying what is wrong.
Result<std::string> render_pooling(PoolingKind kind, std::string_view body,
                                   const tokenizer::PromptTokenizer& tokenizer,
                                   simdjson::dom::parser& parser, const ResponseIds& ids);

}  // namespace kvgate::mock::detail
