// GrpcFront: the gateway's gRPC APIs on --grpc-port: kvgate.v2.Gateway
// (proto/kvgate/v2/gateway.proto, grpc_gateway_v2.h), kvgate.v1.Gateway (kept unchanged for
// existing clients, grpc_gateway_v1.h), grpc.health.v1.Health and server reflection (gRPC's
// v1alpha plugin, and v1 served here: grpc_reflection_v1.h).
//
// Every generation runs the very pipeline the HTTP API runs (GenerationPipeline::serve), its
// answer turned into gRPC messages by a ResponseSink, so routing, admission, liveness vetoes,
// overload shedding, retries and metrics are the HTTP API's, by construction.
//
// Health: SERVING while /readiness would answer 200 (a routable worker, not draining), checked
// every half second; NOT_SERVING from the moment a drain begins.
//
// Threading: gRPC's callback threads receive calls; each generation's handler runs on one of the
// gateway's executors. start() and stop() from the thread that owns the gateway; drain_began()
// from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "app/access.h"
#include "app/generation/pipeline.h"
#include "kvgate/core/result.h"
#include "kvgate/http/io_pool.h"
#include "kvgate/http/server.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace kvgate::app {

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
  // HTTP POST /tokenize's handler: Tokenize answers through it.
  http::Handler tokenize;
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
  // kvgate.v1 and v2, and reflection v1 (which lists them all).
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread health_thread_;
};

}  // namespace kvgate::app
