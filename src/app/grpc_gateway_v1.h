// kvgate.v1.Gateway (proto/kvgate/v1/gateway.proto), kept unchanged for existing clients beside
// kvgate.v2 (grpc_gateway_v2.h).
//
// Generate runs the very pipeline POST /v1/completions (or, for chat messages,
// /v1/chat/completions) runs (GenerationPipeline::serve): the call is read as a TypedRequest (its
// prompt as token ids, text or messages; no JSON body parsed back), the engine's body written once
// from the same fields (stream on, usage and token ids asked of the engine), and the answer comes
// through a ResponseSink that parses the engine's SSE events once into GenerateResponse messages.
// The client cancelling, or its deadline passing, is the HTTP client disconnecting: the upstream
// request is aborted.
//
// Threading: gRPC's callback threads receive calls; each Generate's handler runs on one of the
// gateway's executors and the call's reactor hands messages back and forth under its own lock.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "app/grpc_front.h"

namespace kvgate::app {

// The service, reading the gateway through `gw` (which outlives it).
std::unique_ptr<grpc::Service> make_gateway_v1(const GrpcFrontParts& gw);

}  // namespace kvgate::app
