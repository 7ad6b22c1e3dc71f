// The fake API server as clients see it: its routes, its watch streams and their faults over
// HTTPS, and, as proof that it speaks the real API, kubectl (the Kubernetes project's own client)
// listing, watching and being refused by it.
#include "kube/support/fake_apiserver.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kube/support/temp_dir.h"
#include "kvgate/http/client.h"
#include "simdjson.h"
#include "support/child_process.h"
#include "support/sanitizer.h"
#include "support/wait.h"

namespace kvgate::testing {
namespace {

const std::chrono::milliseconds kWithin(static_cast<int64_t>(1000 * testing_support::kSlowdown));
// kubectl is a process to start (and, for the cloud SDKs' kubectl, a dispatcher to go through).
const std::chrono::milliseconds kKubectl(static_cast<int64_t>(30'000 * testing_support::kSlowdown));

FakePod pod(std::string name, std::string role, std::string ns = "fleet") {
  FakePod p;
  p.name = std::move(name);
  p.namespace_name = std::move(ns);
  p.labels = {{"app", "engine"}, {"role", std::move(role)}};
  p.ip = "10.1.0.1";
  return p;
}

class FakeApiServerTest : public ::testing::Test {
 protected:
  http::SyncClient client() {
    auto tls = http::make_client_tls(fake_.ca_file());
    EXPECT_TRUE(tls.ok()) << tls.status();
    return http::SyncClient("127.0.0.1", fake_.port(), http::ClientOptions{.tls = *tls});
  }
  http::ClientRequest get(std::string target, std::optional<std::string> token = std::nullopt) {
    http::ClientRequest r;
    r.target = std::move(target);
    r.headers.emplace_back("Authorization", "Bearer " + token.value_or(fake_.token()));
    return r;
  }
  // The lines of a watch until `lines` came (then the exchange is dropped) or the stream ended.
  std::vector<std::string> watch(const std::string& target, size_t lines) {
    std::vector<std::string> out;
    std::string pending;
    http::SyncClient c = client();
    auto res = c.stream(get(target), [&](std::string_view piece) {
      pending += piece;
      for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
        out.push_back(pending.substr(0, nl));
        pending.erase(0, nl + 1);
      }
      return out.size() >= lines ? absl::CancelledError("enough") : absl::OkStatus();
    });
    return out;
  }

  FakeApiServer fake_;
};

std::string_view field(simdjson::dom::element e, const char* pointer) {
  std::string_view out;
  if (e.at_pointer(pointer).get(out) != simdjson::SUCCESS) out = {};
  return out;
}

TEST_F(FakeApiServerTest, EveryRouteButVersionNeedsTheToken) {
  http::SyncClient c = client();
  auto version = c.request(get("/version", "wrong"));
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(version->status, 200u);
  for (const char* path : {"/api", "/api/v1", "/apis", "/api/v1/pods"}) {
    auto refused = c.request(get(path, "wrong"));
    ASSERT_TRUE(refused.ok()) << refused.status();
    EXPECT_EQ(refused->status, 401u) << path;
    EXPECT_NE(refused->body.find("\"reason\":\"Unauthorized\""), std::string::npos);
    auto answered = c.request(get(path));
    ASSERT_TRUE(answered.ok());
    EXPECT_EQ(answered->status, 200u) << path;
  }
  auto api = c.request(get("/api/v1"));
  EXPECT_NE(api->body.find("\"name\":\"pods\""), std::string::npos);
  EXPECT_EQ(c.request(get("/api/v1/services"))->status, 404u);
  fake_.set_token("rotated");
  EXPECT_EQ(c.request(get("/api", "fake-token"))->status, 401u) << "the old token stops working";
  EXPECT_EQ(c.request(get("/api", "rotated"))->status, 200u);
  EXPECT_GE(fake_.stats().unauthorized, 5u);
}

TEST_F(FakeApiServerTest, ListsBySelectorWithTheNewestVersion) {
  fake_.apply(pod("p-0", "prefill"));
  fake_.apply(pod("d-0", "decode"));
  fake_.apply(pod("d-1", "decode", "other"));
  http::SyncClient c = client();
  auto res = c.request(get("/api/v1/namespaces/fleet/pods?labelSelector=role%3Ddecode"));
  ASSERT_TRUE(res.ok()) << res.status();
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(res->body);
  EXPECT_EQ(field(doc, "/kind"), "PodList");
  EXPECT_EQ(field(doc, "/metadata/resourceVersion"), std::to_string(fake_.resource_version()));
  simdjson::dom::array items = doc["items"];
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(field(items.at(0), "/metadata/name"), "d-0");
  EXPECT_EQ(field(items.at(0), "/status/phase"), "Running");
  EXPECT_EQ(field(items.at(0), "/status/conditions/0/status"), "True");
  auto all = c.request(get("/api/v1/pods?labelSelector=app%20in%20(engine)"));
  simdjson::dom::array every = parser.parse(all->body)["items"];
  EXPECT_EQ(every.size(), 3u);
  auto bad = c.request(get("/api/v1/pods?labelSelector=app%20in%20("));
  EXPECT_EQ(bad->status, 400u);
}

TEST_F(FakeApiServerTest, AWatchReplaysFromItsVersionThenFollows) {
  fake_.apply(pod("a", "decode"));
  const uint64_t rv = fake_.resource_version();
  fake_.apply(pod("b", "decode"));
  fake_.update("fleet", "a", [](FakePod& p) { p.ready = false; });
  std::vector<std::string> lines;
  std::thread reader([&] {
    lines =
        watch("/api/v1/namespaces/fleet/pods?watch=true&resourceVersion=" + std::to_string(rv), 4);
  });
  ASSERT_TRUE(wait_until([&] { return fake_.stats().open_watches == 1; }, kWithin));
  fake_.remove("fleet", "b");
  fake_.apply(pod("c", "decode"));
  reader.join();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find(R"({"type":"ADDED","object":{"kind":"Pod")"), std::string::npos);
  EXPECT_NE(lines[0].find(R"("name":"b")"), std::string::npos);
  EXPECT_NE(lines[1].find(R"("type":"MODIFIED")"), std::string::npos);
  EXPECT_NE(lines[1].find(R"("status":"False")"), std::string::npos);
  EXPECT_NE(lines[2].find(R"("type":"DELETED")"), std::string::npos);
  EXPECT_NE(lines[3].find(R"("type":"ADDED")"), std::string::npos);
  EXPECT_NE(lines[3].find(R"("name":"c")"), std::string::npos);
}

TEST_F(FakeApiServerTest, AWatchWithoutAVersionStartsWithEveryPod) {
  fake_.apply(pod("a", "decode"));
  fake_.apply(pod("b", "prefill"));
  const std::vector<std::string> lines = watch(
      "/api/v1/namespaces/fleet/pods?watch=1&labelSelector=role%3Dprefill&timeoutSeconds=1", 5);
  ASSERT_EQ(lines.size(), 1u) << "the stream ends at its timeout";
  EXPECT_NE(lines[0].find(R"("name":"b")"), std::string::npos);
}

TEST_F(FakeApiServerTest, BookmarksCarryTheNewestVersion) {
  fake_.set_bookmark_interval(std::chrono::milliseconds(20));
  fake_.apply(pod("a", "decode"));
  const std::vector<std::string> lines =
      watch("/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" +
                std::to_string(fake_.resource_version()),
            2);
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    EXPECT_NE(line.find(R"("type":"BOOKMARK")"), std::string::npos) << line;
    EXPECT_NE(line.find("\"resourceVersion\":\"" + std::to_string(fake_.resource_version())),
              std::string::npos);
  }
  EXPECT_GE(fake_.stats().bookmarks, 2u);
}

TEST_F(FakeApiServerTest, AnOldVersionIsGone) {
  fake_.apply(pod("a", "decode"));
  const std::string old = std::to_string(fake_.resource_version());
  fake_.apply(pod("b", "decode"));
  fake_.compact();
  const std::vector<std::string> lines = watch("/api/v1/pods?watch=1&resourceVersion=" + old, 5);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(R"({"type":"ERROR","object":{"kind":"Status")"), std::string::npos);
  EXPECT_NE(lines[0].find(R"("reason":"Expired")"), std::string::npos);
  EXPECT_NE(lines[0].find(R"("code":410)"), std::string::npos);
  fake_.set_gone_as_http_status(true);
  http::SyncClient c = client();
  auto res = c.request(get("/api/v1/pods?watch=1&resourceVersion=" + old));
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->status, 410u);
  EXPECT_EQ(fake_.stats().gone, 2u);
}

TEST_F(FakeApiServerTest, ARestartCutsTheWatchesAndKeepsThePort) {
  const uint16_t port = fake_.port();
  std::vector<std::string> lines;
  std::thread reader([&] { lines = watch("/api/v1/pods?watch=1&resourceVersion=0", 100); });
  const bool opened = wait_until([&] { return fake_.stats().open_watches == 1; }, kWithin);
  fake_.restart(/*compact_history=*/true);
  reader.join();
  ASSERT_TRUE(opened) << "open watches: " << fake_.stats().open_watches
                      << ", watches: " << fake_.stats().watches;
  EXPECT_TRUE(wait_until([&] { return fake_.stats().open_watches == 0; }, kWithin));
  EXPECT_EQ(fake_.port(), port);
  http::SyncClient c = client();
  auto res = c.request(get("/api/v1/pods"));
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->status, 200u);
}

// kubectl, the real client, against the fake.
class KubectlTest : public FakeApiServerTest {
 protected:
  void SetUp() override {
    if (access(kKubectlPath, X_OK) != 0) {
      GTEST_SKIP() << kKubectlPath << " is missing: tools/setup.sh installs kubernetes-client";
    }
    config_ = dir_.file("kubeconfig");
    fake_.write_kubeconfig(config_, "fleet");
  }
  std::unique_ptr<Child> kubectl(std::vector<std::string> args, const std::string& config = "") {
    std::vector<std::string> argv = {kKubectlPath, "--kubeconfig",
                                     config.empty() ? config_ : config, "--cache-dir",
                                     dir_.file("cache")};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<Child>(std::move(argv));
  }
  // Runs kubectl to its end; its stdout, and its exit code in `code`.
  std::string run(std::vector<std::string> args, int* code, const std::string& config = "") {
    std::unique_ptr<Child> c = kubectl(std::move(args), config);
    EXPECT_TRUE(c->started());
    const std::optional<int> exit = c->wait(kKubectl);
    *code = exit.value_or(-1);
    if (*code != 0) std::cerr << "kubectl stderr: " << c->errors() << "\n";
    return c->output();
  }

  static constexpr const char* kKubectlPath = "/usr/bin/kubectl";
  TempDir dir_;
  std::string config_;
};

TEST_F(KubectlTest, GetsThePodsTheSelectorPicks) {
  fake_.apply(pod("prefill-0", "prefill"));
  fake_.apply(pod("decode-0", "decode"));
  fake_.apply(pod("decode-1", "decode"));
  fake_.apply(pod("decode-9", "decode", "other"));
  int code = 0;
  const std::string out =
      run({"get", "pods", "-n", "fleet", "-l", "app=engine,role in (decode)", "-o", "json"}, &code);
  ASSERT_EQ(code, 0) << out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(out).get(doc), simdjson::SUCCESS) << out;
  std::vector<std::string> names;
  for (simdjson::dom::element item : doc["items"].get_array()) {
    names.emplace_back(field(item, "/metadata/name"));
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> want;
  for (const FakePod& p : fake_.pods("fleet")) {
    if (p.labels.at("role") == "decode") want.push_back(p.name);
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(names, want);
}

TEST_F(KubectlTest, WatchesAChangeArrive) {
  fake_.apply(pod("decode-0", "decode"));
  std::unique_ptr<Child> watch =
      kubectl({"get", "pods", "-n", "fleet", "--watch", "-o", "json", "--output-watch-events"});
  ASSERT_TRUE(watch->wait_for_output("decode-0", kKubectl)) << watch->errors();
  ASSERT_TRUE(wait_until([&] { return fake_.stats().open_watches == 1; }, kKubectl));
  fake_.apply(pod("decode-1", "decode"));
  EXPECT_TRUE(watch->wait_for_output("decode-1", kKubectl)) << watch->output() << watch->errors();
  fake_.update("fleet", "decode-0", [](FakePod& p) { p.ready = false; });
  EXPECT_TRUE(watch->wait_for_output("\"MODIFIED\"", kKubectl)) << watch->output();
  fake_.remove("fleet", "decode-1");
  EXPECT_TRUE(watch->wait_for_output("\"DELETED\"", kKubectl)) << watch->output();
}

TEST_F(KubectlTest, AnOldTokenIsRefusedAfterARotation) {
  fake_.apply(pod("decode-0", "decode"));
  const std::string old_config = dir_.file("old-kubeconfig");
  fake_.write_kubeconfig(old_config, "fleet");
  fake_.set_token("rotated-token");
  fake_.write_kubeconfig(config_, "fleet");
  std::unique_ptr<Child> refused = kubectl({"get", "pods", "-o", "name"}, old_config);
  EXPECT_NE(refused->wait(kKubectl).value_or(-1), 0);
  // kubectl's words for a 401 (the reason in parentheses differs between its versions).
  EXPECT_NE(refused->errors().find("You must be logged in to the server"), std::string::npos)
      << refused->errors();
  EXPECT_GE(fake_.stats().unauthorized, 1u);
  int code = 0;
  const std::string out = run({"get", "pods", "-o", "json"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("decode-0"), std::string::npos) << out;
}

}  // namespace
}  // namespace kvgate::testing
