// Cors: answers browsers calling the gateway from a web page on another origin.
//
// With --cors-allowed-origins set ("*" for any), every answer to a request whose Origin is allowed
// carries Access-Control-Allow-Origin (that origin, or "*"), Vary: Origin, and exposes the headers
// a client reads (x-request-id, x-kvgate-worker); an OPTIONS preflight gets 204 with the methods
// and the headers it asked for, before any key check (browsers send no credentials on a
// preflight). A preflight from an origin not allowed gets 403 naming it. Without the flag nothing
// changes: no CORS headers, and OPTIONS is not routed.
//
// Threading: immutable after construction; everything from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvgate/http/message.h"
#include "kvgate/http/server.h"

namespace kvgate::app {

class Cors {
 public:
  explicit Cors(std::vector<std::string> allowed_origins);

  bool enabled() const { return !allowed_.empty(); }
  // Whether a page on `origin` may call the gateway.
  bool allows(std::string_view origin) const;
  // `handler`, whose answers carry the CORS headers for an allowed Origin (itself when disabled).
  http::Handler wrap(http::Handler handler) const;
  // The answer to an OPTIONS preflight.
  http::Response preflight(const http::Request& req) const;

 private:
  std::vector<std::string> allowed_;
  bool any_ = false;
};

}  // namespace kvgate::app
