// Bounded waits for tests: poll a condition with a deadline instead of sleeping a guessed time.
// The one such helper every test uses (the coroutine form, for handlers that must not block
// their thread, is tests/http/test_util.h's co_wait_until).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace kvgate::testing {

// Polls `done` every `every` until it holds or `timeout` passes; returns whether it held. A
// condition that costs a scrape or a process asks less often.
inline bool wait_until(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10),
                       std::chrono::milliseconds every = std::chrono::milliseconds(2)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

}  // namespace kvgate::testing
