// Bounded waits for tests: poll a condition with a deadline instead of sleeping a guessed time.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace kvgate::testing {

// Polls `done` every few milliseconds until it holds or `timeout` passes; returns whether it held.
inline bool wait_until(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace kvgate::testing
