// The kvgate process reading its --config file again: SIGHUP (and POST /admin/reload) apply a new
// worker list and new thresholds within a second while 200 streams run, none of them cut (the
// streams on a worker the new list drops finish there); a file that does not parse changes
// nothing and says why; a changed flag that needs a restart is named and keeps its value; keys
// rotate. systemd hears of each step (Type=notify).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "drills/harness.h"
#include "kvgate/http/client.h"
#include "support/sanitizer.h"
#include "support/wait.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;

// How soon a reload must show (the Done-when figure; scaled under a sanitizer).
const double kWithinS = 1.0 * testing_support::kSlowdown;

// A --config file in the test's temporary folder, rewritten whole as an operator's editor would
// (a new file renamed over the old).
class ConfigFile {
 public:
  ConfigFile()
      : path_(
            (std::filesystem::temp_directory_path() / ("kvgate-reload-" + std::to_string(getpid()) +
                                                       "-" + std::to_string(counter_++) + ".yaml"))
                .string()) {}
  ~ConfigFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }
  void write(const std::string& text) const {
    {
      std::ofstream out(path_ + ".tmp", std::ios::trunc);
      out << text;
    }
    std::filesystem::rename(path_ + ".tmp", path_);
  }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::string yaml_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (const auto& x : v) s += (s.size() > 1 ? ", " : "") + x;
  return s + "]";
}

struct Reply {
  unsigned status = 0;
  std::string body;
};
Reply request(uint16_t port, http::Verb method, const std::string& target,
              const std::string& body = "", const std::string& key = "") {
  http::SyncClient c("127.0.0.1", port, http::ClientOptions{.request_timeout = 5000ms});
  http::ClientRequest r{.method = method, .target = target, .body = body};
  if (!key.empty()) r.headers.emplace_back("authorization", "Bearer " + key);
  auto res = c.request(r);
  return res.ok() ? Reply{res->status, res->body} : Reply{};
}
Reply reload(uint16_t port) { return request(port, http::Verb::post, "/admin/reload"); }

// The routable workers' URLs, sorted.
std::vector<std::string> routable(const GatewayProcess& gw) {
  std::vector<std::string> out;
  for (const WorkerView& w : gw.workers()) {
    if (w.routable) out.push_back(w.url);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// How many of the candidates /debug/route compares for a request are overloaded now.
int overloaded_now(uint16_t port) {
  const Reply a = request(port, http::Verb::post, "/debug/route",
                          R"({"model":"mock-8b","prompt":"where would this go","max_tokens":4})");
  const size_t at = a.body.find("\"overloaded\":");
  return at == std::string::npos ? -1 : std::atoi(a.body.c_str() + at + 13);
}

TEST(Reload, SighupAppliesANewWorkerListAndThresholdWithinASecondAndCutsNoStream) {
  MockFleet fleet(3, {"--speedup", "2"});
  ASSERT_TRUE(fleet.ready());
  ConfigFile file;
  file.write("worker-urls: " + yaml_list({fleet.url(0), fleet.url(1)}) + "\nlog-level: warn\n");
  GatewayProcess gw({}, {"--config", file.path()});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(2, 20));
  Traffic streams({.port = gw.port(), .max_tokens = 400});
  streams.start_burst(200);
  const auto at_workers = [&] {
    uint64_t n = 0;
    for (const auto& w : gw.workers()) n += w.in_flight;
    return n;
  };
  ASSERT_TRUE(testing::wait_until([&] { return at_workers() + streams.records().size() >= 200; },
                                  30s, 50ms));
  EXPECT_EQ(overloaded_now(gw.port()), 0);

  // Worker 0 leaves, worker 2 joins; a worker with 10 requests in flight is overloaded now.
  file.write("worker-urls: " + yaml_list({fleet.url(1), fleet.url(2)}) +
             "\nlog-level: warn\nworker-overload-in-flight: 10\n");
  const uint64_t in_flight_at_signal = at_workers();
  const double signal_at = now_s();
  ASSERT_TRUE(gw.process().signal(SIGHUP));
  std::vector<std::string> want = {fleet.url(1), fleet.url(2)};
  std::sort(want.begin(), want.end());
  const bool applied = testing::wait_until(
      [&] { return routable(gw) == want && overloaded_now(gw.port()) >= 1; }, 30s, 10ms);
  const double took = now_s() - signal_at;
  ASSERT_TRUE(applied) << gw.process().errors();
  std::cout << "reload applied " << took * 1000 << " ms after SIGHUP, " << in_flight_at_signal
            << " streams in flight\n";
  EXPECT_LE(took, kWithinS);
  EXPECT_GE(in_flight_at_signal, 100u) << "the streams were in flight at the signal";

  streams.stop(120);
  const TrafficSummary s = summarize(streams.records());
  EXPECT_EQ(s.total, 200u);
  EXPECT_EQ(s.ok, 200u) << s.describe();
  EXPECT_EQ(gw.metric_sum("kvgate_config_reloads_total", "result=\"applied\""), 1);
  EXPECT_EQ(gw.metric_sum("kvgate_config_last_reload_success"), 1);
}

TEST(Reload, ABrokenFileChangesNothingAndSaysWhy) {
  MockFleet fleet(2, {});
  ASSERT_TRUE(fleet.ready());
  ConfigFile file;
  file.write("worker-urls: [" + fleet.url(0) + "]\n");
  GatewayProcess gw({}, {"--config", file.path()});
  ASSERT_TRUE(gw.ready());
  ASSERT_TRUE(gw.wait_routable(1, 20));

  file.write("worker-urls: [" + fleet.url(0) + ", " + fleet.url(1) + "\n");  // unclosed
  ASSERT_TRUE(gw.process().signal(SIGHUP));
  ASSERT_TRUE(testing::wait_until(
      [&] { return gw.metric_sum("kvgate_config_reloads_total", "refused") == 1; }, 10s));
  EXPECT_EQ(gw.metric_sum("kvgate_config_last_reload_success"), 0);
  EXPECT_EQ(routable(gw), std::vector<std::string>{fleet.url(0)});
  ASSERT_TRUE(testing::wait_until(
      [&] { return gw.process().errors().find("reload refused") != std::string::npos; }, 10s));
  EXPECT_NE(gw.process().errors().find(file.path()), std::string::npos) << gw.process().errors();
  EXPECT_NE(gw.process().errors().find("line 2"), std::string::npos) << gw.process().errors();

  // A key kvgate has no flag for, through the admin route: 400 naming it.
  file.write("worker-urls: [" + fleet.url(1) + "]\nbalance-threshold: 3\n");
  Reply a = reload(gw.port());
  EXPECT_EQ(a.status, 400u) << a.body;
  EXPECT_NE(a.body.find("'balance-threshold' is not a kvgate flag"), std::string::npos) << a.body;
  EXPECT_EQ(routable(gw), std::vector<std::string>{fleet.url(0)});

  // Fixed: it applies, and a changed listener waits for a restart, named.
  file.write("worker-urls: [" + fleet.url(1) + "]\nmax-concurrent-requests: 7\n");
  a = reload(gw.port());
  EXPECT_EQ(a.status, 200u) << a.body;
  EXPECT_NE(a.body.find(R"("applied":["worker-urls"])"), std::string::npos) << a.body;
  EXPECT_NE(a.body.find(R"("needs_restart":["max-concurrent-requests"])"), std::string::npos)
      << a.body;
  EXPECT_TRUE(testing::wait_until(
      [&] { return routable(gw) == std::vector<std::string>{fleet.url(1)}; }, 10s));
  EXPECT_EQ(gw.metric_sum("kvgate_config_restart_pending_flags"), 1);
}

TEST(Reload, KeysRotateAndTurningThemOnWaitsForARestart) {
  MockFleet fleet(1, {});
  ASSERT_TRUE(fleet.ready());
  ConfigFile file;
  file.write("worker-urls: [" + fleet.url(0) + "]\napi-key: first-key\n");
  GatewayProcess gw({}, {"--config", file.path()});
  ASSERT_TRUE(gw.ready());
  // (GET /workers needs the key too: the worker is routable when a completion passes.)
  const std::string body = R"({"model":"mock-8b","prompt":"hello","max_tokens":2})";
  ASSERT_TRUE(testing::wait_until([&] {
    return request(gw.port(), http::Verb::post, "/v1/completions", body, "first-key").status == 200;
  }));

  file.write("worker-urls: [" + fleet.url(0) + "]\napi-key: second-key\n");
  Reply a = reload(gw.port());
  ASSERT_EQ(a.status, 200u) << a.body;
  EXPECT_NE(a.body.find(R"("applied":["api-key"])"), std::string::npos) << a.body;
  EXPECT_EQ(request(gw.port(), http::Verb::post, "/v1/completions", body, "first-key").status,
            401u);
  EXPECT_EQ(request(gw.port(), http::Verb::post, "/v1/completions", body, "second-key").status,
            200u);

  // Without a key, clients' Authorization headers would reach the engines: not while serving.
  file.write("worker-urls: [" + fleet.url(0) + "]\n");
  a = reload(gw.port());
  ASSERT_EQ(a.status, 200u) << a.body;
  EXPECT_NE(a.body.find(R"("needs_restart":["api-key"])"), std::string::npos) << a.body;
  EXPECT_EQ(request(gw.port(), http::Verb::post, "/v1/completions", body).status, 401u);
}

// What systemd's NOTIFY_SOCKET receives: a datagram socket of the test's, bound to a path.
class NotifySocket {
 public:
  NotifySocket()
      : path_((std::filesystem::temp_directory_path() /
               ("kvgate-notify-" + std::to_string(getpid()) + ".sock"))
                  .string()) {
    std::filesystem::remove(path_);
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
    std::filesystem::remove(path_);
  }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }
  // The next message that contains `what` (those before it are skipped); "" at the timeout.
  std::string next_with(const std::string& what, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      std::string message(buf, static_cast<size_t>(n));
      if (message.find(what) != std::string::npos) return message;
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(Reload, SystemdHearsReadyReloadingAndStopping) {
  MockFleet fleet(1, {});
  ASSERT_TRUE(fleet.ready());
  NotifySocket notify;
  ASSERT_TRUE(notify.bound()) << notify.path();
  ConfigFile file;
  file.write("worker-urls: [" + fleet.url(0) + "]\n");
  setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
  GatewayProcess gw({}, {"--config", file.path()});
  unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(gw.ready());
  const auto wait =
      std::chrono::milliseconds(static_cast<int64_t>(10'000 * testing_support::kSlowdown));
  const std::string ready = notify.next_with("READY=1", wait);
  EXPECT_NE(ready.find("STATUS=serving on port " + std::to_string(gw.port())), std::string::npos)
      << ready;
  ASSERT_TRUE(gw.process().signal(SIGHUP));
  const std::string reloading = notify.next_with("RELOADING=1", wait);
  EXPECT_NE(reloading.find("MONOTONIC_USEC="), std::string::npos) << reloading;
  EXPECT_NE(notify.next_with("READY=1", wait), "") << "ready again after the reload";
  // A refused reload is ready too (the old configuration serves), and says why in the status.
  file.write("worker-urls: [\n");
  ASSERT_TRUE(gw.process().signal(SIGHUP));
  EXPECT_NE(notify.next_with("last reload refused", wait), "");
  ASSERT_TRUE(gw.process().signal(SIGTERM));
  EXPECT_NE(notify.next_with("STOPPING=1", wait), "");
  EXPECT_EQ(gw.process().wait(30s), std::optional<int>(0));
}

}  // namespace
}  // namespace kvgate::drills
