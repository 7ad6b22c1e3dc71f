#include "drills/harness.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/http/client.h"

namespace kvgate::drills {
namespace net = boost::asio;

namespace {

const SteadyClock::time_point kOrigin = SteadyClock::now();

std::string join_args(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string temp_path(const std::string& what) {
  static std::atomic<int> n{0};
  return "/tmp/kvgate-drill-" + std::to_string(getpid()) + "-" + std::to_string(n++) + "-" + what;
}

std::optional<std::string> get(uint16_t port, const std::string& target) {
  http::SyncClient c("127.0.0.1", port,
                     http::ClientOptions{.connect_timeout = std::chrono::milliseconds(1000),
                                         .request_timeout = std::chrono::milliseconds(2000)});
  auto r = c.get(target);
  if (!r.ok() || r->status != 200) return std::nullopt;
  return r->body;
}

}  // namespace

double now_s() { return std::chrono::duration<double>(SteadyClock::now() - kOrigin).count(); }

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// ---- MockFleet ----

MockFleet::MockFleet(int workers, std::vector<std::string> extra_args) {
  port_file_ = temp_path("mock-ports.json");
  std::vector<std::string> args = {testing::binary_dir() + "/kvgate-mock",
                                   "--workers",
                                   std::to_string(workers),
                                   "--http-port",
                                   "0",
                                   "--kv-port",
                                   "0",
                                   "--port-file",
                                   port_file_,
                                   "--log-level",
                                   "warn"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  child_ = std::make_unique<Child>(args);
  if (!child_->wait_for_output("kvgate-mock ready", std::chrono::seconds(20))) {
    std::fprintf(stderr, "drill: kvgate-mock did not start (%s): %s\n", join_args(args).c_str(),
                 child_->errors().c_str());
    return;
  }
  std::ifstream f(port_file_);
  const std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(port_file_.c_str());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return;
  for (auto w : doc["workers"].get_array()) {
    http_ports_.push_back(static_cast<uint16_t>(w["http_port"].get_uint64().value()));
  }
}

std::string MockFleet::url(size_t i) const {
  return "http://127.0.0.1:" + std::to_string(http_ports_.at(i));
}

std::vector<std::string> MockFleet::urls() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < size(); ++i) out.push_back(url(i));
  return out;
}

// ---- GatewayProcess ----

GatewayProcess::GatewayProcess(const std::vector<std::string>& worker_urls,
                               std::vector<std::string> extra_args) {
  std::vector<std::string> args = {testing::binary_dir() + "/kvgate", "--host", "127.0.0.1",
                                   "--port", "0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back("--worker-urls");
  args.insert(args.end(), worker_urls.begin(), worker_urls.end());
  child_ = std::make_unique<Child>(args);
  if (!child_->wait_for_output("kvgate listening on", std::chrono::seconds(20))) {
    std::fprintf(stderr, "drill: kvgate did not start (%s): %s\n", join_args(args).c_str(),
                 child_->errors().c_str());
    return;
  }
  const std::string out = child_->output();
  const size_t colon = out.find(':', out.find("listening on"));
  port_ = static_cast<uint16_t>(std::stoi(out.substr(colon + 1)));
}

std::vector<WorkerView> GatewayProcess::workers() const {
  std::vector<WorkerView> out;
  auto body = get(port_, "/workers");
  if (!body) return out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(*body).get(doc) != simdjson::SUCCESS) return out;
  for (auto w : doc["workers"].get_array()) {
    WorkerView v;
    v.url = std::string(w["url"].get_string().value());
    v.routable = w["routable"].get_bool().value();
    v.health = std::string(w["health"].get_string().value());
    v.breaker = std::string(w["circuit_breaker"].get_string().value());
    v.liveness = std::string(w["liveness"].get_string().value());
    v.requests = w["requests"].get_uint64().value();
    out.push_back(std::move(v));
  }
  return out;
}

std::string GatewayProcess::metrics() const { return get(port_, "/metrics").value_or(""); }

bool GatewayProcess::wait_routable(size_t n, double timeout_s) const {
  const double deadline = now_s() + timeout_s;
  while (now_s() < deadline) {
    size_t routable = 0;
    for (const auto& w : workers()) routable += w.routable ? 1 : 0;
    if (routable >= n) return true;
    sleep_s(0.05);
  }
  return false;
}

// ---- Watcher ----

Watcher::Watcher(const GatewayProcess& gw) : gw_(gw) {
  thread_ = std::thread([this] {
    std::map<std::string, WorkerView> last;
    while (!stop_) {
      const double at = now_s();
      for (const WorkerView& v : gw_.workers()) {
        auto it = last.find(v.url);
        const bool changed = it == last.end() || it->second.routable != v.routable ||
                             it->second.health != v.health || it->second.breaker != v.breaker ||
                             it->second.liveness != v.liveness;
        if (!changed) continue;
        last[v.url] = v;
        std::lock_guard<std::mutex> l(mu_);
        changes_[v.url].push_back({at, v});
      }
      sleep_s(0.05);
    }
  });
}

Watcher::~Watcher() {
  stop_ = true;
  thread_.join();
}

std::vector<Watcher::Change> Watcher::changes(const std::string& url) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = changes_.find(url);
  return it == changes_.end() ? std::vector<Change>{} : it->second;
}

// ---- Traffic ----

struct Traffic::State {
  std::mutex mu;
  std::vector<StreamRecord> records;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next_id{0};
};

namespace {

std::string request_body(const TrafficOptions& o, uint64_t id, uint64_t client) {
  std::string prompt = "client " + std::to_string(client) + " shares this context:";
  for (int i = 0; i < o.prompt_words; ++i)
    prompt += " word" + std::to_string((client * 7 + i) % 97);
  prompt += " and asks question " + std::to_string(id);
  return R"({"model":"mock-8b","stream":true,"max_tokens":)" + std::to_string(o.max_tokens) +
         R"(,"prompt":")" + prompt + "\"}";
}

// One streamed request over `conn` (opened or replaced as needed).
net::awaitable<void> one_request(TrafficOptions o, std::shared_ptr<Traffic::State> st,
                                 std::atomic<size_t>* in_flight, uint64_t client,
                                 std::unique_ptr<http::Connection>* conn) {
  ++*in_flight;
  StreamRecord rec;
  rec.start = now_s();
  const uint64_t id = st->next_id++;
  http::ClientRequest req;
  req.method = http::Verb::post;
  req.target = "/v1/completions";
  req.body = request_body(o, id, client);
  const http::ClientOptions copts{.connect_timeout = std::chrono::milliseconds(5000),
                                  .request_timeout = o.timeout,
                                  .idle_timeout = o.timeout};
  std::string body;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = *conn && (*conn)->idle_and_open();
    if (!reused) {
      auto c = co_await http::Connection::connect("127.0.0.1", o.port, copts);
      if (!c.ok()) {
        rec.failure = "connect: " + std::string(message_of(c.status()));
        break;
      }
      *conn = std::move(*c);
    }
    auto head = co_await (*conn)->start_streaming(req);
    if (!head.ok()) {
      if (reused && (*conn)->closed_by_peer()) continue;
      rec.failure = "head: " + std::string(message_of(head.status()));
      break;
    }
    rec.status = head->status;
    rec.worker = std::string(head->header("x-kvgate-worker"));
    double last = rec.start;
    for (;;) {
      auto piece = co_await (*conn)->next_piece();
      const double t = now_s();
      if (!piece.ok()) {
        rec.failure = "body: " + std::string(message_of(piece.status()));
        break;
      }
      if (piece->empty()) break;
      if (rec.first < 0) rec.first = t;
      rec.longest_wait = std::max(rec.longest_wait, t - last);
      last = t;
      if (body.size() < (1 << 16)) body.append(*piece);
    }
    if (rec.status != 200 && rec.failure.empty()) {
      rec.failure = "status " + std::to_string(rec.status) + ": " + body.substr(0, 200);
    }
    break;
  }
  rec.end = now_s();
  if (rec.first < 0) rec.longest_wait = std::max(rec.longest_wait, rec.end - rec.start);
  rec.done = body.find("[DONE]") != std::string::npos;
  rec.error_event = body.find("\"error\"") != std::string::npos;
  if (!(*conn) || !(*conn)->reusable()) conn->reset();
  {
    std::lock_guard<std::mutex> l(st->mu);
    st->records.push_back(std::move(rec));
  }
  --*in_flight;
}

net::awaitable<void> closed_client(TrafficOptions o, std::shared_ptr<Traffic::State> st,
                                   std::atomic<size_t>* in_flight, uint64_t client) {
  std::unique_ptr<http::Connection> conn;
  while (!st->stop) co_await one_request(o, st, in_flight, client, &conn);
}

net::awaitable<void> open_request(TrafficOptions o, std::shared_ptr<Traffic::State> st,
                                  std::atomic<size_t>* in_flight, uint64_t client) {
  std::unique_ptr<http::Connection> conn;
  co_await one_request(o, st, in_flight, client, &conn);
}

net::awaitable<void> open_loop(TrafficOptions o, std::shared_ptr<Traffic::State> st,
                               std::atomic<size_t>* in_flight, double rate) {
  std::mt19937_64 rng(42);
  std::exponential_distribution<double> gap(rate);
  net::steady_timer timer(co_await net::this_coro::executor);
  auto next = SteadyClock::now();
  for (uint64_t i = 0; !st->stop; ++i) {
    next +=
        std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(gap(rng)));
    timer.expires_at(next);
    boost::system::error_code ec;
    co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
    if (st->stop) break;
    net::co_spawn(co_await net::this_coro::executor, open_request(o, st, in_flight, i % 64),
                  net::detached);
  }
}

}  // namespace

Traffic::Traffic(TrafficOptions options) : options_(options), state_(std::make_shared<State>()) {
  io_.start();
}

Traffic::~Traffic() {
  stop(1);
  io_.stop();
}

void Traffic::start_closed(int clients) {
  state_->stop = false;
  for (int c = 0; c < clients; ++c) {
    net::co_spawn(io_.context(0), closed_client(options_, state_, &in_flight_, c), net::detached);
  }
}

void Traffic::start_open(double rate) {
  state_->stop = false;
  net::co_spawn(io_.context(0), open_loop(options_, state_, &in_flight_, rate), net::detached);
}

void Traffic::stop(double timeout_s) {
  state_->stop = true;
  const double deadline = now_s() + timeout_s;
  while (in_flight_.load() > 0 && now_s() < deadline) sleep_s(0.01);
}

std::vector<StreamRecord> Traffic::records() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->records;
}

// ---- Summaries and reports ----

TrafficSummary summarize(const std::vector<StreamRecord>& records) {
  TrafficSummary s;
  for (const auto& r : records) {
    ++s.total;
    s.longest_wait = std::max(s.longest_wait, r.longest_wait);
    if (r.ok()) {
      ++s.ok;
    } else if (r.ended_cleanly()) {
      ++s.error_events;
    } else {
      ++s.failures;
      ++s.failure_kinds[r.failure.substr(0, 80)];
    }
  }
  return s;
}

std::string TrafficSummary::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu of %zu ok, %zu ended with an error event, %zu failed", ok,
                total, error_events, failures);
  std::string out = buf;
  for (const auto& [kind, n] : failure_kinds) out += "; " + std::to_string(n) + " x " + kind;
  return out;
}

void report(const std::string& name, const std::string& rule, const std::string& measured,
            bool passed) {
  std::printf("drill %s: %s | %s\n", name.c_str(), passed ? "PASS" : "FAIL", measured.c_str());
  std::fflush(stdout);
  const char* path = std::getenv("KVGATE_DRILL_REPORT");
  if (path == nullptr || *path == '\0') return;
  const std::time_t t = std::time(nullptr);
  char date[16];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&t));
  std::ofstream(path, std::ios::app) << "| " << name << " | " << rule << " | " << measured << " | "
                                     << (passed ? "pass" : "FAIL") << " | " << date << " |\n";
}

}  // namespace kvgate::drills
