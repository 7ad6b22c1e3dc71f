// GenerationPipeline: a generation request (completions, chat, generate, embeddings, responses,
// rerank, score) from its admission to its accounting, through the stages of
// app/generation/stages.h. The HTTP routes and the gRPC front end hand it their requests; it
// reads the gateway only through GenerationParts.
//
// Threading: serve() runs on the request's executor; any number at once.
#pragma once

#include "app/generation/stages.h"

namespace kvgate::app {

class GenerationPipeline {
 public:
  explicit GenerationPipeline(GenerationParts parts) : parts_(std::move(parts)) {}

  // Answers `req` on `res` (every way a request can end answers it, or knows the client left).
  // With `typed`, the request is read from it and `req`'s body (then the engine's body, written
  // from the same fields) is only forwarded. `typed` outlives the call. `name_worker`: the answer
  // names its worker whatever --expose-worker-header says (a front that reads the header; a
  // typed request always does).
  boost::asio::awaitable<void> serve(ApiRoute route, const http::Request& req, http::Responder& res,
                                     const TypedRequest* typed = nullptr, bool name_worker = false);

 private:
  const GenerationParts parts_;
};

}  // namespace kvgate::app
