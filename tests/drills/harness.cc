#include "drills/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <simdjson.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>

#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/http/client.h"
#include "support/wait.h"

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

std::chrono::milliseconds in_ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
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
    uint64_t bootstrap = 0;  // a prefill worker's only
    if (w["bootstrap_port"].get_uint64().get(bootstrap) != simdjson::SUCCESS) bootstrap = 0;
    bootstrap_ports_.push_back(static_cast<uint16_t>(bootstrap));
    urls_.emplace_back(w["url"].get_string().value());
    std::vector<RankPorts> ranks;
    for (auto r : w["ranks"].get_array()) {
      ranks.push_back({static_cast<uint16_t>(r["pub_port"].get_uint64().value()),
                       static_cast<uint16_t>(r["replay_port"].get_uint64().value())});
    }
    kv_ports_.push_back(std::move(ranks));
  }
}

std::string MockFleet::url(size_t i) const { return urls_.at(i); }

std::vector<std::string> MockFleet::same_ports_args(size_t i) const {
  std::vector<std::string> args = {"--http-ports", std::to_string(http_ports_.at(i))};
  std::vector<std::string> pubs = {"--kv-pub-ports"}, replays = {"--kv-replay-ports"};
  for (const RankPorts& r : kv_ports_.at(i)) {
    pubs.push_back(std::to_string(r.pub));
    replays.push_back(std::to_string(r.replay));
  }
  args.insert(args.end(), pubs.begin(), pubs.end());
  args.insert(args.end(), replays.begin(), replays.end());
  return args;
}

std::vector<uint16_t> MockFleet::ports_of(size_t i) const {
  std::vector<uint16_t> ports = {http_ports_.at(i)};
  for (const RankPorts& r : kv_ports_.at(i)) {
    ports.push_back(r.pub);
    if (r.replay != 0) ports.push_back(r.replay);
  }
  return ports;
}

bool MockFleet::post(size_t i, const std::string& route, const std::string& body) const {
  http::SyncClient c("127.0.0.1", http_ports_.at(i),
                     http::ClientOptions{.connect_timeout = std::chrono::milliseconds(2000),
                                         .request_timeout = std::chrono::milliseconds(5000)});
  auto r = c.post(route, body);
  return r.ok() && r->status == 200;
}

std::vector<std::string> MockFleet::urls() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < size(); ++i) out.push_back(url(i));
  return out;
}

std::optional<std::string> MockFleet::admin_get(size_t i, const std::string& route) const {
  return get(http_ports_.at(i), route);
}

std::optional<size_t> MockFleet::resident_blocks(size_t i) const {
  auto body = admin_get(i, "/admin/truth");
  if (!body) return std::nullopt;
  // Block copies, as an index counts them: two requests that computed the same block at once
  // leave two cached copies of it (and two stored events).
  size_t n = 0;
  const std::string key = "\"copies\":";
  for (size_t at = body->find(key); at != std::string::npos; at = body->find(key, at + 1)) {
    n += std::strtoull(body->c_str() + at + key.size(), nullptr, 10);
  }
  return n;
}

// ---- GatewayProcess ----

GatewayProcess::GatewayProcess(const std::vector<std::string>& worker_urls,
                               std::vector<std::string> extra_args, uint16_t port) {
  // (Every answer names its worker: the drills check where requests went.)
  std::vector<std::string> args = {
      testing::binary_dir() + "/kvgate", "--host", "127.0.0.1", "--port", std::to_string(port),
      "--expose-worker-header"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  if (!worker_urls.empty()) {  // (none: the workers are in extra_args, e.g. --prefill/--decode)
    args.push_back("--worker-urls");
    args.insert(args.end(), worker_urls.begin(), worker_urls.end());
  }
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
    v.index_blocks = w["index_blocks"].get_uint64().value();
    v.in_flight = w["in_flight"].get_uint64().value();
    v.load_source = std::string(w["load_source"].get_string().value());
    out.push_back(std::move(v));
  }
  return out;
}

std::optional<WorkerView> GatewayProcess::worker(const std::string& url) const {
  for (WorkerView& v : workers()) {
    if (v.url == url) return std::move(v);
  }
  return std::nullopt;
}

std::string GatewayProcess::metrics() const { return get(port_, "/metrics").value_or(""); }

std::optional<double> GatewayProcess::metric_sum(const std::string& family,
                                                 const std::string& with) const {
  return drills::metric_sum(metrics(), family, with);
}

std::optional<double> metric_sum(const std::string& text, const std::string& family,
                                 const std::string& with) {
  std::optional<double> sum;
  size_t at = 0;
  while (at < text.size()) {
    const size_t eol = std::min(text.find('\n', at), text.size());
    const std::string_view line(text.data() + at, eol - at);
    at = eol + 1;
    if (line.substr(0, family.size()) != family || line.size() <= family.size()) continue;
    const char next = line[family.size()];
    if (next != ' ' && next != '{') continue;
    if (!with.empty() && line.find(with) == std::string_view::npos) continue;
    const size_t space = line.rfind(' ');
    sum = sum.value_or(0) + std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  }
  return sum;
}

std::vector<IndexVsEngine> index_vs_engines(const GatewayProcess& gw, const MockFleet& fleet) {
  std::vector<IndexVsEngine> out(fleet.size());
  const std::vector<WorkerView> views = gw.workers();
  for (size_t i = 0; i < fleet.size(); ++i) {
    auto truth = fleet.resident_blocks(i);
    auto view = std::find_if(views.begin(), views.end(),
                             [&](const WorkerView& v) { return v.url == fleet.url(i); });
    out[i].engine = truth.value_or(0);
    out[i].index = view != views.end() ? view->index_blocks : 0;
    out[i].answered = truth.has_value() && view != views.end();
  }
  return out;
}

bool wait_index_exact(const GatewayProcess& gw, const MockFleet& fleet, double timeout_s,
                      std::vector<IndexVsEngine>* last) {
  std::vector<IndexVsEngine> v;
  const bool exact = testing::wait_until(
      [&] {
        v = index_vs_engines(gw, fleet);
        return std::all_of(v.begin(), v.end(), [](const IndexVsEngine& w) {
          return w.answered && w.index == w.engine;
        });
      },
      in_ms(timeout_s), std::chrono::milliseconds(100));
  if (last != nullptr) *last = std::move(v);
  return exact;
}

std::string describe(const std::vector<IndexVsEngine>& v) {
  std::string out = "index";
  for (size_t i = 0; i < v.size(); ++i) {
    out +=
        (i == 0 ? " " : ", ") + std::to_string(v[i].index) + " of " + std::to_string(v[i].engine);
  }
  return out + " blocks";
}

// ---- RelayProcess ----

RelayProcess::RelayProcess(const std::vector<std::string>& engine_urls,
                           std::vector<std::string> extra_args, uint16_t port) {
  std::vector<std::string> args = {testing::binary_dir() + "/kvgate",
                                   "relay",
                                   "--listen",
                                   "127.0.0.1:" + std::to_string(port),
                                   "--metrics-listen",
                                   "127.0.0.1:0",
                                   "--log-level",
                                   "warn"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  for (const std::string& url : engine_urls) {
    args.push_back("--engine");
    args.push_back(url);
  }
  child_ = std::make_unique<Child>(args);
  if (!child_->wait_for_output("kvgate relay metrics on", std::chrono::seconds(20))) {
    std::fprintf(stderr, "drill: kvgate relay did not start (%s): %s\n", join_args(args).c_str(),
                 child_->errors().c_str());
    return;
  }
  const std::string out = child_->output();
  const auto port_after = [&out](const std::string& label) {
    const size_t colon = out.find(':', out.find(label) + label.size());
    return static_cast<uint16_t>(std::stoi(out.substr(colon + 1)));
  };
  port_ = port_after("listening on ");
  metrics_port_ = port_after("metrics on ");
}

std::string RelayProcess::metrics() const { return get(metrics_port_, "/metrics").value_or(""); }

std::optional<double> RelayProcess::metric_sum(const std::string& family,
                                               const std::string& with) const {
  return drills::metric_sum(metrics(), family, with);
}

bool GatewayProcess::wait_routable(size_t n, double timeout_s) const {
  return testing::wait_until(
      [&] {
        size_t routable = 0;
        for (const auto& w : workers()) routable += w.routable ? 1 : 0;
        return routable >= n;
      },
      in_ms(timeout_s), std::chrono::milliseconds(50));
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
  return R"({"model":"mock-8b","stream":)" + std::string(o.stream ? "true" : "false") +
         R"(,"max_tokens":)" + std::to_string(o.max_tokens) + R"(,"prompt":")" + prompt + "\"}";
}

// One streamed request over `conn` (opened or replaced as needed); false when the gateway could
// not be reached at all.
net::awaitable<bool> one_request(TrafficOptions o, std::shared_ptr<Traffic::State> st,
                                 std::atomic<size_t>* in_flight, uint64_t client,
                                 std::unique_ptr<http::Connection>* conn) {
  ++*in_flight;
  StreamRecord rec;
  rec.streamed = o.stream;
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
  bool reached = true;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = *conn && (*conn)->idle_and_open();
    if (!reused) {
      auto c = co_await http::Connection::connect("127.0.0.1", o.port, copts);
      if (!c.ok()) {
        rec.failure = "connect: " + std::string(message_of(c.status()));
        reached = false;
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
      // Bounded, and always holding the end: [DONE] or an error event is in the last pieces.
      if (body.size() > (1 << 16)) body.erase(0, body.size() - (1 << 12));
      body.append(*piece);
    }
    if (rec.status != 200 && rec.failure.empty()) {
      rec.failure = "status " + std::to_string(rec.status) + ": " + body.substr(0, 200);
    }
    break;
  }
  rec.end = now_s();
  if (rec.first < 0) rec.longest_wait = std::max(rec.longest_wait, rec.end - rec.start);
  rec.done = o.stream ? body.find("[DONE]") != std::string::npos
                      : rec.status == 200 && body.find("\"choices\"") != std::string::npos;
  rec.error_event = body.find("\"error\"") != std::string::npos;
  if (!(*conn) || !(*conn)->reusable()) conn->reset();
  {
    std::lock_guard<std::mutex> l(st->mu);
    st->records.push_back(std::move(rec));
  }
  --*in_flight;
  co_return reached;
}

net::awaitable<void> closed_client(TrafficOptions o, std::shared_ptr<Traffic::State> st,
                                   std::atomic<size_t>* in_flight, uint64_t client) {
  std::unique_ptr<http::Connection> conn;
  net::steady_timer pause(co_await net::this_coro::executor);
  while (!st->stop) {
    const bool reached = co_await one_request(o, st, in_flight, client, &conn);
    if (reached) continue;
    // The gateway is down (a drill restarts it): try again shortly, not in a tight loop.
    pause.expires_after(std::chrono::milliseconds(50));
    boost::system::error_code ec;
    co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
}

net::awaitable<void> open_request(TrafficOptions o, std::shared_ptr<Traffic::State> st,
                                  std::atomic<size_t>* in_flight, uint64_t client) {
  std::unique_ptr<http::Connection> conn;
  (void)co_await one_request(o, st, in_flight, client, &conn);
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

void Traffic::start_burst(int n) {
  state_->stop = false;
  for (int i = 0; i < n; ++i) {
    net::co_spawn(io_.context(0), open_request(options_, state_, &in_flight_, i % 64),
                  net::detached);
  }
}

void Traffic::stop(double timeout_s) {
  state_->stop = true;
  testing::wait_until([&] { return in_flight_.load() == 0; }, in_ms(timeout_s),
                      std::chrono::milliseconds(10));
}

std::vector<StreamRecord> Traffic::records() const {
  std::lock_guard<std::mutex> l(state_->mu);
  return state_->records;
}

// ---- Probes and figures of processes ----

EndpointProbe::EndpointProbe(uint16_t port, std::vector<std::string> targets) {
  thread_ = std::thread([this, port, targets = std::move(targets)] {
    while (!stop_) {
      for (const std::string& target : targets) {
        http::SyncClient c("127.0.0.1", port,
                           http::ClientOptions{.connect_timeout = std::chrono::milliseconds(5000),
                                               .request_timeout = std::chrono::milliseconds(5000)});
        const double t0 = now_s();
        auto r = c.get(target);
        const double took = now_s() - t0;
        if (!r.ok() || r->status != 200) ++failures_;
        slowest_ = std::max(slowest_.load(), took);
        ++probes_;
      }
      sleep_s(0.05);
    }
  });
}

void EndpointProbe::finish() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool yield_cpu_to_others() {
  return ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19) == 0;
}

bool pin_process(int pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  bool all = true;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& e : std::filesystem::directory_iterator(tasks)) {
    const pid_t tid = static_cast<pid_t>(std::stol(e.path().filename().string()));
    all &= ::sched_setaffinity(tid, sizeof set, &set) == 0;
  }
  return all;
}

std::string seconds_after(const std::optional<double>& t, double from) {
  if (!t) return "never";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", *t - from);
  return buf;
}

// ---- Partition ----

Partition::Partition(const std::vector<uint16_t>& ports) : ports_(ports) {
  for (uint16_t port : ports) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(0x7f000002);  // 127.0.0.2
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1) != 0) {
      std::fprintf(stderr, "drill: partition relay cannot listen on 127.0.0.2:%u: %s\n", port,
                   std::strerror(errno));
      ::close(fd);
      for (int l : listeners_) ::close(l);
      listeners_.clear();
      return;
    }
    listeners_.push_back(fd);
  }
  ready_ = true;
  thread_ = std::thread([this] { run(); });
}

Partition::~Partition() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (int fd : listeners_) ::close(fd);
}

void Partition::run() {
  // One relayed connection: bytes read from one side wait in `pending` until the other takes them.
  struct Side {
    int fd = -1;
    std::string pending;  // bytes read from the other side, not yet written to this one
    bool read_closed = false;
  };
  struct Pair {
    Side a, b;  // a: the client's connection, b: the one to the worker
  };
  std::vector<std::unique_ptr<Pair>> pairs;
  char buf[1 << 16];
  while (!stop_) {
    if (cut_) {  // nothing moves, nothing is accepted
      sleep_s(0.01);
      continue;
    }
    std::vector<pollfd> fds;
    for (int l : listeners_) fds.push_back({l, POLLIN, 0});
    for (auto& p : pairs) {
      fds.push_back({p->a.fd,
                     static_cast<short>((p->a.read_closed ? 0 : POLLIN) |
                                        (p->a.pending.empty() ? 0 : POLLOUT)),
                     0});
      fds.push_back({p->b.fd,
                     static_cast<short>((p->b.read_closed ? 0 : POLLIN) |
                                        (p->b.pending.empty() ? 0 : POLLOUT)),
                     0});
    }
    if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
    if (cut_) continue;
    for (size_t i = 0; i < listeners_.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      const int client = ::accept4(listeners_[i], nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (client < 0) continue;
      const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(ports_[i]);
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(upstream);
        ::close(client);
        continue;
      }
      ::fcntl(upstream, F_SETFL, ::fcntl(upstream, F_GETFL) | O_NONBLOCK);
      auto p = std::make_unique<Pair>();
      p->a.fd = client;
      p->b.fd = upstream;
      pairs.push_back(std::move(p));
    }
    size_t k = listeners_.size();
    for (auto& p : pairs) {
      const pollfd& fa = fds.size() > k ? fds[k] : pollfd{};
      const pollfd& fb = fds.size() > k + 1 ? fds[k + 1] : pollfd{};
      k += 2;
      const auto move = [&](Side& from, Side& to, short revents) {
        if (revents & (POLLIN | POLLHUP | POLLERR)) {
          const ssize_t n = ::read(from.fd, buf, sizeof buf);
          if (n > 0) {
            to.pending.append(buf, static_cast<size_t>(n));
          } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            from.read_closed = true;
          }
        }
      };
      move(p->a, p->b, fa.revents);
      move(p->b, p->a, fb.revents);
      for (Side* s : {&p->a, &p->b}) {
        if (s->pending.empty() || s->fd < 0) continue;
        const ssize_t n = ::send(s->fd, s->pending.data(), s->pending.size(), MSG_NOSIGNAL);
        if (n > 0) s->pending.erase(0, static_cast<size_t>(n));
      }
      // One side gone and everything it sent delivered: close both.
      if ((p->a.read_closed && p->b.pending.empty()) ||
          (p->b.read_closed && p->a.pending.empty())) {
        ::close(p->a.fd);
        ::close(p->b.fd);
        p->a.fd = p->b.fd = -1;
      }
    }
    std::erase_if(pairs, [](const auto& p) { return p->a.fd < 0; });
  }
  for (auto& p : pairs) {
    if (p->a.fd >= 0) ::close(p->a.fd);
    if (p->b.fd >= 0) ::close(p->b.fd);
  }
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
