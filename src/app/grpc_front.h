// GrpcFront: the gateway's gRPC API (kvgate.v1.Gateway, proto/kvgate/v1/gateway.proto) on
// --grpc-port, with grpc.health.v1.Health and server reflection.
//
// Generate runs the very pipeline POST /v1/completions (or, for chat messages,
// /v1/chat/completions) runs (GenerationPipeline::serve): the call is read as a TypedRequest (its
// prompt as token ids, text or messages; no JSON body parsed back), the engine's body written once
// from the same fields (stream on, usage and token ids asked of the engine), and the answer comes
// through a ResponseSink that parses the engine's SSE events once into GenerateResponse messages.
// So routing, admission, liveness vetoes, overload shedding, retries and metrics are the HTTP
// API's, by construction. The client cancelling, or its deadline passing, is the HTTP client
// disconnecting: the upstream request is aborted.
//
// Health: SERVING while /readiness would answer 200 (a routable worker, not draining), checked
// every half second; NOT_SERVING from the moment a drain begins.
//
// Threading: gRPC's callback threads receive calls; each Generate's handler runs on one of the
// gateway's executors and the call's reactor hands messages back and forth under its own lock.
// start() and stop() from the thread that owns the gateway; drain_began() from any thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "app/access.h"
#include "app/generation/pipeline.h"
#include "kvgate/core/result.h"
#include "kvgate/http/io_pool.h"

namespace grpc {
class Server;
}

namespace kvgate::app {

class GatewayService;

// What the gRPC front end uses of the gateway, and nothing else.
struct GrpcFrontParts {
  const GatewayConfig& config;
  const workers::WorkerRegistry& workers;
  const PromptTokenizers& tokenizers;
  const AccessGuard& access;
  http::IoPool& io;  // a Generate's handler runs on one of its executors
  GenerationPipeline& generation;
  // /readiness's rule: health answers SERVING while it holds.
  std::function<bool()> ready;
};

class GrpcFront {
 public:
  explicit GrpcFront(GrpcFrontParts parts);
  ~GrpcFront();
  GrpcFront(const GrpcFront&) = delete;
  GrpcFront& operator=(const GrpcFront&) = delete;

  // Listens on --grpc-host:--grpc-port (with the gateway's TLS files when it has them).
  Status start();
  uint16_t port() const { return static_cast<uint16_t>(port_); }
  // The gateway began draining: health answers NOT_SERVING at once (not at the next check).
  void drain_began();
  // Cancels running calls (their handlers see the client gone) and stops listening.
  void stop();

 private:
  void watch_readiness();

  const GrpcFrontParts parts_;
  std::unique_ptr<GatewayService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread health_thread_;
};

}  // namespace kvgate::app
