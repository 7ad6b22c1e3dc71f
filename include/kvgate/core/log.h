// Logging: spdlog behind an asynchronous sink that never blocks the caller.
//
// A full queue overwrites its oldest line and counts it (dropped_lines()); a gateway whose log
// sink blocks its I/O threads adds the sink's latency to every request. One logger per component
// (`log::get("events")`), created on first use. Text or JSON lines on stderr.
//
// Threading: init()/shutdown() once from main; get() and logging from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kvgate/core/result.h"
#include "spdlog/spdlog.h"

namespace kvgate::log {

enum class Format { kText, kJson };

struct Options {
  std::string level = "info";  // trace, debug, info, warn, error, critical, off
  Format format = Format::kText;
  size_t queue_lines = 8192;  // lines buffered before the oldest is overwritten
  // Non-empty: lines go to this file instead of stderr, rotated at file_bytes into
  // `file`.1 .. `file`.<file_count> (the oldest dropped).
  std::string file;
  size_t file_bytes = 100 << 20;
  size_t file_count = 5;
};

// Installs the asynchronous stderr (or file) sink; a file that cannot be opened is an error.
// Without init(), loggers write synchronously to stderr (what tests and short tools want).
Status init(const Options& options);
// Flushes and stops the writer thread.
void shutdown();
// The component's logger (created on first call; cheap to call again, but keep the pointer).
std::shared_ptr<spdlog::logger> get(std::string_view component);
// Every logger's level, now and for those created later (a configuration reload). An unknown
// level is an error and changes nothing.
Status set_level(std::string_view level);
// Lines overwritten because the queue was full, since init().
uint64_t dropped_lines();
// Parses "text" or "json".
Result<Format> parse_format(std::string_view s);

// A per-call-site limiter: allow() is true at most once per interval (thread-safe, lock-free).
class RateLimit {
 public:
  explicit RateLimit(std::chrono::milliseconds interval)
      : interval_ns_(interval.count() * 1'000'000) {}
  bool allow();
  // Calls suppressed since the last allowed one (reset by allow() returning true).
  uint64_t suppressed() const { return suppressed_.load(std::memory_order_relaxed); }

 private:
  int64_t interval_ns_;
  std::atomic<int64_t> next_ns_{0};
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace kvgate::log

// Logs at most once per `interval_ms` from this call site, e.g. for bad input from an engine.
#define KVGATE_LOG_EVERY_MS(logger, lvl, interval_ms, ...)                                      \
  do {                                                                                          \
    static ::kvgate::log::RateLimit kvgate_rate_limit_{std::chrono::milliseconds(interval_ms)}; \
    if (kvgate_rate_limit_.allow()) (logger)->log(lvl, __VA_ARGS__);                            \
  } while (0)
