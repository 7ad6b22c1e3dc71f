// Where the state-sync Redis is: `redis://[user:password@]HOST:PORT[/DB]`.
//
// The password may also come from a file or an environment variable (the gateway's flags); it is
// never part of a message: redacted() is what logs and errors show.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvgate/core/result.h"

namespace kvgate::sync {

struct RedisTarget {
  std::string host;
  uint16_t port = 6379;
  std::string user;      // empty: AUTH with the password alone (the default user)
  std::string password;  // empty: no AUTH
  uint32_t db = 0;       // SELECT on a standalone server (a cluster has only 0)

  // "redis://[user:***@]host:port/db", for messages.
  std::string redacted() const;
};

// Parses redis://[user:password@]HOST:PORT[/DB] (an IPv6 host in brackets; the port defaults to
// 6379). `rediss://` is refused with a message saying TLS to Redis is not built in; any other
// scheme, a missing host, a bad port or database is InvalidArgument naming the part.
Result<RedisTarget> parse_redis_url(std::string_view url);

}  // namespace kvgate::sync
