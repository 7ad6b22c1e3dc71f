#include "kvgate/kube/pod_watcher.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <utility>

#include "boost/asio/buffer.hpp"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kube/pod_json.h"
#include "kube/pod_set.h"
#include "kube/requests.h"
#include "kube/token_source.h"
#include "kvgate/core/log.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/client.h"

namespace kvgate::kube {
namespace net = boost::asio;

namespace {

const std::shared_ptr<spdlog::logger>& kube_log() {
  static const auto l = log::get("kube");
  return l;
}

constexpr size_t kListBodyLimit = size_t{256} << 20;
constexpr size_t kMaxLineBytes = size_t{16} << 20;
constexpr int kLogEveryMs = 5000;

// The server's certificate checked against the ApiServer's roots (its PEM text, its file, or
// the system's), or not at all when it is insecure.
Result<std::shared_ptr<net::ssl::context>> client_tls(const ApiServer& server) {
  if (!server.insecure && server.ca_data.empty()) return http::make_client_tls(server.ca_file);
  auto ctx = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                   net::ssl::context::no_tlsv1_1);
  if (server.insecure) {
    ctx->set_verify_mode(net::ssl::verify_none);
    return ctx;
  }
  boost::system::error_code ec;
  ctx->add_certificate_authority(net::buffer(server.ca_data), ec);
  if (ec) {
    return absl::InvalidArgumentError("cannot load the API server's certificate-authority-data: " +
                                      ec.message());
  }
  ctx->set_verify_mode(net::ssl::verify_peer);
  return ctx;
}

}  // namespace

class PodWatcher::Impl {
 public:
  Impl(net::io_context& ctx, WatcherOptions options, Handler handler)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        selector_text_(options_.selector.text()),
        backoff_timer_(ctx),
        token_(options_.server.token_file, options_.server.token),
        backoff_(options_.backoff_min, options_.backoff_max, std::random_device{}()) {}

  static net::awaitable<void> run(std::shared_ptr<Impl> self);

  // From the control thread: the watcher ends at its next step, and cut() (posted to the
  // io_context) ends the step it is waiting in.
  void request_stop() { stopping_.store(true); }
  void cut() {
    if (conn_) conn_->close();
    backoff_timer_.cancel();
  }
  // Waits for run() to end while `ctx` runs.
  void wait_done(net::io_context& ctx) KVGATE_EXCLUDES(mu_);

  WatcherStats stats() const KVGATE_EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return stats_;
  }

 private:
  enum class Outcome { kOk, kEnded, kGone, kQuiet, kFailed };
  enum class Failure { kUnauthorized, kHttp, kTransport };

  net::awaitable<Outcome> cycle(bool* need_list);
  net::awaitable<Status> connect();
  net::awaitable<Outcome> list();
  net::awaitable<Outcome> watch();
  net::awaitable<void> back_off();
  Outcome take(std::string_view piece);
  Outcome apply_line(const char* data, size_t size, bool* changed);
  bool apply_pod();
  Outcome check_status(unsigned status, std::string_view what);
  Result<http::ClientRequest> request(std::string target);
  Outcome fail(Failure kind, std::string what) KVGATE_EXCLUDES(mu_);
  void deliver();
  void finish() KVGATE_EXCLUDES(mu_);
  template <class F>
  void count(F f) KVGATE_EXCLUDES(mu_) {
    MutexLock l(&mu_);
    f(stats_);
  }

  // Set at construction.
  const WatcherOptions options_;
  const Handler handler_;
  const std::string selector_text_;

  // The io_context's thread only.
  net::steady_timer backoff_timer_;
  std::unique_ptr<http::Connection> conn_;
  bool connected_once_ = false;
  std::shared_ptr<net::ssl::context> tls_;
  detail::TokenSource token_;
  detail::Backoff backoff_;
  int gone_streak_ = 0;  // 410s with nothing applied between them
  detail::PodSet pods_;
  std::string resource_version_;
  simdjson::dom::parser parser_;
  std::string pending_;  // a watch's bytes not yet a whole line, with simdjson's padding room
  detail::WatchEvent event_;

  // Any thread.
  std::atomic<bool> stopping_{false};
  mutable Mutex mu_;
  CondVar done_cv_;
  bool done_ KVGATE_GUARDED_BY(mu_) = false;
  WatcherStats stats_ KVGATE_GUARDED_BY(mu_);
};

net::awaitable<void> PodWatcher::Impl::run(std::shared_ptr<Impl> self) {
  bool need_list = true;
  while (!self->stopping_.load()) {
    const Outcome o = co_await self->cycle(&need_list);
    if (self->stopping_.load()) break;
    if (o == Outcome::kEnded) continue;  // the server ended the watch: watch again at once
    self->conn_.reset();                 // mid-body or broken: not for another request
    if (o == Outcome::kGone) {
      need_list = true;
      self->count([](WatcherStats& s) { ++s.relists_gone; });
      // A server that answers 410 to every watch right after a list is not made to list in a loop.
      if (++self->gone_streak_ > 1) co_await self->back_off();
    } else if (o == Outcome::kFailed) {
      co_await self->back_off();
    }
  }
  self->finish();
}

net::awaitable<PodWatcher::Impl::Outcome> PodWatcher::Impl::cycle(bool* need_list) {
  if (!conn_ || !conn_->idle_and_open()) {
    conn_.reset();
    if (Status s = co_await connect(); !s.ok()) {
      co_return fail(Failure::kTransport,
                     "connect to the API server: " + std::string(message_of(s)));
    }
    if (stopping_.load()) co_return Outcome::kEnded;
  }
  if (*need_list) {
    const Outcome o = co_await list();
    if (o != Outcome::kOk) co_return o;
    *need_list = false;
  }
  co_return co_await watch();
}

net::awaitable<Status> PodWatcher::Impl::connect() {
  if (!tls_) {
    Result<std::shared_ptr<net::ssl::context>> tls = client_tls(options_.server);
    if (!tls.ok()) co_return tls.status();
    tls_ = *std::move(tls);
  }
  http::ClientOptions co;
  co.tls = tls_;
  co.connect_timeout = options_.connect_timeout;
  co.request_timeout = options_.list_timeout;
  co.idle_timeout = options_.quiet_timeout;
  co.body_limit = kListBodyLimit;
  const std::string& host = options_.server.host;
  auto conn = co_await http::Connection::connect(host, options_.server.port, co);
  if (!conn.ok()) co_return conn.status();
  if (std::exchange(connected_once_, true)) count([](WatcherStats& s) { ++s.reconnects; });
  conn_ = *std::move(conn);
  co_return Status();
}

net::awaitable<PodWatcher::Impl::Outcome> PodWatcher::Impl::list() {
  Result<http::ClientRequest> req =
      request(detail::list_target(options_.namespace_name, selector_text_));
  if (!req.ok()) co_return fail(Failure::kUnauthorized, std::string(message_of(req.status())));
  const http::ClientRequest& r = *req;
  Result<http::ClientResponse> res = co_await conn_->send(r);
  if (stopping_.load()) co_return Outcome::kEnded;
  if (!res.ok()) {
    co_return fail(Failure::kTransport, "list pods: " + std::string(message_of(res.status())));
  }
  if (res->status == 410) co_return fail(Failure::kHttp, "list pods: HTTP 410");
  if (const Outcome o = check_status(res->status, "list pods"); o != Outcome::kOk) co_return o;
  Result<detail::PodList> answer = detail::parse_pod_list(parser_, res->body);
  if (!answer.ok()) {
    co_return fail(Failure::kHttp, "list pods: " + std::string(message_of(answer.status())));
  }
  std::vector<Pod>& pods = answer->pods;
  pods.erase(std::remove_if(pods.begin(), pods.end(),
                            [&](const Pod& p) { return !options_.selector.matches(p.labels); }),
             pods.end());
  pods_.replace(std::move(pods));
  resource_version_ = std::move(answer->resource_version);
  count([](WatcherStats& s) { ++s.lists; });
  backoff_.reset();
  deliver();
  co_return Outcome::kOk;
}

net::awaitable<PodWatcher::Impl::Outcome> PodWatcher::Impl::watch() {
  Result<http::ClientRequest> req = request(detail::watch_target(
      options_.namespace_name, selector_text_, resource_version_, options_.watch_timeout));
  if (!req.ok()) co_return fail(Failure::kUnauthorized, std::string(message_of(req.status())));
  const http::ClientRequest& r = *req;
  Result<http::ClientResponse> head = co_await conn_->start_streaming(r, options_.quiet_timeout);
  if (!head.ok()) {
    if (stopping_.load()) co_return Outcome::kEnded;
    co_return fail(Failure::kTransport, "watch pods: " + std::string(message_of(head.status())));
  }
  if (head->status == 410) co_return Outcome::kGone;
  if (const Outcome o = check_status(head->status, "watch pods"); o != Outcome::kOk) co_return o;
  count([](WatcherStats& s) {
    ++s.watches;
    s.connected = true;
  });
  pending_.clear();
  for (;;) {
    Result<std::string_view> piece = co_await conn_->next_piece(options_.quiet_timeout);
    if (stopping_.load()) co_return Outcome::kEnded;
    if (!piece.ok() && absl::IsDeadlineExceeded(piece.status())) {
      KVGATE_LOG_EVERY_MS(kube_log(), spdlog::level::info, kLogEveryMs,
                          "pod watcher: no byte from the watch for {} ms: renewing it",
                          options_.quiet_timeout.count());
      count([](WatcherStats& s) {
        ++s.quiet_renewals;
        s.connected = false;
      });
      co_return Outcome::kQuiet;
    }
    if (!piece.ok()) {
      co_return fail(Failure::kTransport, "watch pods: " + std::string(message_of(piece.status())));
    }
    if (piece->empty()) {
      count([](WatcherStats& s) { s.connected = false; });
      co_return Outcome::kEnded;
    }
    if (const Outcome o = take(*piece); o != Outcome::kOk) co_return o;
  }
}

net::awaitable<void> PodWatcher::Impl::back_off() {
  backoff_timer_.expires_after(backoff_.next());
  boost::system::error_code ec;
  co_await backoff_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
}

PodWatcher::Impl::Outcome PodWatcher::Impl::take(std::string_view piece) {
  // Every line is parsed where it lies, and simdjson reads up to SIMDJSON_PADDING bytes past it.
  const size_t need = pending_.size() + piece.size() + simdjson::SIMDJSON_PADDING;
  if (pending_.capacity() < need) pending_.reserve(std::max(need, 2 * pending_.capacity()));
  pending_.append(piece);
  size_t start = 0;
  bool changed = false;
  Outcome out = Outcome::kOk;
  for (size_t nl; out == Outcome::kOk && (nl = pending_.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    out = apply_line(pending_.data() + start, nl - start, &changed);
  }
  if (changed) deliver();
  if (out != Outcome::kOk) return out;
  pending_.erase(0, start);
  if (pending_.size() > kMaxLineBytes) {
    return fail(Failure::kHttp, "watch pods: an event line longer than 16 MiB");
  }
  return Outcome::kOk;
}

PodWatcher::Impl::Outcome PodWatcher::Impl::apply_line(const char* data, size_t size,
                                                       bool* changed) {
  if (std::all_of(data, data + size, [](char c) { return c == ' ' || c == '\r' || c == '\t'; })) {
    return Outcome::kOk;
  }
  if (Status s = detail::parse_watch_event(parser_, data, size, &event_); !s.ok()) {
    count([](WatcherStats& st) { ++st.bad_events; });
    KVGATE_LOG_EVERY_MS(kube_log(), spdlog::level::warn, kLogEveryMs,
                        "pod watcher: skipped a watch event: {}", message_of(s));
    return Outcome::kOk;
  }
  using Type = detail::WatchEvent::Type;
  if (event_.type == Type::kError) {
    if (event_.code == 410) {
      KVGATE_LOG_EVERY_MS(kube_log(), spdlog::level::info, kLogEveryMs,
                          "pod watcher: resourceVersion {} expired ({}): listing again",
                          resource_version_, event_.message);
      return Outcome::kGone;
    }
    return fail(Failure::kHttp,
                "watch pods: ERROR event " + std::to_string(event_.code) + " " + event_.message);
  }
  gone_streak_ = 0;
  if (event_.type == Type::kBookmark) {
    count([](WatcherStats& s) { ++s.bookmarks; });
  } else {
    *changed |= event_.type == Type::kDeleted
                    ? pods_.erase(event_.pod.namespace_name, event_.pod.name)
                    : apply_pod();
    count([](WatcherStats& s) { ++s.events; });
  }
  if (!event_.resource_version.empty()) resource_version_ = event_.resource_version;
  return Outcome::kOk;
}

// ADDED or MODIFIED: held while it matches the selector (the server sends a pod whose labels
// stopped matching as DELETED, but the watcher does not depend on it).
bool PodWatcher::Impl::apply_pod() {
  if (!options_.selector.matches(event_.pod.labels)) {
    return pods_.erase(event_.pod.namespace_name, event_.pod.name);
  }
  pods_.upsert(std::move(event_.pod));
  return true;
}

PodWatcher::Impl::Outcome PodWatcher::Impl::check_status(unsigned status, std::string_view what) {
  if (status == 200) return Outcome::kOk;
  const std::string text = std::string(what) + ": HTTP " + std::to_string(status);
  if (status == 401 || status == 403) {
    if (status == 401) token_.invalidate();
    const std::string from =
        token_.file().empty() ? "the configured token" : "the token in " + token_.file();
    return fail(Failure::kUnauthorized, text + " (" + from + ")");
  }
  return fail(Failure::kHttp, text);
}

Result<http::ClientRequest> PodWatcher::Impl::request(std::string target) {
  Result<std::string_view> token = token_.get();
  count([reloads = token_.reloads()](WatcherStats& s) { s.token_reloads = reloads; });
  if (!token.ok()) return token.status();
  http::ClientRequest r;
  r.method = http::Verb::get;
  r.target = std::move(target);
  r.headers.emplace_back("Authorization", "Bearer " + std::string(*token));
  r.headers.emplace_back("Accept", "application/json");
  return r;
}

PodWatcher::Impl::Outcome PodWatcher::Impl::fail(Failure kind, std::string what) {
  KVGATE_LOG_EVERY_MS(kube_log(), spdlog::level::warn, kLogEveryMs, "pod watcher: {}", what);
  MutexLock l(&mu_);
  switch (kind) {
    case Failure::kUnauthorized:
      ++stats_.unauthorized;
      break;
    case Failure::kHttp:
      ++stats_.http_errors;
      break;
    case Failure::kTransport:
      ++stats_.transport_errors;
      break;
  }
  stats_.connected = false;
  stats_.last_error = std::move(what);
  return Outcome::kFailed;
}

void PodWatcher::Impl::deliver() {
  if (!stopping_.load()) handler_(pods_.pods());
}

void PodWatcher::Impl::finish() {
  conn_.reset();
  MutexLock l(&mu_);
  stats_.connected = false;
  done_ = true;
  done_cv_.notify_all();
}

void PodWatcher::Impl::wait_done(net::io_context& ctx) {
  MutexLock l(&mu_);
  while (!done_ && !ctx.stopped()) done_cv_.wait_for(&mu_, std::chrono::milliseconds(20));
}

PodWatcher::PodWatcher(net::io_context& ctx, WatcherOptions options, Handler handler)
    : ctx_(ctx), impl_(std::make_shared<Impl>(ctx, std::move(options), std::move(handler))) {}

PodWatcher::~PodWatcher() { stop(); }

void PodWatcher::start() {
  if (started_) return;
  started_ = true;
  net::co_spawn(ctx_, Impl::run(impl_), net::detached);
}

void PodWatcher::stop() {
  if (!started_) return;
  impl_->request_stop();
  net::post(ctx_, [impl = impl_] { impl->cut(); });
  impl_->wait_done(ctx_);
}

WatcherStats PodWatcher::stats() const { return impl_->stats(); }

}  // namespace kvgate::kube
