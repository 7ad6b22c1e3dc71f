#include "kvgate/core/log.h"

#include "kvgate/core/json_writer.h"
#include "kvgate/core/thread_annotations.h"
#include "spdlog/async.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/rotating_file_sink.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace kvgate::log {
namespace {

// %j: the message as a JSON string literal (quotes included), for the JSON line format.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string s;
    append_json_string(&s, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%fZ %^%L%$ [%n] %v";
constexpr const char* kJsonPattern =
    R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","component":"%n","msg":%j})";

struct State {
  Mutex mu;  // guards creation of loggers and the sink swap, never held while logging
  spdlog::sink_ptr sink KVGATE_GUARDED_BY(mu);
  std::shared_ptr<spdlog::details::thread_pool> pool KVGATE_GUARDED_BY(mu);
  spdlog::level::level_enum level KVGATE_GUARDED_BY(mu) = spdlog::level::info;
  Format format KVGATE_GUARDED_BY(mu) = Format::kText;
};

State& state() {
  static State* s = new State();  // leaked: loggers may log during static destruction
  return *s;
}

std::unique_ptr<spdlog::formatter> make_formatter(Format f) {
  auto fmt = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (f == Format::kJson) {
    fmt->add_flag<JsonMessageFlag>('j').set_pattern(kJsonPattern);
  } else {
    fmt->set_pattern(kTextPattern);
  }
  return fmt;
}

std::shared_ptr<spdlog::logger> make_logger(State& s, const std::string& name)
    KVGATE_REQUIRES(s.mu) {
  std::shared_ptr<spdlog::logger> logger;
  if (s.pool) {
    logger = std::make_shared<spdlog::async_logger>(name, s.sink, s.pool,
                                                    spdlog::async_overflow_policy::overrun_oldest);
  } else {
    logger = std::make_shared<spdlog::logger>(name, s.sink);
  }
  logger->set_level(s.level);
  logger->flush_on(spdlog::level::err);
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace

Result<Format> parse_format(std::string_view s) {
  if (s == "text") return Format::kText;
  if (s == "json") return Format::kJson;
  return absl::InvalidArgumentError("log format must be 'text' or 'json'");
}

namespace {
Result<spdlog::level::level_enum> level_of(std::string_view name) {
  const auto level = spdlog::level::from_str(std::string(name));
  if (level == spdlog::level::off && name != "off") {
    return absl::InvalidArgumentError("unknown log level '" + std::string(name) +
                                      "' (trace, debug, info, warn, error, critical, off)");
  }
  return level;
}
}  // namespace

Status set_level(std::string_view name) {
  const Result<spdlog::level::level_enum> level = level_of(name);
  if (!level.ok()) return level.status();
  State& s = state();
  MutexLock lock(&s.mu);
  s.level = *level;
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->set_level(*level); });
  return absl::OkStatus();
}

Status init(const Options& options) {
  const Result<spdlog::level::level_enum> checked = level_of(options.level);
  if (!checked.ok()) return checked.status();
  const spdlog::level::level_enum level = *checked;
  State& s = state();
  MutexLock lock(&s.mu);
  s.level = level;
  s.format = options.format;
  if (options.file.empty()) {
    s.sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    try {
      s.sink = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(
          options.file, options.file_bytes, options.file_count);
    } catch (const spdlog::spdlog_ex& e) {
      return absl::InvalidArgumentError("cannot write the log file " + options.file + ": " +
                                        e.what());
    }
    // A file buffers: flush every second so a reader (tail -f, a shipper) sees lines promptly.
    spdlog::flush_every(std::chrono::seconds(1));
  }
  s.sink->set_formatter(make_formatter(options.format));
  // One writer thread for the process; it lives until shutdown().
  s.pool = std::make_shared<spdlog::details::thread_pool>(options.queue_lines, 1);
  spdlog::drop_all();
  return absl::OkStatus();
}

void shutdown() {
  State& s = state();
  MutexLock lock(&s.mu);
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
  spdlog::drop_all();
  s.pool.reset();
  s.sink.reset();
}

std::shared_ptr<spdlog::logger> get(std::string_view component) {
  const std::string name(component);
  if (auto existing = spdlog::get(name)) return existing;
  State& s = state();
  MutexLock lock(&s.mu);
  if (auto existing = spdlog::get(name)) return existing;
  if (!s.sink) {
    s.sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    s.sink->set_formatter(make_formatter(s.format));
  }
  return make_logger(s, name);
}

uint64_t dropped_lines() {
  State& s = state();
  MutexLock lock(&s.mu);
  return s.pool ? s.pool->overrun_counter() : 0;
}

bool RateLimit::allow() {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t next = next_ns_.load(std::memory_order_relaxed);
  if (now >= next &&
      next_ns_.compare_exchange_strong(next, now + interval_ns_, std::memory_order_relaxed)) {
    suppressed_.store(0, std::memory_order_relaxed);
    return true;
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace kvgate::log
