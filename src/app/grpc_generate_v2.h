// kvgate.v2.Gateway's Generate (proto/kvgate/v2/gateway.proto), in three parts with one job each:
//
//   grpc_generate_v2_body.cc    the call's request checked and written as the engine request an
//                               HTTP client would send (/v1/completions, /v1/chat/completions or
//                               SGLang's /generate), streamed, with usage and token ids asked for
//   grpc_generate_v2_answer.cc  the engine's events (OpenAI chunks or SGLang's /generate ones)
//                               read into v2 chunks, and the Complete that ends the call
//   grpc_generate_v2_call.cc    the call: GenerationPipeline::serve with the request above, its
//                               ResponseSink turning the answer into the gRPC stream
//
// The request is read from its JSON body by the pipeline, as HTTP's is: content parts, tools and
// every other field route exactly as over HTTP.
//
// Threading: AnswerReader belongs to one call's handler coroutine; start_generate on gRPC's
// callback threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "app/grpc_front.h"
#include "kvgate/v2/gateway.pb.h"
#include "simdjson.h"

namespace kvgate::app::gateway_v2 {

// What a Generate call asks of the engine.
struct EngineCall {
  ApiRoute route = ApiRoute::kCompletions;
  http::Request request;  // the caller's credentials, headers and the engine body
};
// `out` for `r`, or INVALID_ARGUMENT naming the field that no engine could take.
grpc::Status engine_call(const GrpcFrontParts& gw, grpc::CallbackServerContext* ctx,
                         const v2::GenerateRequest& r, EngineCall* out);

// A conversation's messages as the chat completions API's JSON list.
std::string chat_messages_json(const v2::ChatMessages& chat);

// The engine's answer, event by event.
class AnswerReader {
 public:
  AnswerReader(bool stream, bool return_text, bool sglang)
      : stream_(stream), return_text_(return_text), sglang_(sglang) {}

  // One event's JSON (or a whole answer's); streamed, the chunks it makes are appended to `out`.
  void take(std::string_view json, std::vector<v2::Chunk>* out);
  // The error the engine answered ("" for none) and its HTTP status (0: none said).
  const std::string& error() const { return error_; }
  unsigned error_status() const { return error_status_; }
  // Every choice seen has its finish reason.
  bool finished() const;
  // The end: each choice whole (unstreamed) or its finish reason (streamed), and the usage.
  v2::Complete complete();

 private:
  void take_openai_choice(simdjson::dom::element c, std::vector<v2::Chunk>* out);
  void take_sglang(simdjson::dom::element doc, std::vector<v2::Chunk>* out);
  void take_usage(simdjson::dom::element doc);
  // `chunk` added to its choice (unstreamed) or to `out` (streamed) when it says anything.
  void deliver(v2::Chunk chunk, std::vector<v2::Chunk>* out);

  const bool stream_;
  const bool return_text_;
  const bool sglang_;
  simdjson::dom::parser parser_;
  std::map<uint32_t, v2::Choice> choices_;
  v2::Usage usage_;
  std::string error_;
  unsigned error_status_ = 0;
  // SGLang's /generate: the text and ids so far (it streams them cumulatively).
  size_t sglang_text_ = 0;
  size_t sglang_ids_ = 0;
};

// Merges `more` (the same choice's next chunk) into `into`.
void merge_chunk(v2::Chunk& into, const v2::Chunk& more);

// A Generate call started, or refused with its status.
grpc::ServerWriteReactor<grpc::ByteBuffer>* start_generate(const GrpcFrontParts& gw,
                                                           grpc::CallbackServerContext* ctx,
                                                           const grpc::ByteBuffer* bytes);

}  // namespace kvgate::app::gateway_v2
