#include "app/access_log.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "kvgate/core/json_writer.h"
#include "spdlog/sinks/rotating_file_sink.h"
#include "spdlog/spdlog.h"

namespace kvgate::app {
namespace {

void write_stdout(std::string_view line) {
  // One write(2) per line: lines from several threads never interleave, nothing waits in a
  // buffer while the process idles.
  while (!line.empty()) {
    const ssize_t n = ::write(STDOUT_FILENO, line.data(), line.size());
    if (n <= 0) return;  // stdout closed or full: the access log is best effort
    line.remove_prefix(static_cast<size_t>(n));
  }
}

void append_number(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  out += buf;
}

// A figure to three decimals: 0.035 rather than the sum's 0.035432000000000005.
double thousandths(double v) { return std::round(v * 1000.0) / 1000.0; }

// Now, UTC, as RFC 3339 with milliseconds: 2026-12-06T15:04:05.123Z.
std::string utc_now_text() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms.count()));
  return buf;
}

void append_field(std::string& out, std::string_view key, std::string_view value) {
  out.append(" ").append(key).append("=").append(value.empty() ? "-" : value);
}

}  // namespace

Result<std::function<void(std::string_view)>> rotating_access_log(const std::string& path) {
  std::shared_ptr<spdlog::logger> file;
  try {
    file = std::make_shared<spdlog::logger>(
        "access", std::make_shared<spdlog::sinks::rotating_file_sink_mt>(path, 100 << 20, 5));
  } catch (const spdlog::spdlog_ex& e) {
    return absl::InvalidArgumentError("cannot write the access log " + path + ": " + e.what());
  }
  file->set_pattern("%v");
  file->flush_on(spdlog::level::info);  // a line reaches the file when its request ends
  return std::function<void(std::string_view)>([file](std::string_view line) {
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    file->info("{}", line);
  });
}

Result<AccessLogFormat> parse_access_log_format(std::string_view s) {
  if (s == "off") return AccessLogFormat::kOff;
  if (s == "text") return AccessLogFormat::kText;
  if (s == "json") return AccessLogFormat::kJson;
  return absl::InvalidArgumentError("--access-log must be off, text or json, not '" +
                                    std::string(s) + "'");
}

std::string peer_address(const http::Request& req) {
  if (req.remote.port() == 0) return {};
  return req.remote.address().to_string();
}

AccessLog::AccessLog(AccessLogFormat format, Sink sink)
    : format_(format), sink_(sink ? std::move(sink) : Sink(write_stdout)) {}

void AccessLog::write(const AccessRecord& r) const {
  if (!enabled()) return;
  sink_(line(format_, r));
}

std::string AccessLog::line(AccessLogFormat format, const AccessRecord& r) {
  std::string out;
  if (format == AccessLogFormat::kJson) {
    JsonWriter w(&out);
    w.begin_object().member("time", utc_now_text()).member("method", r.method);
    w.member("path", r.path).member("status", r.status);
    w.member("duration_ms", thousandths(r.duration_ms));
    if (!r.client.empty()) w.member("client", r.client);
    if (!r.model.empty()) w.member("model", r.model);
    if (!r.worker.empty()) w.member("worker", r.worker);
    if (!r.prefill_worker.empty()) w.member("prefill_worker", r.prefill_worker);
    if (r.rank >= 0) w.member("rank", r.rank);
    if (r.routed) {
      w.member("matched_blocks", r.matched_blocks);
      w.member("decision_us", thousandths(r.decision_us));
    }
    if (!r.branch.empty()) w.member("branch", r.branch);
    if (!r.decision.empty()) w.member("decision", r.decision);
    if (r.ttft_ms >= 0) w.member("ttft_ms", thousandths(r.ttft_ms));
    if (r.queued_ms >= 0) w.member("queued_ms", thousandths(r.queued_ms));
    if (r.prompt_tokens >= 0) w.member("prompt_tokens", r.prompt_tokens);
    if (r.completion_tokens >= 0) w.member("completion_tokens", r.completion_tokens);
    if (r.attempts > 0) w.member("attempts", r.attempts);
    if (!r.tenant.empty()) w.member("tenant", r.tenant);
    if (!r.priority.empty()) w.member("priority", r.priority);
    w.member("request_id", r.request_id).end_object();
    out.push_back('\n');
    return out;
  }
  out.append(r.method).append(" ").append(r.path).append(" ").append(std::to_string(r.status));
  if (r.attempts > 0 || !r.model.empty()) {
    append_field(out, "model", r.model);
    append_field(out, "worker", r.worker);
    if (!r.prefill_worker.empty()) append_field(out, "prefill_worker", r.prefill_worker);
    if (!r.tenant.empty()) append_field(out, "tenant", r.tenant);
    append_field(out, "rank", r.rank >= 0 ? std::to_string(r.rank) : "");
    append_field(out, "matched", r.routed ? std::to_string(r.matched_blocks) : "");
    out.append(" decision_us=");
    if (r.routed) {
      append_number(out, r.decision_us);
    } else {
      out.push_back('-');
    }
    out.append(" ttft_ms=");
    if (r.ttft_ms >= 0) {
      append_number(out, r.ttft_ms);
    } else {
      out.push_back('-');
    }
  }
  if (r.queued_ms >= 0) {
    out.append(" queued_ms=");
    append_number(out, r.queued_ms);
  }
  out.append(" duration_ms=");
  append_number(out, r.duration_ms);
  if (r.attempts > 0) out.append(" attempts=").append(std::to_string(r.attempts));
  append_field(out, "id", r.request_id);
  if (!r.branch.empty()) append_field(out, "branch", r.branch);
  // Quoted: the decision's text has spaces (and never a quote: URLs and names of its own).
  if (!r.decision.empty()) out.append(" decision=\"").append(r.decision).append("\"");
  out.push_back('\n');
  return out;
}

}  // namespace kvgate::app
