// AccessGuard: who may call which route.
//
//   kOpen     probes and the scrape (/health, /readiness, /liveness, /metrics): anyone.
//   kClient   the API clients call (generation, /v1/models, GET /workers): with --api-key set,
//             only requests carrying "Authorization: Bearer <key>"; else anyone.
//   kControl  what changes the gateway (POST and DELETE /workers): with --admin-api-key set, only
//             requests carrying that key; else only peers on this host's loopback address
//             (127.0.0.1 or ::1), so a gateway reachable from a network cannot be handed a
//             "worker" that would then receive prompts and their clients' credentials.
//
// Keys are compared in constant time and never logged. A refusal is an OpenAI-shaped 401 (a
// missing or wrong key) or 403 (a control route from a remote peer without an admin key).
//
// The keys can be replaced while serving (a configuration reload rotating them): a request is
// checked against the keys of the moment it arrives.
//
// Threading: wrap(), check() and set_keys() from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kvgate/core/versioned.h"
#include "kvgate/http/message.h"
#include "kvgate/http/server.h"

namespace kvgate::app {

enum class Access : uint8_t { kOpen, kClient, kControl };

class AccessGuard {
 public:
  AccessGuard(std::string api_key, std::string admin_api_key)
      : keys_(Keys{std::move(api_key), std::move(admin_api_key)}) {}
  void set_keys(std::string api_key, std::string admin_api_key) {
    keys_.publish(Keys{std::move(api_key), std::move(admin_api_key)});
  }

  // The refusal for `req` on a route of `access`, or nullopt when it may go on.
  std::optional<http::Response> check(Access access, const http::Request& req) const;
  // `handler`, answering check()'s refusal instead of running when there is one.
  http::Handler wrap(Access access, http::Handler handler) const;

 private:
  struct Keys {
    std::string api;
    std::string admin;
  };
  Versioned<Keys> keys_;
};

// Equal strings, in a time that depends only on their lengths.
bool constant_time_equals(std::string_view a, std::string_view b);
// The token of an "Authorization: Bearer <token>" header ("" when absent or another scheme).
std::string_view bearer_token(std::string_view authorization);

}  // namespace kvgate::app
