// Workers from Kubernetes pods, end to end: the SGLang model gateway's two discovery lines run
// against the fake API server (tests/kube/support) with mock engines standing in for the pods,
// each on its own loopback address (127.0.0.N, the pod IP) and the same port. A pod that serves
// must be routable within a second of its event; one that stops serving must get no new request
// within a second while its requests in flight finish; a 410 or an API server restart loses no
// pod; kubectl, the real client, sees the pods the gateway routes to.
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <thread>

#include "CLI/CLI.hpp"
#include "app/gateway_fixture.h"
#include "app/pod_discovery.h"
#include "kube/support/fake_apiserver.h"
#include "kube/support/temp_dir.h"
#include "support/child_process.h"
#include "support/sanitizer.h"

namespace kvgate::app {
namespace {

// A port every pod address can listen on: below the kernel's ephemeral range (32768 on), so no
// socket that binds port 0 or connects out is given it, and free on every address now. The pods
// share one port, and a first engine's ephemeral port could be taken on another address (a
// parallel test's socket bound to all addresses) before the next engine bound it.
uint16_t pod_port() {
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 500; ++attempt) {
    const auto port = static_cast<uint16_t>(20000 + rng() % 12000);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;
}

using kvgate::testing::FakeApiServer;
using kvgate::testing::FakePod;
using kvgate::testing::TempDir;
using namespace std::chrono_literals;

// How soon a pod's change must show in routing (the Done-when figure; scaled under a sanitizer).
const std::chrono::milliseconds kWithin(static_cast<int64_t>(1000 * testing_support::kSlowdown));

kube::Pod pod_of(std::string ip, bool ready = true) {
  kube::Pod p;
  p.name = "engine-0";
  p.namespace_name = "inference";
  p.running = true;
  p.ready = ready;
  p.ip = std::move(ip);
  return p;
}

TEST(WorkerOfPod, OnlyARunningReadyPodWithAnIpThatIsNotBeingDeletedIsAWorker) {
  const auto regular = workers::WorkerRole::kRegular;
  std::optional<PodWorker> w = worker_of_pod(pod_of("10.0.0.7"), regular, 8000);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->url, "http://10.0.0.7:8000");
  EXPECT_EQ(w->spec.source, workers::WorkerSource::kKubernetes);
  EXPECT_TRUE(w->kv_endpoints.empty());  // the engine's /server_info says them
  EXPECT_FALSE(worker_of_pod(pod_of("10.0.0.7", /*ready=*/false), regular, 8000));
  EXPECT_FALSE(worker_of_pod(pod_of(""), regular, 8000));
  kube::Pod pending = pod_of("10.0.0.7");
  pending.running = false;
  EXPECT_FALSE(worker_of_pod(pending, regular, 8000));
  kube::Pod deleting = pod_of("10.0.0.7");
  deleting.deleting = true;
  EXPECT_FALSE(worker_of_pod(deleting, regular, 8000));
  EXPECT_EQ(worker_of_pod(pod_of("fd00::7"), regular, 8000)->url, "http://[fd00::7]:8000");
}

TEST(WorkerOfPod, AnnotationsGiveTheEventEndpointsPerRankAndAPrefillsBootstrapPort) {
  kube::Pod p = pod_of("10.0.0.7");
  p.annotations = {{"kvgate.io/kv-events-endpoint", "tcp://*:5557"},
                   {"kvgate.io/kv-events-replay-endpoint", "5600"},
                   {"kvgate.io/dp-size", "2"},
                   {"sglang.ai/bootstrap-port", "8998"}};
  std::string problem;
  std::optional<PodWorker> w = worker_of_pod(p, workers::WorkerRole::kPrefill, 8000, &problem);
  ASSERT_TRUE(w);
  EXPECT_EQ(problem, "");
  ASSERT_EQ(w->kv_endpoints.size(), 2u);
  EXPECT_EQ(w->kv_endpoints[0].publisher, "tcp://10.0.0.7:5557");
  EXPECT_EQ(w->kv_endpoints[1].publisher, "tcp://10.0.0.7:5558");
  EXPECT_EQ(w->kv_endpoints[1].replay, "tcp://10.0.0.7:5601");
  EXPECT_EQ(w->kv_endpoints[1].rank, 1u);
  EXPECT_EQ(w->spec.role, workers::WorkerRole::kPrefill);
  EXPECT_EQ(w->spec.bootstrap_port, 8998);
  // kvgate's own name wins over SGLang's; a decode pod has no bootstrap port.
  p.annotations["kvgate.io/bootstrap-port"] = "9001";
  EXPECT_EQ(worker_of_pod(p, workers::WorkerRole::kPrefill, 8000)->spec.bootstrap_port, 9001);
  EXPECT_EQ(worker_of_pod(p, workers::WorkerRole::kDecode, 8000)->spec.bootstrap_port, 0);
  // Another host than the pod's own is kept.
  p.annotations["kvgate.io/kv-events-endpoint"] = "tcp://10.9.9.9:7000";
  EXPECT_EQ(worker_of_pod(p, workers::WorkerRole::kDecode, 8000)->kv_endpoints[0].publisher,
            "tcp://10.9.9.9:7000");
}

TEST(WorkerOfPod, ABadAnnotationIsSaidAndThePodIsStillAWorkerWithoutIt) {
  kube::Pod p = pod_of("10.0.0.7");
  p.annotations = {{"kvgate.io/kv-events-endpoint", "tcp://host:not-a-port"}};
  std::string problem;
  std::optional<PodWorker> w = worker_of_pod(p, workers::WorkerRole::kRegular, 8000, &problem);
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->kv_endpoints.empty());
  EXPECT_NE(problem.find("kvgate.io/kv-events-endpoint"), std::string::npos) << problem;
  p.annotations = {{"kvgate.io/dp-size", "zero"}};
  w = worker_of_pod(p, workers::WorkerRole::kRegular, 8000, &problem);
  ASSERT_TRUE(w);
  EXPECT_NE(problem.find("kvgate.io/dp-size"), std::string::npos) << problem;
  p.annotations = {{"kvgate.io/bootstrap-port", "70000"}};
  w = worker_of_pod(p, workers::WorkerRole::kPrefill, 8000, &problem);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->spec.bootstrap_port, 0);
  EXPECT_NE(problem.find("bootstrap-port"), std::string::npos) << problem;
}

// SGLang's model gateway launch lines, parsed as kvgate parses its own.
Result<GatewayConfig> parse_line(std::vector<std::string> args) {
  GatewayConfig c;
  CLI::App app;
  add_flags(app, c);
  args.insert(args.begin(), "kvgate");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (Status s = finish_config(c); !s.ok()) return s;
  return c;
}

const std::vector<std::string> kSmgLine = {"--service-discovery",
                                           "--selector",
                                           "app=sglang,environment=production",
                                           "--service-discovery-namespace",
                                           "inference",
                                           "--service-discovery-port",
                                           "8000"};
const std::vector<std::string> kSmgPdLine = {"--service-discovery",
                                             "--pd-disaggregation",
                                             "--prefill-selector",
                                             "app=sglang,role=prefill",
                                             "--decode-selector",
                                             "app=sglang,role=decode",
                                             "--service-discovery-namespace",
                                             "inference"};

TEST(DiscoveryFlags, TheModelGatewaysTwoDiscoveryLinesAreTaken) {
  Result<GatewayConfig> c = parse_line(kSmgLine);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->service_discovery);
  EXPECT_EQ(c->selector, "app=sglang,environment=production");
  EXPECT_EQ(c->discovery_namespace, "inference");
  EXPECT_EQ(c->discovery_port, 8000);
  c = parse_line(kSmgPdLine);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->pd_disaggregation);
  EXPECT_EQ(c->prefill_selector, "app=sglang,role=prefill");
  EXPECT_EQ(c->decode_selector, "app=sglang,role=decode");
  // The terms as separate words are one selector too.
  c = parse_line({"--service-discovery", "--selector", "app=sglang", "tier in (a,b)"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->selector, "app=sglang,tier in (a,b)");
}

TEST(DiscoveryFlags, WhatDiscoveryCannotDoWithoutIsRefusedWithTheFlagToAdd) {
  const auto error = [](std::vector<std::string> args) {
    Result<GatewayConfig> c = parse_line(std::move(args));
    return c.ok() ? std::string("accepted") : std::string(message_of(c.status()));
  };
  EXPECT_NE(error({"--service-discovery"}).find("--selector"), std::string::npos);
  EXPECT_NE(error({"--selector", "app=x"}).find("--service-discovery"), std::string::npos);
  EXPECT_NE(error({"--service-discovery", "--pd-disaggregation", "--prefill-selector", "a=b"})
                .find("--decode-selector"),
            std::string::npos);
  EXPECT_NE(error({"--service-discovery", "--selector", "app in (x"}), "accepted");
}

// ---- the gateway against the fake API server ---------------------------------------------------

class PodDiscoveryTest : public GatewayTest {
 protected:
  void TearDown() override {
    GatewayTest::TearDown();
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
  }

  // A mock engine at 127.0.0.N:port_ (pod_port(), picked for the first), `tweak` applied; its
  // URL.
  std::string start_engine(int n, const std::function<void(mock::FleetOptions&)>& tweak = {}) {
    if (port_ == 0) port_ = pod_port();
    start_worker_with([&](mock::FleetOptions& o) {
      o.bind_address = "127.0.0." + std::to_string(n);
      if (port_ != 0) o.http_ports = {port_};
      if (tweak) tweak(o);
    });
    if (port_ == 0) port_ = worker_port(fleets_.size() - 1);
    return engine_url(n);
  }
  std::string engine_url(int n) const {
    return "http://127.0.0." + std::to_string(n) + ":" + std::to_string(port_);
  }

  // The pod of the engine at 127.0.0.N, as SMG's first line selects it.
  static FakePod pod(const std::string& name, int n,
                     std::map<std::string, std::string> labels = {{"app", "sglang"},
                                                                  {"environment", "production"}}) {
    FakePod p;
    p.name = name;
    p.namespace_name = "inference";
    p.labels = std::move(labels);
    p.ip = "127.0.0." + std::to_string(n);
    return p;
  }

  // The gateway as `line` says, reaching the fake as a pod would (its service account and the
  // KUBERNETES_SERVICE_ variables), `worker_urls` beside; health and discovery at their serving
  // defaults.
  void start_discovering(const std::vector<std::string>& line,
                         std::vector<std::string> worker_urls = {}) {
    Result<GatewayConfig> parsed = parse_line(line);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    GatewayConfig c = base_config();
    c.service_discovery = true;
    c.worker_urls = std::move(worker_urls);
    c.selector = parsed->selector;
    c.prefill_selector = parsed->prefill_selector;
    c.decode_selector = parsed->decode_selector;
    c.pd_disaggregation = parsed->pd_disaggregation;
    c.discovery_namespace = parsed->discovery_namespace;
    c.discovery_port = port_;
    c.health_check_interval = GatewayConfig().health_check_interval;
    c.discovery_retry = GatewayConfig().discovery_retry;
    dir_.write("token", fake_.token());
    std::filesystem::copy_file(fake_.ca_file(), dir_.file("ca.crt"),
                               std::filesystem::copy_options::overwrite_existing);
    dir_.write("namespace", "default");
    c.service_account_dir = dir_.path();
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", std::to_string(fake_.port()).c_str(), 1);
    start_gateway(std::move(c));
  }

  // The URLs of the routable workers, sorted.
  std::vector<std::string> routable() const {
    std::vector<std::string> out;
    const auto fleet = gateway_->registry().snapshot();
    for (const auto& w : fleet->workers) {
      if (w->routable() && w->info()->discovered) out.push_back(w->url());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // Each registered worker's id by URL (a worker removed and added again gets a new id).
  std::map<std::string, uint64_t> ids() const {
    std::map<std::string, uint64_t> out;
    const auto fleet = gateway_->registry().snapshot();
    for (const auto& w : fleet->workers) out[w->url()] = w->id().value();
    return out;
  }
  // How long until the routable workers are `want` (sorted); kWithin * 10 when never.
  std::chrono::milliseconds until_routable(std::vector<std::string> want,
                                           std::chrono::steady_clock::time_point since) {
    std::sort(want.begin(), want.end());
    const bool ok = kvgate::testing::wait_until([&] { return routable() == want; }, kWithin * 10);
    return ok ? std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - since)
              : kWithin * 10;
  }
  // Applies `change` to the fake and returns how long until the routable workers are `want`.
  std::chrono::milliseconds routable_after(const std::function<void()>& change,
                                           std::vector<std::string> want) {
    const auto t0 = std::chrono::steady_clock::now();
    change();
    return until_routable(std::move(want), t0);
  }

  std::string readiness() {
    auto r = client().get("/readiness");
    return r.ok() ? std::to_string(r->status) + " " + r->body : "no answer";
  }
  double discovery_calls(const std::string& kind) {
    return metric_value(gateway_->metrics_text(),
                        "kvgate_discovery_api_total{kind=\"" + kind + "\"}");
  }

  FakeApiServer fake_;
  TempDir dir_;
  uint16_t port_ = 0;
};

TEST_F(PodDiscoveryTest, PodsJoinAndLeaveTheFleetWithinASecondOfTheirEvents) {
  const std::string e2 = start_engine(2), e3 = start_engine(3), e4 = start_engine(4);
  start_discovering(kSmgLine);
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return discovery_calls("watch") >= 1; }));
  EXPECT_NE(readiness().find("no serving pod matches the selector"), std::string::npos)
      << readiness();

  std::vector<std::chrono::milliseconds> took;
  took.push_back(routable_after([&] { fake_.apply(pod("engine-a", 2)); }, {e2}));
  took.push_back(routable_after(
      [&] {
        fake_.apply(pod("engine-b", 3));
        fake_.apply(pod("engine-c", 4));
      },
      {e2, e3, e4}));
  // Pods another selector or namespace picks stay out.
  FakePod canary = pod("engine-canary", 5, {{"app", "sglang"}, {"environment", "canary"}});
  fake_.apply(canary);
  FakePod elsewhere = pod("engine-elsewhere", 6);
  elsewhere.namespace_name = "default";
  fake_.apply(elsewhere);
  // Not ready, then deleted: out of routing.
  took.push_back(routable_after(
      [&] { fake_.update("inference", "engine-c", [](FakePod& p) { p.ready = false; }); },
      {e2, e3}));
  took.push_back(routable_after([&] { fake_.remove("inference", "engine-b"); }, {e2}));
  // Being deleted (a deletion timestamp, its containers still stopping) is out too.
  took.push_back(routable_after(
      [&] { fake_.update("inference", "engine-a", [](FakePod& p) { p.deleting = true; }); }, {}));
  // Ready again under a new name (a rolling update's new pod on the same address).
  took.push_back(routable_after([&] { fake_.apply(pod("engine-d", 4)); }, {e4}));
  for (size_t i = 0; i < took.size(); ++i) {
    EXPECT_LE(took[i], kWithin) << "change " << i;
    std::cout << "change " << i << " routed after " << took[i].count() << " ms\n";
  }
  auto workers = client().get("/workers");
  ASSERT_TRUE(workers.ok());
  EXPECT_NE(workers->body.find("\"source\":\"kubernetes\""), std::string::npos) << workers->body;
  EXPECT_EQ(metric_value(gateway_->metrics_text(), "kvgate_discovery_workers"), 1);
  EXPECT_EQ(metric_value(gateway_->metrics_text(), "kvgate_discovery_connected"), 1);
}

TEST_F(PodDiscoveryTest, APodThatStopsServingGetsNoNewRequestAndFinishesThoseInFlight) {
  const std::string e2 = start_engine(2, [](mock::FleetOptions& o) {
    o.engine.timing.speedup = 1;  // a stream long enough to outlive the pod's change
  });
  const std::string e3 = start_engine(3);
  start_discovering(kSmgLine);
  fake_.apply(pod("engine-slow", 2));
  ASSERT_LE(until_routable({e2}, std::chrono::steady_clock::now()), kWithin);

  std::string streamed;
  std::thread stream([&] {
    http::SyncClient c("127.0.0.1", gateway_->port());
    http::ClientRequest r;
    r.method = http::Verb::post;
    r.target = "/v1/completions";
    r.body = completion("a long answer", 256, /*stream=*/true);
    auto res = c.request(r);
    if (res.ok()) streamed = res->body;
  });
  const auto fleet = gateway_->registry().snapshot();
  ASSERT_EQ(fleet->workers.size(), 1u);
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return fleet->workers[0]->in_flight() > 0; }));

  fake_.apply(pod("engine-fast", 3));
  EXPECT_LE(
      routable_after(
          [&] { fake_.update("inference", "engine-slow", [](FakePod& p) { p.ready = false; }); },
          {e3}),
      kWithin);
  EXPECT_GT(fleet->workers[0]->in_flight(), 0) << "the stream ended before the pod's change";
  // New requests go to the serving pod only, while the stream goes on.
  for (int i = 0; i < 4; ++i) {
    auto r = client().post("/v1/completions", completion("new request " + std::to_string(i)));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200u) << r->body;
    EXPECT_EQ(r->header("x-kvgate-worker"), e3);
  }
  stream.join();
  EXPECT_NE(streamed.find("\"finish_reason\":\"length\""), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << streamed;
}

TEST_F(PodDiscoveryTest, A410AndAnApiServerRestartLoseNoPod) {
  const std::string e2 = start_engine(2), e3 = start_engine(3), e4 = start_engine(4);
  start_discovering(kSmgLine);
  // Watching before the pods come: the faults below are the watch's.
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return discovery_calls("watch") >= 1; }));
  fake_.apply(pod("engine-a", 2));
  fake_.apply(pod("engine-b", 3));
  ASSERT_LE(until_routable({e2, e3}, std::chrono::steady_clock::now()), kWithin);
  const std::map<std::string, uint64_t> before = ids();

  // The watch's history expires: the watcher lists again, and nothing is removed in between.
  fake_.expire_watches();
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return discovery_calls("relist_gone") >= 1; }));
  EXPECT_EQ(ids(), before);
  EXPECT_LE(routable_after([&] { fake_.apply(pod("engine-c", 4)); }, {e2, e3, e4}), kWithin);

  // The API server goes away; pods change meanwhile; it comes back with its history compacted.
  fake_.go_down();
  fake_.remove("inference", "engine-c");
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return discovery_calls("reconnect") >= 1; }));
  EXPECT_EQ(routable(), (std::vector<std::string>{e2, e3, e4}));  // the last known fleet serves
  const auto t0 = std::chrono::steady_clock::now();
  fake_.come_up(/*compact_history=*/true);
  // The watcher's backoff (at most 10 s) decides when it is back; then the fleet is the pods'.
  EXPECT_LE(until_routable({e2, e3}, t0), std::chrono::milliseconds(10'000) + kWithin);
  EXPECT_EQ(ids(), before);

  // The kubelet rotates the service account's token and the server moves on: the next watch
  // reads the new token, and pods are followed as before.
  dir_.write("token", "rotated-token");
  fake_.set_token("rotated-token");
  fake_.end_watches();
  fake_.apply(pod("engine-c", 4));
  ASSERT_TRUE(kvgate::testing::wait_until(
      [&] {
        return routable() == std::vector{e2, e3, e4};
      },
      std::chrono::milliseconds(10'000) + kWithin));
  EXPECT_GE(discovery_calls("token_reload"), 1);
  EXPECT_EQ(ids().at(e2), before.at(e2));
}

TEST_F(PodDiscoveryTest, WithTheApiServerDownAtStartItServes503AndSaysWhy) {
  const std::string e2 = start_engine(2);
  fake_.apply(pod("engine-a", 2));
  fake_.go_down();
  start_discovering(kSmgLine);
  ASSERT_TRUE(kvgate::testing::wait_until([&] {
    return readiness().find("cannot reach the Kubernetes API server") != std::string::npos;
  })) << readiness();
  EXPECT_EQ(readiness().substr(0, 3), "503");
  auto r = client().post("/v1/completions", completion("hello"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503u) << r->body;
  fake_.come_up(/*compact_history=*/false);
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return routable().size() == 1; }, 20s));
  EXPECT_EQ(readiness().substr(0, 3), "200");
  r = client().post("/v1/completions", completion("hello"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u) << r->body;
}

TEST_F(PodDiscoveryTest, DiscoveredWorkersSitBesideTheCommandLinesAndTheApis) {
  const std::string e2 = start_engine(2), e3 = start_engine(3), e4 = start_engine(4);
  start_discovering(kSmgLine, /*worker_urls=*/{e4});
  auto added = client().post("/workers", R"({"url":")" + e3 + "\"}");
  ASSERT_TRUE(added.ok());
  EXPECT_LT(added->status, 300u) << added->body;
  fake_.apply(pod("engine-a", 2));
  ASSERT_LE(until_routable({e2, e3, e4}, std::chrono::steady_clock::now()), kWithin);
  auto workers = client().get("/workers");
  ASSERT_TRUE(workers.ok());
  for (const char* source : {"flags", "api", "kubernetes"}) {
    EXPECT_NE(workers->body.find("\"source\":\"" + std::string(source) + "\""), std::string::npos)
        << source << ": " << workers->body;
  }
  // The pod going leaves the others.
  EXPECT_LE(routable_after([&] { fake_.remove("inference", "engine-a"); }, {e3, e4}), kWithin);
  // A pod on the engine the API added is that worker still; when the API removes it, the pod's
  // worker takes its place (the refused add is tried again).
  fake_.apply(pod("engine-b", 3));
  auto removed = client().request({.method = http::Verb::delete_, .target = "/workers?url=" + e3});
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->status, 200u) << removed->body;
  ASSERT_TRUE(kvgate::testing::wait_until([&] { return routable() == std::vector{e3, e4}; }, 20s));
  workers = client().get("/workers");
  ASSERT_TRUE(workers.ok());
  EXPECT_EQ(workers->body.find("\"source\":\"api\""), std::string::npos) << workers->body;
}

TEST_F(PodDiscoveryTest, TheDisaggregatedLineFollowsPrefillAndDecodePodsByRole) {
  uint16_t bootstrap = 0;
  const std::string prefill = start_engine(2, [](mock::FleetOptions& o) {
    o.pd.role = mock::PdRole::kPrefill;
    o.pd.bootstrap_port = 0;
    o.pd.transfer_timeout = 600s;
    o.pd.room_timeout = 600s;
  });
  bootstrap = fleets_.back()->ports(0).bootstrap;
  const std::string decode = start_engine(3, [](mock::FleetOptions& o) {
    o.pd.role = mock::PdRole::kDecode;
    o.pd.transfer_timeout = 600s;
    o.pd.room_timeout = 600s;
  });
  start_discovering(kSmgPdLine);
  FakePod p = pod("prefill-0", 2, {{"app", "sglang"}, {"role", "prefill"}});
  p.annotations = {{"kvgate.io/bootstrap-port", std::to_string(bootstrap)}};
  fake_.apply(p);
  fake_.apply(pod("decode-0", 3, {{"app", "sglang"}, {"role", "decode"}}));
  fake_.apply(pod("other-0", 4, {{"app", "sglang"}, {"role", "router"}}));
  ASSERT_LE(until_routable({prefill, decode}, std::chrono::steady_clock::now()), kWithin);
  const auto fleet = gateway_->registry().snapshot();
  for (const auto& w : fleet->workers) {
    const bool is_prefill = w->url() == prefill;
    EXPECT_EQ(w->info()->role,
              is_prefill ? workers::WorkerRole::kPrefill : workers::WorkerRole::kDecode);
    if (is_prefill) {
      EXPECT_EQ(w->info()->bootstrap_port, bootstrap);
    }
  }
  auto r = client().post("/v1/completions", completion("a disaggregated request", 4));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u) << r->body;
  EXPECT_EQ(r->header("x-kvgate-worker"), decode);
  EXPECT_EQ(r->header("x-kvgate-prefill-worker"), prefill);
  // The prefill pod going leaves no pair: 503 until one is back.
  EXPECT_LE(routable_after([&] { fake_.remove("inference", "prefill-0"); }, {decode}), kWithin);
}

TEST_F(PodDiscoveryTest, KubectlSeesThePodsTheGatewayRoutesTo) {
  constexpr const char* kKubectl = "/usr/bin/kubectl";
  if (access(kKubectl, X_OK) != 0) {
    GTEST_SKIP() << kKubectl << " is missing: tools/setup.sh installs kubernetes-client";
  }
  const std::string e2 = start_engine(2), e3 = start_engine(3);
  start_discovering(kSmgLine);
  fake_.apply(pod("engine-a", 2));
  fake_.apply(pod("engine-b", 3));
  fake_.apply(pod("engine-c", 4, {{"app", "sglang"}, {"environment", "staging"}}));
  fake_.update("inference", "engine-b", [](FakePod& p) { p.ready = false; });
  ASSERT_LE(until_routable({e2}, std::chrono::steady_clock::now()), kWithin);
  const std::string config = dir_.file("kubeconfig");
  fake_.write_kubeconfig(config, "inference");
  kvgate::testing::Child kubectl(
      {kKubectl, "--kubeconfig", config, "--cache-dir", dir_.file("cache"), "get", "pods", "-n",
       "inference", "-l", "app=sglang,environment=production", "-o",
       "jsonpath={range "
       ".items[?(@.status.conditions[0].status==\"True\")]}{.status.podIP}{\"\\n\"}{end}"});
  ASSERT_TRUE(kubectl.started());
  ASSERT_EQ(kubectl.wait(std::chrono::milliseconds(
                static_cast<int64_t>(30'000 * testing_support::kSlowdown))),
            0)
      << kubectl.errors();
  std::vector<std::string> seen;
  std::istringstream lines(kubectl.output());
  for (std::string ip; std::getline(lines, ip);) {
    if (!ip.empty()) seen.push_back("http://" + ip + ":" + std::to_string(port_));
  }
  EXPECT_EQ(seen, routable()) << kubectl.output();
}

}  // namespace
}  // namespace kvgate::app
