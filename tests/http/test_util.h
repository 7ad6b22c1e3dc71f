// Helpers shared by the http tests.
#pragma once

#include <chrono>

#include "absl/functional/function_ref.h"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "support/wait.h"

namespace kvgate::http::testing {

using kvgate::testing::wait_until;

// The coroutine form of wait_until (support/wait.h), for handlers: it waits without holding
// the handler's thread.
// `done` is a reference: a std::function built inside the caller's co_await would be a temporary
// g++ 12 may destroy twice.
inline boost::asio::awaitable<bool> co_wait_until(absl::FunctionRef<bool()> done,
                                                  std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  boost::asio::steady_timer t(co_await boost::asio::this_coro::executor);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    t.expires_after(std::chrono::milliseconds(1));
    boost::system::error_code ec;
    co_await t.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }
  co_return true;
}

}  // namespace kvgate::http::testing
