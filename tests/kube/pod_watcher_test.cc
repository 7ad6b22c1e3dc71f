// The pod watcher against the fake API server: fleets scaling, rolling and flapping, the server
// restarting, its history expiring, a watch gone quiet, a rotated token, selectors. Every change
// the fake makes must reach the handler within a second (scaled under a sanitizer).
#include "kvgate/kube/pod_watcher.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "gtest/gtest.h"
#include "kube/support/fake_apiserver.h"
#include "kube/support/temp_dir.h"
#include "kvgate/core/thread_annotations.h"
#include "support/sanitizer.h"
#include "support/test_certs.h"
#include "support/wait.h"

namespace kvgate::kube {
namespace {

using kvgate::testing::FakeApiServer;
using kvgate::testing::FakeApiServerOptions;
using kvgate::testing::FakePod;
using kvgate::testing::TempDir;

// How soon a change must reach the handler.
const std::chrono::milliseconds kWithin(static_cast<int64_t>(1000 *
                                                             kvgate::testing_support::kSlowdown));

FakePod engine(std::string name, std::string role = "decode", std::string ns = "fleet") {
  FakePod p;
  p.name = std::move(name);
  p.namespace_name = std::move(ns);
  p.labels = {{"app", "engine"}, {"role", std::move(role)}};
  p.ip = "10.0.0." + std::to_string(std::hash<std::string>()(p.name) % 250 + 1);
  return p;
}

// What the handler last got, and what the tests compare: "name" for a serving pod, "name-" for
// one held but not serving; sorted.
using View = std::vector<std::string>;

View view_of(const std::vector<Pod>& pods) {
  View out;
  for (const Pod& p : pods) out.push_back(p.name + (p.serving() ? "" : "-"));
  std::sort(out.begin(), out.end());
  return out;
}

// One watcher on its own io_context thread, recording what its handler gets.
class Watching {
 public:
  explicit Watching(WatcherOptions options) : guard_(ctx_.get_executor()) {
    thread_ = std::thread([this] { ctx_.run(); });
    watcher_ = std::make_unique<PodWatcher>(ctx_, std::move(options),
                                            [this](const std::vector<Pod>& pods) { record(pods); });
    watcher_->start();
  }
  ~Watching() {
    watcher_.reset();
    guard_.reset();
    thread_.join();
  }

  void stop() { watcher_->stop(); }
  WatcherStats stats() const { return watcher_->stats(); }
  View view() const {
    MutexLock l(&mu_);
    return view_;
  }
  uint64_t deliveries() const {
    MutexLock l(&mu_);
    return deliveries_;
  }
  // The fewest serving pods any delivery after the first full one showed.
  size_t min_serving_since(uint64_t delivery) const {
    MutexLock l(&mu_);
    size_t least = SIZE_MAX;
    for (size_t i = delivery; i < serving_counts_.size(); ++i)
      least = std::min(least, serving_counts_[i]);
    return least;
  }
  bool wait_for(const View& want, std::chrono::milliseconds within = kWithin) const {
    return kvgate::testing::wait_until([&] { return view() == want; }, within);
  }
  // Until the `n`-th watch is open (the fake registers a watch before it answers it).
  bool wait_watching(uint64_t n = 1) const {
    return kvgate::testing::wait_until(
        [&] {
          const WatcherStats s = stats();
          return s.watches >= n && s.connected;
        },
        kWithin);
  }

 private:
  void record(const std::vector<Pod>& pods) {
    View v = view_of(pods);
    const size_t serving = static_cast<size_t>(
        std::count_if(pods.begin(), pods.end(), [](const Pod& p) { return p.serving(); }));
    MutexLock l(&mu_);
    view_ = std::move(v);
    serving_counts_.push_back(serving);
    ++deliveries_;
  }

  boost::asio::io_context ctx_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
  std::unique_ptr<PodWatcher> watcher_;
  mutable Mutex mu_;
  View view_ KVGATE_GUARDED_BY(mu_);
  std::vector<size_t> serving_counts_ KVGATE_GUARDED_BY(mu_);
  uint64_t deliveries_ KVGATE_GUARDED_BY(mu_) = 0;
};

class PodWatcherTest : public ::testing::Test {
 protected:
  explicit PodWatcherTest(FakeApiServerOptions fake = {}) : fake_(std::move(fake)) {}

  WatcherOptions options(std::string_view selector = "app=engine") {
    WatcherOptions o;
    o.server.host = "127.0.0.1";
    o.server.port = fake_.port();
    o.server.ca_file = fake_.ca_file();
    o.server.token_file = dir_.write("token", fake_.token() + "\n");
    o.namespace_name = "fleet";
    Result<Selector> s = Selector::parse(selector);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) o.selector = *s;
    o.backoff_min = std::chrono::milliseconds(20);
    o.backoff_max = std::chrono::milliseconds(200);
    return o;
  }

  // What the fake holds that `selector` picks in the namespace, as the watcher should see it.
  View expected(std::string_view selector = "app=engine", const std::string& ns = "fleet") {
    const Selector s = *Selector::parse(selector);
    View out;
    for (const FakePod& p : fake_.pods(ns)) {
      if (!s.matches(p.labels)) continue;
      const bool serving = p.phase == "Running" && p.ready && !p.ip.empty() && !p.deleting;
      out.push_back(p.name + (serving ? "" : "-"));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void expect_caught_up(const Watching& w, std::string_view selector = "app=engine",
                        const char* when = "") {
    const View want = expected(selector);
    EXPECT_TRUE(w.wait_for(want)) << when << ": the handler holds "
                                  << ::testing::PrintToString(w.view()) << ", the server "
                                  << ::testing::PrintToString(want);
  }

  void set_ready(const std::string& name, bool ready) {
    ASSERT_TRUE(fake_.update("fleet", name, [&](FakePod& p) { p.ready = ready; }));
  }

  FakeApiServer fake_;
  TempDir dir_;
};

TEST_F(PodWatcherTest, ListsThenFollowsScalingUpAndDown) {
  for (int i = 0; i < 3; ++i) fake_.apply(engine("engine-" + std::to_string(i)));
  Watching w(options());
  expect_caught_up(w, "app=engine", "the first list");
  for (int i = 3; i < 6; ++i) {
    FakePod p = engine("engine-" + std::to_string(i));
    p.phase = "Pending";
    p.ready = false;
    p.ip.clear();
    fake_.apply(p);
    expect_caught_up(w, "app=engine", "a pod scheduled");
    p.phase = "Running";
    p.ip = "10.0.1." + std::to_string(i);
    fake_.apply(p);
    expect_caught_up(w, "app=engine", "a pod running, not ready");
    set_ready(p.name, true);
    expect_caught_up(w, "app=engine", "a pod ready");
  }
  EXPECT_EQ(w.view().size(), 6u);
  for (int i = 5; i >= 1; --i) {
    ASSERT_TRUE(fake_.remove("fleet", "engine-" + std::to_string(i)));
    expect_caught_up(w, "app=engine", "a pod deleted");
  }
  EXPECT_EQ(w.view(), View{"engine-0"});
  const WatcherStats s = w.stats();
  EXPECT_EQ(s.lists, 1u);
  EXPECT_GE(s.events, 14u);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.reconnects, 0u);
}

TEST_F(PodWatcherTest, ARollingUpdateNeverLeavesFewerServingPods) {
  for (int i = 0; i < 3; ++i) fake_.apply(engine("v1-" + std::to_string(i)));
  Watching w(options());
  expect_caught_up(w);
  const uint64_t from = w.deliveries();
  for (int i = 0; i < 3; ++i) {
    FakePod next = engine("v2-" + std::to_string(i));
    next.ready = false;
    fake_.apply(next);
    expect_caught_up(w, "app=engine", "the new pod started");
    set_ready(next.name, true);
    expect_caught_up(w, "app=engine", "the new pod ready");
    const std::string old = "v1-" + std::to_string(i);
    ASSERT_TRUE(fake_.update("fleet", old, [](FakePod& p) { p.deleting = true; }));
    expect_caught_up(w, "app=engine", "the old pod terminating");
    ASSERT_TRUE(fake_.remove("fleet", old));
    expect_caught_up(w, "app=engine", "the old pod gone");
  }
  EXPECT_EQ(w.view(), (View{"v2-0", "v2-1", "v2-2"}));
  EXPECT_GE(w.min_serving_since(from), 3u) << "every new pod was ready before an old one left";
}

TEST_F(PodWatcherTest, APodFlappingReadyIsFollowedEachTime) {
  fake_.apply(engine("steady"));
  fake_.apply(engine("flappy"));
  Watching w(options());
  expect_caught_up(w);
  for (int i = 0; i < 10; ++i) {
    set_ready("flappy", i % 2 == 1);
    const View want = i % 2 == 1 ? View{"flappy", "steady"} : View{"flappy-", "steady"};
    EXPECT_TRUE(w.wait_for(want)) << "flap " << i << ": " << ::testing::PrintToString(w.view());
  }
}

TEST_F(PodWatcherTest, AServerRestartLosesNoChange) {
  for (int i = 0; i < 4; ++i) fake_.apply(engine("engine-" + std::to_string(i)));
  Watching w(options());
  expect_caught_up(w);
  // The watch is open before the server goes: one still on its way could be served as it goes
  // down, and the changes below would reach it without a reconnect.
  ASSERT_TRUE(w.wait_watching());
  fake_.go_down();
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return !w.stats().connected; }, kWithin * 5));
  // Changes while the watcher cannot reach the server reach it once it is back.
  ASSERT_TRUE(fake_.remove("fleet", "engine-1"));
  fake_.apply(engine("engine-9"));
  set_ready("engine-2", false);
  fake_.come_up(/*compact_history=*/false);
  expect_caught_up(w, "app=engine", "after the restart");
  const WatcherStats s = w.stats();
  EXPECT_GE(s.reconnects, 1u);
  EXPECT_EQ(s.relists_gone, 0u) << "the history reached back: the watch resumed";
  EXPECT_EQ(s.lists, 1u);
  EXPECT_GE(s.transport_errors, 1u);
  EXPECT_FALSE(s.last_error.empty());
  fake_.apply(engine("engine-10"));
  expect_caught_up(w, "app=engine", "a change after the restart");
}

TEST_F(PodWatcherTest, ARestartWithCompactedHistoryListsAgain) {
  for (int i = 0; i < 4; ++i) fake_.apply(engine("engine-" + std::to_string(i)));
  Watching w(options());
  expect_caught_up(w);
  ASSERT_TRUE(w.wait_watching());  // as above: the watch is open before the server goes
  fake_.go_down();
  ASSERT_TRUE(fake_.remove("fleet", "engine-0"));  // a deletion the history no longer holds
  fake_.apply(engine("engine-5"));
  fake_.come_up(/*compact_history=*/true);
  expect_caught_up(w, "app=engine", "after the restart");
  EXPECT_GE(w.stats().relists_gone, 1u);
  EXPECT_EQ(w.stats().lists, 2u);
}

TEST_F(PodWatcherTest, AnExpiredWatchListsAgainAndLosesNothing) {
  for (int i = 0; i < 3; ++i) fake_.apply(engine("engine-" + std::to_string(i)));
  Watching w(options());
  expect_caught_up(w);
  ASSERT_TRUE(w.wait_watching());
  fake_.expire_watches();
  fake_.apply(engine("engine-7"));
  ASSERT_TRUE(fake_.remove("fleet", "engine-1"));
  expect_caught_up(w, "app=engine", "after the expiry");
  EXPECT_TRUE(kvgate::testing::wait_until([&] { return w.stats().relists_gone >= 1; }, kWithin));
  EXPECT_GE(fake_.stats().gone, 1u);
}

class GoneAsStatusTest : public PodWatcherTest {
 protected:
  GoneAsStatusTest() : PodWatcherTest(FakeApiServerOptions{.gone_as_http_status = true}) {}
};

TEST_F(GoneAsStatusTest, A410StatusListsAgain) {
  fake_.apply(engine("engine-0"));
  Watching w(options());
  expect_caught_up(w);
  ASSERT_TRUE(w.wait_watching());
  // A change the watch does not select moves the version on; then the history is compacted, and
  // the next watch asks from a version it no longer holds.
  fake_.apply(engine("elsewhere", "decode", "other-namespace"));
  fake_.compact();
  fake_.end_watches();
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return fake_.stats().gone >= 1; }, kWithin));
  fake_.apply(engine("engine-1"));
  expect_caught_up(w, "app=engine", "after the 410");
  EXPECT_GE(w.stats().relists_gone, 1u);
  EXPECT_EQ(w.stats().http_errors, 0u);
}

TEST_F(PodWatcherTest, AQuietWatchIsRenewed) {
  fake_.apply(engine("engine-0"));
  WatcherOptions o = options();
  o.quiet_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(300 * kvgate::testing_support::kSlowdown));
  Watching w(std::move(o));
  expect_caught_up(w);
  ASSERT_TRUE(w.wait_watching());
  fake_.quiet_watches();  // the open watch now sends nothing, as a half-open connection would
  fake_.apply(engine("engine-1"));
  expect_caught_up(w, "app=engine", "after the renewal");
  EXPECT_GE(w.stats().quiet_renewals, 1u);
  EXPECT_EQ(w.stats().lists, 1u) << "renewed from the last resourceVersion, not listed again";
}

TEST_F(PodWatcherTest, BookmarksKeepAnIdleWatchOpen) {
  fake_.set_bookmark_interval(std::chrono::milliseconds(50));
  fake_.apply(engine("engine-0"));
  WatcherOptions o = options();
  o.quiet_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(400 * kvgate::testing_support::kSlowdown));
  Watching w(std::move(o));
  expect_caught_up(w);
  // Three quiet timeouts' worth of bookmarks and no other byte.
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return w.stats().bookmarks >= 30; }, kWithin * 10));
  EXPECT_EQ(w.stats().quiet_renewals, 0u);
  EXPECT_EQ(w.stats().watches, 1u);
  fake_.apply(engine("engine-1"));
  expect_caught_up(w);
}

TEST_F(PodWatcherTest, AWatchTheServerEndsIsMadeAgain) {
  fake_.apply(engine("engine-0"));
  WatcherOptions o = options();
  o.watch_timeout = std::chrono::seconds(1);
  Watching w(std::move(o));
  expect_caught_up(w);
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return w.stats().watches >= 2; }, kWithin * 5));
  fake_.apply(engine("engine-1"));
  expect_caught_up(w, "app=engine", "on the next watch");
  EXPECT_EQ(w.stats().reconnects, 0u) << "the connection is kept between watches";
  EXPECT_EQ(w.stats().lists, 1u);
}

TEST_F(PodWatcherTest, ARotatedTokenFileIsReadAgain) {
  fake_.apply(engine("engine-0"));
  WatcherOptions o = options();
  Watching w(o);
  expect_caught_up(w);
  ASSERT_TRUE(w.wait_watching());
  // The kubelet writes the new token before the old one expires.
  dir_.write("token", "second-token\n");
  fake_.set_token("second-token");
  fake_.end_watches();
  // The next watch (with the new token) is open before the next change: a change made at once
  // could still leave on the ending watch, before the watcher read the file.
  ASSERT_TRUE(w.wait_watching(2));
  fake_.apply(engine("engine-1"));
  expect_caught_up(w, "app=engine", "with the second token");
  EXPECT_EQ(w.stats().token_reloads, 1u);
  EXPECT_EQ(w.stats().unauthorized, 0u);
  // The server moves on first: 401s until the file has the token, then the watcher is back.
  fake_.set_token("third-token");
  fake_.end_watches();
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return w.stats().unauthorized >= 1; }, kWithin));
  EXPECT_NE(w.stats().last_error.find("401"), std::string::npos) << w.stats().last_error;
  fake_.apply(engine("engine-2"));
  dir_.write("token", "third-token");
  expect_caught_up(w, "app=engine", "with the third token");
  EXPECT_EQ(w.stats().token_reloads, 2u);
}

TEST_F(PodWatcherTest, OnlyPodsTheSelectorPicksAreHeld) {
  const std::string selector = "app=engine,tier notin (canary)";
  fake_.apply(engine("engine-0"));
  FakePod canary = engine("canary-0");
  canary.labels["tier"] = "canary";
  fake_.apply(canary);
  FakePod other = engine("router-0");
  other.labels = {{"app", "router"}};
  fake_.apply(other);
  fake_.apply(engine("elsewhere", "decode", "other-namespace"));
  Watching w(options(selector));
  EXPECT_TRUE(w.wait_for({"engine-0"})) << ::testing::PrintToString(w.view());
  // A pod relabelled out of the selection leaves it; relabelled into it, it comes in.
  ASSERT_TRUE(fake_.update("fleet", "engine-0", [](FakePod& p) { p.labels["tier"] = "canary"; }));
  EXPECT_TRUE(w.wait_for({})) << ::testing::PrintToString(w.view());
  ASSERT_TRUE(fake_.update("fleet", "canary-0", [](FakePod& p) { p.labels.erase("tier"); }));
  EXPECT_TRUE(w.wait_for({"canary-0"})) << ::testing::PrintToString(w.view());
  ASSERT_TRUE(fake_.update("fleet", "router-0", [](FakePod& p) { p.labels["app"] = "engine"; }));
  EXPECT_TRUE(w.wait_for({"canary-0", "router-0"})) << ::testing::PrintToString(w.view());
}

TEST_F(PodWatcherTest, PrefillAndDecodePodsByRole) {
  for (int i = 0; i < 2; ++i) fake_.apply(engine("prefill-" + std::to_string(i), "prefill"));
  for (int i = 0; i < 3; ++i) fake_.apply(engine("decode-" + std::to_string(i), "decode"));
  Watching prefill(options("app=engine,role=prefill"));
  Watching decode(options("app=engine,role in (decode)"));
  EXPECT_TRUE(prefill.wait_for({"prefill-0", "prefill-1"}));
  EXPECT_TRUE(decode.wait_for({"decode-0", "decode-1", "decode-2"}));
  // A pod changing role moves from one set to the other.
  ASSERT_TRUE(fake_.update("fleet", "decode-2", [](FakePod& p) { p.labels["role"] = "prefill"; }));
  EXPECT_TRUE(prefill.wait_for({"decode-2", "prefill-0", "prefill-1"}));
  EXPECT_TRUE(decode.wait_for({"decode-0", "decode-1"}));
  set_ready("prefill-0", false);
  EXPECT_TRUE(prefill.wait_for({"decode-2", "prefill-0-", "prefill-1"}));
}

TEST_F(PodWatcherTest, EveryNamespace) {
  fake_.apply(engine("a", "decode", "east"));
  fake_.apply(engine("b", "decode", "west"));
  WatcherOptions o = options();
  o.namespace_name.clear();
  Watching w(std::move(o));
  EXPECT_TRUE(w.wait_for({"a", "b"})) << ::testing::PrintToString(w.view());
  fake_.apply(engine("c", "decode", "north"));
  EXPECT_TRUE(w.wait_for({"a", "b", "c"})) << ::testing::PrintToString(w.view());
}

TEST_F(PodWatcherTest, AnUntrustedServerIsAFailureNamedInStats) {
  fake_.apply(engine("engine-0"));
  const kvgate::testing::TestCerts other = kvgate::testing::make_test_certs();
  WatcherOptions o = options();
  o.server.ca_file = other.ca_cert;  // a CA that did not sign the fake's certificate
  {
    Watching w(o);
    ASSERT_TRUE(
        kvgate::testing::wait_until([&] { return w.stats().transport_errors >= 2; }, kWithin * 5));
    EXPECT_FALSE(w.stats().connected);
    EXPECT_NE(w.stats().last_error.find("TLS handshake"), std::string::npos)
        << w.stats().last_error;
    EXPECT_EQ(w.deliveries(), 0u);
  }
  o.server.ca_file = dir_.write("garbage.pem", "not a certificate");
  Watching garbage(o);
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return garbage.stats().transport_errors >= 1; },
                                          kWithin * 5));
  EXPECT_NE(garbage.stats().last_error.find("CA certificates"), std::string::npos)
      << garbage.stats().last_error;
}

TEST_F(PodWatcherTest, NoHandlerCallAfterStop) {
  for (int i = 0; i < 3; ++i) fake_.apply(engine("engine-" + std::to_string(i)));
  Watching w(options());
  expect_caught_up(w);
  std::atomic<bool> done{false};
  std::atomic<bool> stopping{false};
  std::thread churn([&] {
    for (int i = 0; !done.load(); ++i) {
      const uint64_t before = w.deliveries();
      set_ready("engine-0", i % 2 == 0);
      // Paced by the watcher while it watches: a loop that only changes pods holds the fake's
      // lock nearly all the time, and its server thread (the watch's writer) would starve.
      if (stopping.load()) continue;
      kvgate::testing::wait_until(
          [&] { return w.deliveries() > before || stopping.load() || done.load(); }, kWithin);
    }
  });
  // Ends the churn on every way out of the test (a failed ASSERT included).
  const auto stop_churn = [&] {
    done.store(true);
    if (churn.joinable()) churn.join();
  };
  struct Finally {
    std::function<void()> f;
    ~Finally() { f(); }
  } finally{stop_churn};
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return w.deliveries() >= 20; }, kWithin * 10))
      << "deliveries " << w.deliveries() << ", events " << w.stats().events << ", watches "
      << w.stats().watches << ", lists " << w.stats().lists << ", transport errors "
      << w.stats().transport_errors << ", bad events " << w.stats().bad_events << ", last error "
      << w.stats().last_error;
  stopping.store(true);
  w.stop();
  const uint64_t after_stop = w.deliveries();
  const uint64_t rv = fake_.resource_version();
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return fake_.resource_version() >= rv + 50; },
                                          kWithin * 10));
  stop_churn();
  EXPECT_EQ(w.deliveries(), after_stop);
  EXPECT_FALSE(w.stats().connected);
}

}  // namespace
}  // namespace kvgate::kube
