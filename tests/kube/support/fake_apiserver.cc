#include "kube/support/fake_apiserver.h"

#include <algorithm>
#include <fstream>
#include <future>
#include <stdexcept>
#include <utility>

#include "boost/asio/post.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/io_pool.h"
#include "kvgate/http/server.h"
#include "kvgate/kube/selector.h"
#include "support/test_certs.h"

namespace kvgate::testing {
namespace {

namespace net = boost::asio;

constexpr uint64_t kFirstResourceVersion = 1000;
constexpr auto kDefaultWatchTimeout = std::chrono::seconds(1800);
constexpr std::string_view kTimestamp = "2026-01-01T00:00:00Z";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 &&
               hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void write_map(JsonWriter& w, std::string_view key, const std::map<std::string, std::string>& m) {
  if (m.empty()) return;
  w.key(key).begin_object();
  for (const auto& [k, v] : m) w.member(k, v);
  w.end_object();
}

// The pod as the API writes it; `typed` adds kind and apiVersion (watch events carry them, list
// items do not).
void write_pod(JsonWriter& w, const FakePod& pod, bool typed) {
  w.begin_object();
  if (typed) w.member("kind", "Pod").member("apiVersion", "v1");
  w.key("metadata").begin_object();
  w.member("name", pod.name).member("namespace", pod.namespace_name).member("uid", pod.uid);
  w.member("resourceVersion", std::to_string(pod.resource_version));
  w.member("creationTimestamp", kTimestamp);
  if (pod.deleting)
    w.member("deletionTimestamp", kTimestamp).member("deletionGracePeriodSeconds", 30);
  write_map(w, "labels", pod.labels);
  write_map(w, "annotations", pod.annotations);
  w.end_object();
  w.key("spec").begin_object().key("containers").begin_array();
  w.begin_object().member("name", "engine").member("image", "engine:latest").end_object();
  w.end_array().end_object();
  w.key("status").begin_object();
  if (!pod.phase.empty()) w.member("phase", pod.phase);
  if (!pod.ip.empty()) w.member("podIP", pod.ip);
  w.key("conditions").begin_array();
  w.begin_object().member("type", "Ready").member("status", pod.ready ? "True" : "False");
  w.end_object().end_array();
  w.end_object();
  w.end_object();
}

std::string event_line(std::string_view type, const FakePod& pod) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("type", type).key("object");
  write_pod(w, pod, true);
  w.end_object();
  out += '\n';
  return out;
}

std::string status_json(unsigned code, std::string_view reason, std::string_view message) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("kind", "Status").member("apiVersion", "v1");
  w.key("metadata").begin_object().end_object();
  w.member("status", "Failure").member("message", message).member("reason", reason);
  w.member("code", code).end_object();
  return out;
}

std::string bookmark_line(uint64_t rv) {
  return R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":")" +
         std::to_string(rv) + R"(","annotations":{"k8s.io/initial-events-end":"true"}}}})" + "\n";
}

std::string gone_message(uint64_t asked, uint64_t compacted) {
  return "too old resource version: " + std::to_string(asked) + " (" + std::to_string(compacted) +
         ")";
}

net::awaitable<void> send_json(http::Responder& r, unsigned status, std::string_view body) {
  http::Response out = http::Response::json(status, std::string(body));
  (void)co_await r.send(std::move(out));
}

enum class Kind { kAdded, kModified, kDeleted };

struct Change {
  Kind kind;
  std::optional<FakePod> before;
  FakePod after;
};

// What a watch or list asked for.
struct PodQuery {
  std::string ns;  // "" every namespace
  kube::Selector selector;
  bool watch = false;
  bool bookmarks = false;
  std::string resource_version;
  std::chrono::seconds timeout = kDefaultWatchTimeout;

  bool selects(const FakePod& pod) const {
    return (ns.empty() || pod.namespace_name == ns) && selector.matches(pod.labels);
  }
};

// The line a watch gets for a change, if any: a pod entering or leaving the watch's selection is
// ADDED or DELETED to it.
std::optional<std::string> line_for(const PodQuery& q, const Change& c) {
  const bool was = c.before && q.selects(*c.before);
  const bool is = q.selects(c.after);
  if (c.kind == Kind::kDeleted)
    return is ? std::optional(event_line("DELETED", c.after)) : std::nullopt;
  if (was && is) return event_line("MODIFIED", c.after);
  if (was) return event_line("DELETED", c.after);
  if (is) return event_line("ADDED", c.after);
  return std::nullopt;
}

// One open watch. Its queue and flags are guarded by the server's mutex; its timer is the pool
// thread's.
struct Watch {
  PodQuery query;
  std::vector<std::string> lines;
  bool quiet = false;
  bool end = false;
  net::steady_timer* timer = nullptr;
};

}  // namespace

struct FakeApiServer::State {
  explicit State(FakeApiServerOptions o);

  // The pool thread's.
  net::awaitable<void> handle(const http::Request& req, http::Responder& r);
  net::awaitable<void> serve_pods(const http::Request& req, http::Responder& r,
                                  std::string_view ns);
  net::awaitable<void> serve_watch(http::Responder& r, PodQuery q);
  net::awaitable<void> pump(http::Responder& r, Watch& w,
                            std::chrono::steady_clock::time_point end);

  bool authorized(const http::Request& req) KVGATE_EXCLUDES(mu);
  std::string list_body(const PodQuery& q) KVGATE_EXCLUDES(mu);
  // Registers the watch with its first lines; or the resourceVersion it asked for when that is
  // older than the compaction point (410).
  std::optional<uint64_t> open(const std::shared_ptr<Watch>& w) KVGATE_EXCLUDES(mu);
  void close(const std::shared_ptr<Watch>& w) KVGATE_EXCLUDES(mu);
  std::string gone_line(uint64_t asked) KVGATE_REQUIRES(mu);

  // Any thread.
  void apply(FakePod pod) KVGATE_EXCLUDES(mu);
  bool remove(const std::string& ns, const std::string& name) KVGATE_EXCLUDES(mu);
  void record(Change c) KVGATE_REQUIRES(mu);
  void compact() KVGATE_REQUIRES(mu);
  template <class F>
  void for_watches(F f) KVGATE_EXCLUDES(mu) {
    {
      MutexLock l(&mu);
      for (const auto& w : watches) f(*w);
    }
    wake();
  }
  // Wakes every watch's pump, to send what was queued or to end.
  void wake() KVGATE_EXCLUDES(mu);

  TestCerts certs;
  http::IoPool pool{1};
  std::unique_ptr<http::Server> server;
  uint16_t port = 0;

  mutable Mutex mu;
  std::string token KVGATE_GUARDED_BY(mu);
  std::chrono::milliseconds bookmark_interval KVGATE_GUARDED_BY(mu) = std::chrono::milliseconds(0);
  bool gone_as_http_status KVGATE_GUARDED_BY(mu) = false;
  bool stopping KVGATE_GUARDED_BY(mu) = false;  // no new watch starts
  std::map<std::pair<std::string, std::string>, FakePod> pods KVGATE_GUARDED_BY(mu);
  std::vector<Change> history KVGATE_GUARDED_BY(mu);
  uint64_t resource_version KVGATE_GUARDED_BY(mu) = kFirstResourceVersion;
  uint64_t compacted KVGATE_GUARDED_BY(mu) = 0;  // watches from older versions get 410
  uint64_t next_uid KVGATE_GUARDED_BY(mu) = 1;
  std::vector<std::shared_ptr<Watch>> watches KVGATE_GUARDED_BY(mu);
  FakeApiServerStats stats KVGATE_GUARDED_BY(mu);
};

FakeApiServer::State::State(FakeApiServerOptions o) : certs(make_test_certs()) {
  MutexLock l(&mu);
  token = std::move(o.token);
  bookmark_interval = o.bookmark_interval;
  gone_as_http_status = o.gone_as_http_status;
}

bool FakeApiServer::State::authorized(const http::Request& req) {
  MutexLock l(&mu);
  ++stats.requests;
  if (req.header("authorization") == "Bearer " + token) return true;
  ++stats.unauthorized;
  return false;
}

net::awaitable<void> FakeApiServer::State::handle(const http::Request& req, http::Responder& r) {
  static constexpr std::string_view kNamespaces = "/api/v1/namespaces/";
  const std::string_view path = req.path();
  if (path == "/version") {
    co_await send_json(r, 200,
                       R"({"major":"1","minor":"32","gitVersion":"v1.32.0","gitCommit":"fake",)"
                       R"("gitTreeState":"clean","buildDate":"2026-01-01T00:00:00Z",)"
                       R"("goVersion":"go1.23.0","compiler":"gc","platform":"linux/amd64"})");
  } else if (!authorized(req)) {
    const std::string body = status_json(401, "Unauthorized", "Unauthorized");
    co_await send_json(r, 401, body);
  } else if (path == "/api") {
    co_await send_json(r, 200,
                       R"({"kind":"APIVersions","versions":["v1"],)"
                       R"("serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0",)"
                       R"("serverAddress":"127.0.0.1:443"}]})");
  } else if (path == "/apis") {
    co_await send_json(r, 200, R"({"kind":"APIGroupList","apiVersion":"v1","groups":[]})");
  } else if (path == "/api/v1") {
    co_await send_json(r, 200,
                       R"({"kind":"APIResourceList","groupVersion":"v1","resources":[)"
                       R"({"name":"pods","singularName":"pod","namespaced":true,)"
                       R"("kind":"Pod","verbs":["get","list","watch"],)"
                       R"("shortNames":["po"],"categories":["all"]}]})");
  } else if (path == "/api/v1/pods") {
    co_await serve_pods(req, r, "");
  } else if (path.rfind(kNamespaces, 0) == 0 && path.size() > kNamespaces.size() + 5 &&
             path.find('/', kNamespaces.size()) == path.size() - 5 &&
             path.substr(path.size() - 5) == "/pods") {
    const std::string_view ns =
        path.substr(kNamespaces.size(), path.size() - 5 - kNamespaces.size());
    co_await serve_pods(req, r, ns);
  } else {
    const std::string body =
        status_json(404, "NotFound", "the server could not find the requested resource");
    co_await send_json(r, 404, body);
  }
}

net::awaitable<void> FakeApiServer::State::serve_pods(const http::Request& req, http::Responder& r,
                                                      std::string_view ns) {
  PodQuery q;
  q.ns = std::string(ns);
  const auto param = [&](std::string_view key) {
    const std::optional<std::string_view> v = req.query_param(key);
    return v ? percent_decode(*v) : std::string();
  };
  Result<kube::Selector> selector = kube::Selector::parse(param("labelSelector"));
  if (!selector.ok()) {
    const std::string body = status_json(400, "BadRequest", message_of(selector.status()));
    co_await send_json(r, 400, body);
    co_return;
  }
  q.selector = *std::move(selector);
  q.watch = param("watch") == "1" || param("watch") == "true";
  q.bookmarks = param("allowWatchBookmarks") == "true" || param("allowWatchBookmarks") == "1";
  q.resource_version = param("resourceVersion");
  if (const std::string t = param("timeoutSeconds"); !t.empty()) {
    q.timeout = std::chrono::seconds(std::stol(t));
  }
  if (q.watch) {
    co_await serve_watch(r, std::move(q));
    co_return;
  }
  const std::string body = list_body(q);
  co_await send_json(r, 200, body);
}

std::string FakeApiServer::State::list_body(const PodQuery& q) {
  std::string out;
  JsonWriter w(&out);
  MutexLock l(&mu);
  ++stats.lists;
  w.begin_object().member("kind", "PodList").member("apiVersion", "v1");
  w.key("metadata").begin_object();
  w.member("resourceVersion", std::to_string(resource_version)).end_object();
  w.key("items").begin_array();
  for (const auto& [key, pod] : pods) {
    if (q.selects(pod)) write_pod(w, pod, false);
  }
  w.end_array().end_object();
  return out;
}

std::string FakeApiServer::State::gone_line(uint64_t asked) {
  return R"({"type":"ERROR","object":)" +
         status_json(410, "Expired", gone_message(asked, compacted)) + "}\n";
}

std::optional<uint64_t> FakeApiServer::State::open(const std::shared_ptr<Watch>& w) {
  MutexLock l(&mu);
  const std::string& rv = w->query.resource_version;
  if (rv.empty() || rv == "0") {
    for (const auto& [key, pod] : pods) {
      if (w->query.selects(pod)) w->lines.push_back(event_line("ADDED", pod));
    }
  } else {
    const uint64_t from = std::stoull(rv);
    if (from < compacted) {
      ++stats.gone;
      return from;
    }
    for (const Change& c : history) {
      if (c.after.resource_version <= from) continue;
      if (std::optional<std::string> line = line_for(w->query, c)) w->lines.push_back(*line);
    }
  }
  w->end = stopping;
  watches.push_back(w);
  ++stats.watches;
  ++stats.open_watches;
  return std::nullopt;
}

void FakeApiServer::State::close(const std::shared_ptr<Watch>& w) {
  MutexLock l(&mu);
  watches.erase(std::remove(watches.begin(), watches.end(), w), watches.end());
  --stats.open_watches;
}

net::awaitable<void> FakeApiServer::State::serve_watch(http::Responder& r, PodQuery q) {
  auto w = std::make_shared<Watch>();
  w->query = std::move(q);
  const auto end = std::chrono::steady_clock::now() + w->query.timeout;
  const std::optional<uint64_t> gone = open(w);
  bool as_status = false;
  std::string gone_text;
  if (gone) {
    MutexLock l(&mu);
    as_status = gone_as_http_status;
    gone_text =
        as_status ? status_json(410, "Expired", gone_message(*gone, compacted)) : gone_line(*gone);
  }
  if (gone && as_status) {
    co_await send_json(r, 410, gone_text);
    co_return;
  }
  if (!(co_await r.start_stream(200, "application/json")).ok()) {
    if (!gone) close(w);
    co_return;
  }
  if (gone) {
    (void)co_await r.finish(gone_text);
    co_return;
  }
  co_await pump(r, *w, end);
  close(w);
  (void)co_await r.finish();
}

// Writes the watch's lines as they come, and its bookmarks, until it ends.
net::awaitable<void> FakeApiServer::State::pump(http::Responder& r, Watch& w,
                                                std::chrono::steady_clock::time_point end) {
  net::steady_timer timer(co_await net::this_coro::executor);
  w.timer = &timer;
  std::optional<std::chrono::steady_clock::time_point> next_bookmark;
  for (;;) {
    std::vector<std::string> out;
    bool ended = false;
    std::chrono::milliseconds every{0};
    uint64_t rv = 0;
    {
      MutexLock l(&mu);
      ended = w.end;
      if (!w.quiet) out.swap(w.lines);
      every = w.query.bookmarks && !w.quiet ? bookmark_interval : std::chrono::milliseconds(0);
      rv = resource_version;
    }
    bool failed = false;
    for (const std::string& line : out) {
      if (!(co_await r.write(line)).ok()) {
        failed = true;
        break;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (failed || ended || now >= end) break;
    // A wake-up during those writes found no wait to cancel: look again before waiting.
    if (!out.empty()) continue;
    if (every.count() == 0) next_bookmark.reset();
    if (every.count() > 0 && !next_bookmark) next_bookmark = now + every;
    if (next_bookmark && now >= *next_bookmark) {
      const std::string line = bookmark_line(rv);
      if (!(co_await r.write(line)).ok()) break;
      next_bookmark = now + every;
      MutexLock l(&mu);
      ++stats.bookmarks;
      continue;
    }
    timer.expires_at(next_bookmark ? std::min(end, *next_bookmark) : end);
    const http::DisconnectWatch left = r.watch_disconnect([&timer] { timer.cancel(); });
    boost::system::error_code ec;
    co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
    if (left.fired()) break;
  }
  w.timer = nullptr;
}

void FakeApiServer::State::apply(FakePod pod) {
  {
    MutexLock l(&mu);
    auto key = std::make_pair(pod.namespace_name, pod.name);
    auto it = pods.find(key);
    Change c{it == pods.end() ? Kind::kAdded : Kind::kModified, std::nullopt, {}};
    if (it != pods.end()) {
      c.before = it->second;
      pod.uid = it->second.uid;
    } else {
      pod.uid = "uid-" + std::to_string(next_uid++);
    }
    pod.resource_version = ++resource_version;
    pods[key] = pod;
    c.after = std::move(pod);
    record(std::move(c));
  }
  wake();
}

bool FakeApiServer::State::remove(const std::string& ns, const std::string& name) {
  {
    MutexLock l(&mu);
    auto it = pods.find(std::make_pair(ns, name));
    if (it == pods.end()) return false;
    Change c{Kind::kDeleted, it->second, it->second};
    c.after.resource_version = ++resource_version;
    pods.erase(it);
    record(std::move(c));
  }
  wake();
  return true;
}

void FakeApiServer::State::record(Change c) {
  for (const auto& w : watches) {
    if (std::optional<std::string> line = line_for(w->query, c)) w->lines.push_back(*line);
  }
  history.push_back(std::move(c));
}

void FakeApiServer::State::compact() {
  compacted = resource_version;
  history.clear();
}

void FakeApiServer::State::wake() {
  net::post(pool.context(0), [this] {
    std::vector<std::shared_ptr<Watch>> open;
    {
      MutexLock l(&mu);
      open = watches;
    }
    for (const auto& w : open) {
      if (w->timer != nullptr) w->timer->cancel();
    }
  });
}

FakeApiServer::FakeApiServer(FakeApiServerOptions options)
    : state_(std::make_shared<State>(std::move(options))) {
  State* s = state_.get();
  s->server = std::make_unique<http::Server>(
      s->pool, http::ServerOptions{.address = "127.0.0.1",
                                   .write_timeout = std::chrono::milliseconds(10'000),
                                   .pin_context = 0,
                                   .tls_cert_path = s->certs.server_cert,
                                   .tls_key_path = s->certs.server_key});
  s->server->route_prefix(
      http::Verb::get, "/",
      [s](const http::Request& req, http::Responder& r) -> net::awaitable<void> {
        co_await s->handle(req, r);
      });
  s->pool.start();
  if (Status st = s->server->start(); !st.ok()) {
    throw std::runtime_error("fake API server: " + std::string(message_of(st)));
  }
  s->port = s->server->port();
}

FakeApiServer::~FakeApiServer() {
  {
    State& s = *state_;
    MutexLock l(&s.mu);
    s.stopping = true;
  }
  end_watches();
  state_->server->stop();
  state_->pool.stop();
}

uint16_t FakeApiServer::port() const { return state_->port; }
std::string FakeApiServer::url() const { return "https://127.0.0.1:" + std::to_string(port()); }
const std::string& FakeApiServer::ca_file() const { return state_->certs.ca_cert; }

std::string FakeApiServer::token() const {
  State& s = *state_;
  MutexLock l(&s.mu);
  return s.token;
}

void FakeApiServer::write_kubeconfig(const std::string& path, const std::string& ns,
                                     std::optional<std::string> token) const {
  std::ofstream out(path);
  out << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
      << "    server: " << url() << "\n    certificate-authority: " << ca_file() << "\n"
      << "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
      << "    namespace: " << ns << "\ncurrent-context: fake\nusers:\n- name: fake\n  user:\n"
      << "    token: " << (token ? *token : this->token()) << "\n";
}

void FakeApiServer::apply(FakePod pod) { state_->apply(std::move(pod)); }

bool FakeApiServer::update(const std::string& ns, const std::string& name,
                           const std::function<void(FakePod&)>& change) {
  std::optional<FakePod> p = pod(ns, name);
  if (!p) return false;
  change(*p);
  p->namespace_name = ns;
  p->name = name;
  state_->apply(*std::move(p));
  return true;
}

bool FakeApiServer::remove(const std::string& ns, const std::string& name) {
  return state_->remove(ns, name);
}

std::optional<FakePod> FakeApiServer::pod(const std::string& ns, const std::string& name) const {
  State& s = *state_;
  MutexLock l(&s.mu);
  auto it = s.pods.find(std::make_pair(ns, name));
  if (it == s.pods.end()) return std::nullopt;
  return it->second;
}

std::vector<FakePod> FakeApiServer::pods(const std::string& ns) const {
  State& s = *state_;
  MutexLock l(&s.mu);
  std::vector<FakePod> out;
  for (const auto& [key, p] : s.pods) {
    if (ns.empty() || p.namespace_name == ns) out.push_back(p);
  }
  return out;
}

uint64_t FakeApiServer::resource_version() const {
  State& s = *state_;
  MutexLock l(&s.mu);
  return s.resource_version;
}

void FakeApiServer::set_token(std::string token) {
  State& s = *state_;
  MutexLock l(&s.mu);
  s.token = std::move(token);
}

void FakeApiServer::set_bookmark_interval(std::chrono::milliseconds every) {
  State& s = *state_;
  {
    MutexLock l(&s.mu);
    s.bookmark_interval = every;
  }
  s.wake();
}

void FakeApiServer::set_gone_as_http_status(bool on) {
  State& s = *state_;
  MutexLock l(&s.mu);
  s.gone_as_http_status = on;
}

void FakeApiServer::quiet_watches() {
  state_->for_watches([](Watch& w) { w.quiet = true; });
}

void FakeApiServer::end_watches() {
  state_->for_watches([](Watch& w) { w.end = true; });
}

void FakeApiServer::compact() {
  State& s = *state_;
  MutexLock l(&s.mu);
  s.compact();
}

void FakeApiServer::expire_watches() {
  State& s = *state_;
  {
    MutexLock l(&s.mu);
    s.compact();
    for (const auto& w : s.watches) {
      const std::string& rv = w->query.resource_version;
      w->lines.push_back(s.gone_line(rv.empty() ? 0 : std::stoull(rv)));
      w->quiet = false;
      w->end = true;
      ++s.stats.gone;
    }
  }
  s.wake();
}

void FakeApiServer::go_down() {
  state_->server->close_listener(/*drop_connections=*/true);
  end_watches();
  // The listener and the connections close on the server's thread: once what was posted before
  // this has run there, the port refuses connections and can be listened on again.
  std::promise<void> done;
  net::post(state_->pool.context(0), [&done] { done.set_value(); });
  done.get_future().wait();
}

void FakeApiServer::come_up(bool compact_history) {
  if (compact_history) compact();
  if (Status s = state_->server->reopen_listener(); !s.ok()) {
    throw std::runtime_error("fake API server: reopen: " + std::string(message_of(s)));
  }
}

FakeApiServerStats FakeApiServer::stats() const {
  State& s = *state_;
  MutexLock l(&s.mu);
  return s.stats;
}

}  // namespace kvgate::testing
