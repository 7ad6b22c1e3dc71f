// AccessGuard: who may call which route.
//
//   kOpen     probes and the scrape (/health, /readiness, /liveness, /metrics): anyone.
//   kClient   the API clients call (generation, /v1/models, GET /workers): with --api-key or
//             --api-keys-file set, only requests carrying "Authorization: Bearer <key>" with one
//             of those keys; else anyone.
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

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "app/tenants.h"
#include "kvgate/core/versioned.h"
#include "kvgate/http/message.h"
#include "kvgate/http/server.h"

namespace kvgate::app {

enum class Access : uint8_t { kOpen, kClient, kControl };

class AccessGuard {
 public:
  AccessGuard(std::string api_key, std::string admin_api_key)
      : keys_(Keys{std::move(api_key), std::move(admin_api_key), nullptr}) {}
  // `table`: the keys file's keys (--api-keys-file), accepted beside `api_key`; null for none.
  void set_keys(std::string api_key, std::string admin_api_key,
                std::shared_ptr<const KeyTable> table) {
    keys_.publish(Keys{std::move(api_key), std::move(admin_api_key), std::move(table)});
  }

  // Who sends `req` by its key: its keys-file entry (kept alive by `table`), or null (the
  // --api-key key, or no keys checked).
  struct Caller {
    std::shared_ptr<const KeyTable> table;
    const KeyEntry* entry = nullptr;
  };
  Caller caller(const http::Request& req) const;
  // The keys file's keys now (null: none).
  std::shared_ptr<const KeyTable> key_table() const { return keys_.get().table; }

  // The refusal for `req` on a route of `access`, or nullopt when it may go on.
  std::optional<http::Response> check(Access access, const http::Request& req) const;
  // `handler`, answering check()'s refusal instead of running when there is one.
  http::Handler wrap(Access access, http::Handler handler) const;

 private:
  struct Keys {
    std::string api;
    std::string admin;
    std::shared_ptr<const KeyTable> table;
  };
  Versioned<Keys> keys_;
};

// Equal strings, in a time that depends only on their lengths.
bool constant_time_equals(std::string_view a, std::string_view b);
// The token of an "Authorization: Bearer <token>" header ("" when absent or another scheme).
std::string_view bearer_token(std::string_view authorization);

}  // namespace kvgate::app
