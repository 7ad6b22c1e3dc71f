// The fault drills' harness: real processes (kvgate, one kvgate-mock per worker that a fault must
// hit alone), streamed traffic that records what every request saw and when, a watcher that
// records when the gateway changed its mind about each worker, and the one-line report each
// drill prints (and appends to $KVGATE_DRILL_REPORT as a markdown table row).
//
// Times are seconds since the drill's origin (Drill::now()). Everything a drill starts is stopped
// when its objects go, whatever way the drill ends.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/http/io_pool.h"
#include "support/child_process.h"

namespace kvgate::drills {

using testing::Child;
using SteadyClock = std::chrono::steady_clock;

// Seconds since the process's drill origin.
double now_s();
void sleep_s(double s);

// kvgate-mock with `workers` workers on free ports.
class MockFleet {
 public:
  MockFleet(int workers, std::vector<std::string> extra_args);
  bool ready() const { return !http_ports_.empty(); }
  std::string url(size_t i) const;
  uint16_t http_port(size_t i) const { return http_ports_.at(i); }
  size_t size() const { return http_ports_.size(); }
  Child& process() { return *child_; }
  std::vector<std::string> urls() const;

 private:
  std::string port_file_;
  std::unique_ptr<Child> child_;
  std::vector<uint16_t> http_ports_;
};

// What /workers says of one worker.
struct WorkerView {
  std::string url;
  bool routable = false;
  std::string health, breaker, liveness;
  uint64_t requests = 0;
};

// The kvgate binary on a free loopback port.
class GatewayProcess {
 public:
  GatewayProcess(const std::vector<std::string>& worker_urls, std::vector<std::string> extra_args);
  bool ready() const { return port_ != 0; }
  uint16_t port() const { return port_; }
  Child& process() { return *child_; }
  std::vector<WorkerView> workers() const;
  std::string metrics() const;
  // Waits until `n` workers are routable.
  bool wait_routable(size_t n, double timeout_s) const;

 private:
  std::unique_ptr<Child> child_;
  uint16_t port_ = 0;
};

// Polls /workers every 50 ms and keeps each worker's changes with their times.
class Watcher {
 public:
  explicit Watcher(const GatewayProcess& gw);
  ~Watcher();
  struct Change {
    double at = 0;
    WorkerView view;
  };
  std::vector<Change> changes(const std::string& url) const;
  // The first time at or after `after` when `url`'s view satisfied `pred` (nullopt: never).
  template <class Pred>
  std::optional<double> first(const std::string& url, double after, Pred pred) const {
    for (const Change& c : changes(url)) {
      if (c.at >= after && pred(c.view)) return c.at;
    }
    return std::nullopt;
  }
  // Whether `url`'s view satisfied `pred` at any time.
  template <class Pred>
  bool ever(const std::string& url, Pred pred) const {
    return first(url, 0, pred).has_value();
  }

 private:
  const GatewayProcess& gw_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<Change>> changes_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One streamed request as its client saw it.
struct StreamRecord {
  double start = 0;
  double first = -1;        // first body piece (-1: none)
  double end = -1;          // the stream's end or failure
  double longest_wait = 0;  // before the first piece, or between two pieces
  unsigned status = 0;
  bool done = false;         // ended with [DONE]
  bool error_event = false;  // carried an error event
  std::string worker;        // x-kvgate-worker
  std::string failure;       // transport failure or non-200 status
  bool ok() const { return failure.empty() && status == 200 && done && !error_event; }
  bool ended_cleanly() const { return failure.empty() && status == 200 && (done || error_event); }
};

struct TrafficOptions {
  uint16_t port = 0;
  int max_tokens = 16;
  int prompt_words = 40;  // prompts share a prefix of this many words per client
  std::chrono::milliseconds timeout{600'000};
};

// Streamed completions against the gateway, closed loop (`clients` at once, back to back) or open
// loop (`rate` per second, Poisson), until stop().
class Traffic {
 public:
  explicit Traffic(TrafficOptions options);
  ~Traffic();
  void start_closed(int clients);
  void start_open(double rate);
  // Stops sending; waits up to `timeout_s` for the requests in flight.
  void stop(double timeout_s = 60);
  std::vector<StreamRecord> records() const;
  size_t in_flight() const { return in_flight_.load(); }

  struct State;  // the records and the stop flag, shared with the request coroutines

 private:
  TrafficOptions options_;
  http::IoPool io_{1};
  std::shared_ptr<State> state_;
  std::atomic<size_t> in_flight_{0};
};

// Summaries of a set of records.
struct TrafficSummary {
  size_t total = 0, ok = 0, error_events = 0, failures = 0;
  double longest_wait = 0;  // over every request
  std::map<std::string, size_t> failure_kinds;
  std::string describe() const;
};
TrafficSummary summarize(const std::vector<StreamRecord>& records);

// Prints "drill <name>: PASS|FAIL | <measured>" and appends a table row to $KVGATE_DRILL_REPORT.
void report(const std::string& name, const std::string& rule, const std::string& measured,
            bool passed);

}  // namespace kvgate::drills
