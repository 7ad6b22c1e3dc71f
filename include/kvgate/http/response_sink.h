// ResponseSink: where a Responder's answer goes when the request did not come over an HTTP
// connection. Another front end (the gRPC Generate call) builds an http::Request, runs the same
// handler the HTTP route runs, and turns what the handler answers into its own messages, so both
// front ends share every rule the handler applies.
//
// Threading: the Responder calls a sink from the handler's coroutine only, one call at a time,
// on executor(); the sink runs `on_gone` there too.
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/awaitable.hpp"
#include "kvgate/core/result.h"
#include "kvgate/http/message.h"

namespace kvgate::http {

class ResponseSink {
 public:
  virtual ~ResponseSink() = default;

  // The executor the handler runs on.
  virtual boost::asio::any_io_executor executor() const = 0;
  // A whole answer (headers include the ones the Responder added).
  virtual boost::asio::awaitable<Status> send(Response response) = 0;
  // A streamed answer: its status and headers, then its bytes as they come, then its end. A
  // failed write means the caller is gone: the handler stops.
  virtual boost::asio::awaitable<Status> start(unsigned status, std::string_view content_type,
                                               std::span<const Header> headers) = 0;
  virtual boost::asio::awaitable<Status> write(std::string_view data) = 0;
  virtual boost::asio::awaitable<Status> finish() = 0;
  // Runs `on_gone` once, on executor(), when the caller goes (cancels, or its deadline passes)
  // while the watch is armed; at once if it has gone already. Replaces an earlier watch;
  // unwatch() disarms it.
  virtual void watch(std::function<void()> on_gone) = 0;
  virtual void unwatch() = 0;
};

}  // namespace kvgate::http
