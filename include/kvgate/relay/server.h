// RelayServer: the relay's gRPC front. Serves kvgate.relay.v1.Relay (Subscribe, ListWorkers) from
// a StreamTable, with the standard grpc.health.v1.Health service and server reflection.
//
// Subscribe streams run on gRPC's callback API, no thread per stream: a stream writes what its
// RankStream has for it, one message at a time, and when there is nothing asks the stream to wake
// it at the next batch. A stream quiet for `heartbeat` gets a Heartbeat (with the rank's newest
// seq and load), so a subscriber tells a quiet engine from a dead link. A client that stops
// reading holds only its own messages in flight: the history is trimmed past it and it falls
// behind to a snapshot (RankStream).
//
// Threading: start() and stop() from one control thread; the rest is gRPC's and one heartbeat
// thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kvgate/core/result.h"
#include "kvgate/relay/stream_table.h"

namespace kvgate::relay {

struct ServerOptions {
  std::string listen = "0.0.0.0:50051";  // HOST:PORT; port 0 picks one (see port())
  std::chrono::milliseconds heartbeat{1000};
  size_t max_batches_per_read = 64;  // messages fetched from a stream at a time
  // Keepalive pings the server sends on an idle connection, and the client pings it accepts:
  // as the engines' grpc-core servers do, so no load balancer or client is refused for pinging.
  std::chrono::milliseconds keepalive{20'000};
  std::chrono::milliseconds min_client_ping{5'000};
};

struct ServerStats {
  uint64_t subscribes = 0;    // Subscribe calls accepted
  uint64_t rejected = 0;      // Subscribe calls refused (unknown worker or rank, malformed)
  uint64_t active = 0;        // streams open now
  uint64_t messages = 0;      // messages written
  uint64_t heartbeats = 0;    // of which heartbeats
  uint64_t out_of_range = 0;  // streams moved to a snapshot
};

class RelayServer {
 public:
  RelayServer(StreamTable& table, ServerOptions options);
  ~RelayServer();
  RelayServer(const RelayServer&) = delete;
  RelayServer& operator=(const RelayServer&) = delete;

  // Binds and starts serving. UNAVAILABLE when the address cannot be bound.
  Status start();
  // Ends every stream (UNAVAILABLE, "relay stopping") and stops.
  void stop();
  int port() const;
  ServerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::relay
