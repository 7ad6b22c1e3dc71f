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

// The gateway's default --worker-wedge-secs, which drills run with.
constexpr double kWedgeSecs = 3;

// Seconds since the process's drill origin.
double now_s();
void sleep_s(double s);

// kvgate-mock with `workers` workers on free ports (or the ports `extra_args` names).
class MockFleet {
 public:
  MockFleet(int workers, std::vector<std::string> extra_args);
  bool ready() const { return !http_ports_.empty(); }
  std::string url(size_t i) const;
  uint16_t http_port(size_t i) const { return http_ports_.at(i); }
  // A prefill worker's bootstrap port (--pd-role prefill; 0 for other roles).
  uint16_t bootstrap_port(size_t i) const { return bootstrap_ports_.at(i); }
  size_t size() const { return http_ports_.size(); }
  Child& process() { return *child_; }
  std::vector<std::string> urls() const;
  // Arguments that bind a new kvgate-mock of one worker to worker `i`'s HTTP and KV ports, so a
  // restarted engine answers where the old one did.
  std::vector<std::string> same_ports_args(size_t i) const;
  // Every port worker `i` listens on (HTTP first, then each rank's PUB and replay).
  std::vector<uint16_t> ports_of(size_t i) const;
  // POSTs a JSON body to worker `i` directly, not through the gateway (its admin routes such as
  // /admin/fault/pause, or an inference route); true on 200.
  bool post(size_t i, const std::string& route, const std::string& body = "{}") const;
  // GETs one of worker `i`'s admin routes (/admin/truth, /admin/faults).
  std::optional<std::string> admin_get(size_t i, const std::string& route) const;
  // Block copies worker `i`'s engine holds now, over its ranks (from /admin/truth).
  std::optional<size_t> resident_blocks(size_t i) const;

 private:
  struct RankPorts {
    uint16_t pub = 0, replay = 0;
  };
  std::string port_file_;
  std::unique_ptr<Child> child_;
  std::vector<uint16_t> http_ports_;
  std::vector<uint16_t> bootstrap_ports_;
  std::vector<std::string> urls_;
  std::vector<std::vector<RankPorts>> kv_ports_;
};

// What /workers says of one worker.
struct WorkerView {
  std::string url;
  bool routable = false;
  std::string health, breaker, liveness, load_source;
  uint64_t requests = 0;
  uint64_t in_flight = 0;
  uint64_t index_blocks = 0;
};

// Whether routing would send a new request to the worker: healthy, breaker closed and no liveness
// veto (out_of_routing is the negation).
inline bool in_routing(const WorkerView& v) { return v.routable && v.liveness == "live"; }
inline bool out_of_routing(const WorkerView& v) { return !in_routing(v); }

// The kvgate binary on a loopback port (`port` 0: a free one).
class GatewayProcess {
 public:
  GatewayProcess(const std::vector<std::string>& worker_urls, std::vector<std::string> extra_args,
                 uint16_t port = 0);
  bool ready() const { return port_ != 0; }
  uint16_t port() const { return port_; }
  Child& process() { return *child_; }
  std::vector<WorkerView> workers() const;
  std::optional<WorkerView> worker(const std::string& url) const;
  std::string metrics() const;
  // The sum of the samples of `family` in /metrics whose line contains `with` (e.g. a label
  // `disposition="replayed"`; empty: every sample); nullopt when absent.
  std::optional<double> metric_sum(const std::string& family, const std::string& with = "") const;
  // Waits until `n` workers are routable.
  bool wait_routable(size_t n, double timeout_s) const;

 private:
  std::unique_ptr<Child> child_;
  uint16_t port_ = 0;
};

// `kvgate relay` in front of `engine_urls` on a loopback port (`port` 0: a free one), with its
// /metrics on another.
class RelayProcess {
 public:
  RelayProcess(const std::vector<std::string>& engine_urls, std::vector<std::string> extra_args,
               uint16_t port = 0);
  bool ready() const { return port_ != 0; }
  uint16_t port() const { return port_; }
  Child& process() { return *child_; }
  std::string metrics() const;
  std::optional<double> metric_sum(const std::string& family, const std::string& with = "") const;

 private:
  std::unique_ptr<Child> child_;
  uint16_t port_ = 0;
  uint16_t metrics_port_ = 0;
};

// The sum of the samples of `family` in a Prometheus text exposition whose line contains `with`
// (empty: every sample); nullopt when absent.
std::optional<double> metric_sum(const std::string& text, const std::string& family,
                                 const std::string& with = "");

// Two one-worker kvgate-mock processes (a, which the drill faults, and b) behind a gateway with
// default flags. `a` can be replaced by a new process on the same ports.
struct TwoEngines {
  std::unique_ptr<MockFleet> a = std::make_unique<MockFleet>(1, std::vector<std::string>{});
  MockFleet b{1, {}};
  GatewayProcess gw{{a->url(0), b.url(0)}, {"--log-level", "warn"}};
  // Every process started and both workers routable.
  bool ready() const { return a->ready() && b.ready() && gw.ready() && gw.wait_routable(2, 20); }
  uint64_t requests_of(const std::string& url) const {
    auto v = gw.worker(url);
    return v ? v->requests : 0;
  }
  uint64_t index_blocks_of(const std::string& url) const {
    auto v = gw.worker(url);
    return v ? v->index_blocks : 0;
  }
};

// One worker's blocks in the gateway's index and in its engine (/admin/truth; 0 when either did
// not answer).
struct IndexVsEngine {
  uint64_t index = 0;
  size_t engine = 0;
  bool answered = false;
};
// Every worker of `fleet`, in its order.
std::vector<IndexVsEngine> index_vs_engines(const GatewayProcess& gw, const MockFleet& fleet);
// Waits up to `timeout_s` until every worker's index holds exactly what its engine holds (true);
// `last` (may be null) gets the last comparison.
bool wait_index_exact(const GatewayProcess& gw, const MockFleet& fleet, double timeout_s,
                      std::vector<IndexVsEngine>* last = nullptr);
// "index 40 of 40, 12 of 12 blocks".
std::string describe(const std::vector<IndexVsEngine>& v);

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

// One request (streamed unless TrafficOptions::stream is false) as its client saw it.
struct StreamRecord {
  bool streamed = true;
  double start = 0;
  double first = -1;        // first body piece (-1: none)
  double end = -1;          // the stream's end or failure
  double longest_wait = 0;  // before the first piece, or between two pieces
  unsigned status = 0;
  bool done = false;         // ended with [DONE] (streamed) or carried choices (not streamed)
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
  bool stream = true;
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
  // `n` requests at once, each on its own connection.
  void start_burst(int n);
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

// Probes `targets` (e.g. /health, /metrics) every 50 ms on fresh connections until finish();
// keeps the slowest answer and counts the failures.
class EndpointProbe {
 public:
  EndpointProbe(uint16_t port, std::vector<std::string> targets);
  ~EndpointProbe() { finish(); }
  void finish();
  double slowest() const { return slowest_; }
  int failures() const { return failures_; }
  int probes() const { return probes_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<double> slowest_{0};
  std::atomic<int> failures_{0}, probes_{0};
  std::thread thread_;
};

// Runs the calling thread at the lowest CPU priority: a drill's load generators stand in for
// clients on other machines, whose CPU is not the gateway's to share (false when it could not).
bool yield_cpu_to_others();

// Pins every thread of process `pid` to CPU `cpu` (false when it could not).
bool pin_process(int pid, int cpu);

// "%.1f s" of an optional time relative to `from`, or "never".
std::string seconds_after(const std::optional<double>& t, double from);

// A TCP relay on 127.0.0.2 for each of `ports`, to the same port on 127.0.0.1: point a worker's
// URL and advertised KV endpoints at 127.0.0.2 and cut() partitions it. Cut, the relay stops
// accepting and stops moving bytes both ways (what a dropped link looks like to TCP: nothing
// arrives, nothing is refused); heal() lets the held bytes and connections through again.
class Partition {
 public:
  explicit Partition(const std::vector<uint16_t>& ports);
  ~Partition();
  bool ready() const { return ready_; }
  void cut() { cut_ = true; }
  void heal() { cut_ = false; }

 private:
  void run();
  std::vector<int> listeners_;
  std::vector<uint16_t> ports_;
  bool ready_ = false;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Prints "drill <name>: PASS|FAIL | <measured>" and appends a table row to $KVGATE_DRILL_REPORT.
void report(const std::string& name, const std::string& rule, const std::string& measured,
            bool passed);

}  // namespace kvgate::drills
