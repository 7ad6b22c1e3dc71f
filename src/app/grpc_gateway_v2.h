// kvgate.v2.Gateway (proto/kvgate/v2/gateway.proto): Generate (grpc_generate_v2.h), Embed through
// the pipeline of HTTP POST /v1/embeddings, Tokenize through HTTP POST /tokenize's handler, and
// the tokenizer and fleet views answered here.
//
// Threading: gRPC's callback threads receive calls; Embed and Tokenize run their HTTP handler on
// one of the gateway's executors and finish the call from there.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "app/grpc_front.h"

namespace kvgate::app {

// The service, reading the gateway through `gw` (which outlives it).
std::unique_ptr<grpc::Service> make_gateway_v2(const GrpcFrontParts& gw);

}  // namespace kvgate::app
