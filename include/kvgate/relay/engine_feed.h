// EngineFeed: the relay's side facing the engines. One ZMQ subscription per engine rank, with
// the admission cursor the gateway uses (gaps refilled from the engine's replay socket here, so
// a subscriber of the relay sees none), feeding the rank's RankStream: admitted batches in order,
// a new epoch where the cursor had to clear the rank (the engine restarted, or part of its stream
// was lost for good: then degraded), and the loads the engine pushes.
//
// Threading: one thread of its own polls every subscription (ZMQ sockets stay on it). add() and
// stats() from any thread; the subscription is made on the feed's thread within a poll interval.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/events/subscription.h"
#include "kvgate/relay/stream_table.h"

namespace kvgate::relay {

struct RankEndpoint {
  uint32_t rank = 0;
  std::string publisher;  // tcp://host:port of the engine's PUB socket
  std::string replay;     // its replay ROUTER socket ("" if none)
  std::string topic;      // ZMQ prefix filter ("" = everything)
};

struct FeedOptions {
  events::SubscriptionOptions subscription;
  std::chrono::milliseconds poll_interval{50};
};

struct FeedRankStats {
  std::string worker;
  uint32_t rank = 0;
  events::CursorStats cursor;
  bool degraded = false;
  uint64_t batches = 0;  // admitted batches relayed
  uint64_t loads = 0;    // load records relayed
};

class EngineFeed {
 public:
  EngineFeed(StreamTable& table, FeedOptions options = {});
  ~EngineFeed();
  EngineFeed(const EngineFeed&) = delete;
  EngineFeed& operator=(const EngineFeed&) = delete;

  // Adds the worker to the table (one stream per endpoint's rank) and subscribes to its ranks.
  // ALREADY_EXISTS for a worker served already; INVALID_ARGUMENT without endpoints.
  Status add(WorkerSpec spec, std::vector<RankEndpoint> endpoints);
  std::vector<FeedRankStats> stats() const;
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::relay
