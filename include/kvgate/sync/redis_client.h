// RedisClient: a blocking Redis connection for the state-sync thread (hiredis underneath).
//
// It speaks to a standalone server or to a Redis Cluster. Every key state sync writes carries the
// same hash tag, so all of them live in one slot: on a cluster the client asks CLUSTER SLOTS which
// master holds that slot and talks to it alone (one SCAN and MGET there find every key), and a
// MOVED answer (the slot migrated) sends it to the new owner and replays the commands once.
//
// Every call is bounded by the timeout given at construction (connect, each read and write). A
// transport failure closes the connection and is Unavailable; the next call reconnects.
//
// Threading: one thread at a time (the state-sync thread owns it).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/sync/redis_url.h"

struct redisContext;

namespace kvgate::sync {

struct RedisReply {
  enum class Type : uint8_t { kNil, kString, kStatus, kError, kInteger, kArray };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
};

class RedisClient {
 public:
  RedisClient(RedisTarget target, std::chrono::milliseconds timeout);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Connects (when not connected) and authenticates; on a cluster, moves to the master holding
  // `slot_key`'s slot. Unavailable: unreachable or timed out; PermissionDenied: AUTH refused;
  // InvalidArgument: a database other than 0 on a cluster.
  Status connect(std::string_view slot_key);
  bool connected() const { return ctx_ != nullptr; }
  void disconnect();

  // Sends `commands` in one round trip; one reply each, in order (an error reply is a reply, not
  // a failure). Connects first if needed.
  Result<std::vector<RedisReply>> pipeline(const std::vector<std::vector<std::string>>& commands);
  Result<RedisReply> command(std::vector<std::string> argv);

  bool cluster() const { return cluster_; }
  // "host:port" of the node connected to (the seed until connect() found the slot's master).
  std::string node() const { return host_ + ":" + std::to_string(port_); }

 private:
  Status open(const std::string& host, uint16_t port);
  Result<std::vector<RedisReply>> send(const std::vector<std::vector<std::string>>& commands);
  // Finds the master serving `slot_key` and connects to it (cluster only).
  Status follow_slot(std::string_view slot_key);

  const RedisTarget target_;
  const std::chrono::milliseconds timeout_;
  redisContext* ctx_ = nullptr;
  std::string host_;
  uint16_t port_ = 0;
  bool cluster_ = false;
  std::string slot_key_;
};

}  // namespace kvgate::sync
