// The API's pod JSON as the watcher reads it (phase, conditions, deletionTimestamp, fields that a
// new pod lacks), watch event lines, pod lists, and the watcher's small parts: the pod set, the
// request targets and the backoff.
#include <string>

#include "gtest/gtest.h"
#include "kube/pod_json.h"
#include "kube/pod_set.h"
#include "kube/requests.h"

namespace kvgate::kube::detail {
namespace {

constexpr std::string_view kServingPod = R"({
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {"name": "engine-0", "namespace": "fleet", "uid": "u-1",
               "resourceVersion": "1042",
               "labels": {"app": "engine", "role": "decode"},
               "annotations": {"kvgate.dev/port": "8000"}},
  "spec": {"containers": [{"name": "vllm"}]},
  "status": {"phase": "Running", "podIP": "10.0.0.7",
             "conditions": [{"type": "Initialized", "status": "True"},
                            {"type": "Ready", "status": "True"},
                            {"type": "ContainersReady", "status": "True"}]}})";

TEST(PodJsonTest, AServingPod) {
  Result<Pod> pod = parse_pod(kServingPod);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->name, "engine-0");
  EXPECT_EQ(pod->namespace_name, "fleet");
  EXPECT_EQ(pod->uid, "u-1");
  EXPECT_EQ(pod->resource_version, "1042");
  EXPECT_EQ(pod->ip, "10.0.0.7");
  EXPECT_EQ(pod->labels,
            (std::map<std::string, std::string>{{"app", "engine"}, {"role", "decode"}}));
  EXPECT_EQ(pod->annotations.at("kvgate.dev/port"), "8000");
  EXPECT_TRUE(pod->running);
  EXPECT_TRUE(pod->ready);
  EXPECT_FALSE(pod->deleting);
  EXPECT_TRUE(pod->serving());
}

TEST(PodJsonTest, PhaseReadyAndDeletionEachDecideServing) {
  const auto with_status = [](std::string_view status, std::string_view extra_metadata = "") {
    return "{\"metadata\":{\"name\":\"p\"" + std::string(extra_metadata) +
           "},\"status\":" + std::string(status) + "}";
  };
  const std::string ready = R"([{"type":"Ready","status":"True"}])";
  Result<Pod> pending = parse_pod(
      with_status(R"({"phase":"Pending","podIP":"10.0.0.1","conditions":)" + ready + "}"));
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_FALSE(pending->running);
  EXPECT_FALSE(pending->serving());

  Result<Pod> not_ready = parse_pod(with_status(
      R"({"phase":"Running","podIP":"10.0.0.1","conditions":[{"type":"Ready","status":"False"}]})"));
  ASSERT_TRUE(not_ready.ok()) << not_ready.status();
  EXPECT_TRUE(not_ready->running);
  EXPECT_FALSE(not_ready->ready);
  EXPECT_FALSE(not_ready->serving());

  Result<Pod> unknown = parse_pod(with_status(
      R"({"phase":"Running","podIP":"10.0.0.1","conditions":[{"type":"Ready","status":"Unknown"}]})"));
  ASSERT_TRUE(unknown.ok());
  EXPECT_FALSE(unknown->ready);

  Result<Pod> no_ip = parse_pod(with_status(R"({"phase":"Running","conditions":)" + ready + "}"));
  ASSERT_TRUE(no_ip.ok());
  EXPECT_TRUE(no_ip->ready);
  EXPECT_FALSE(no_ip->serving()) << "no IP yet";

  Result<Pod> terminating =
      parse_pod(with_status(R"({"phase":"Running","podIP":"10.0.0.1","conditions":)" + ready + "}",
                            R"(,"deletionTimestamp":"2026-01-01T00:00:00Z")"));
  ASSERT_TRUE(terminating.ok());
  EXPECT_TRUE(terminating->deleting);
  EXPECT_TRUE(terminating->ready);
  EXPECT_FALSE(terminating->serving()) << "a terminating pod takes no new requests";

  Result<Pod> null_deletion =
      parse_pod(with_status(R"({"phase":"Running"})", R"(,"deletionTimestamp":null)"));
  ASSERT_TRUE(null_deletion.ok());
  EXPECT_FALSE(null_deletion->deleting);
}

TEST(PodJsonTest, ANewPodLacksMostFields) {
  Result<Pod> bare = parse_pod(R"({"metadata":{"name":"fresh"}})");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->name, "fresh");
  EXPECT_TRUE(bare->namespace_name.empty());
  EXPECT_TRUE(bare->labels.empty());
  EXPECT_FALSE(bare->running);
  EXPECT_FALSE(bare->ready);
  EXPECT_FALSE(bare->serving());

  Result<Pod> nulls = parse_pod(
      R"({"metadata":{"name":"n","labels":null,"annotations":null},"status":{"phase":null,"conditions":null}})");
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  EXPECT_TRUE(nulls->labels.empty());
  EXPECT_FALSE(nulls->running);
}

TEST(PodJsonTest, MalformedPodsAreRefusedWithTheField) {
  const auto error = [](std::string_view json) {
    Result<Pod> p = parse_pod(json);
    EXPECT_FALSE(p.ok()) << json;
    return p.ok() ? std::string() : std::string(p.status().message());
  };
  EXPECT_NE(error("not json").find("not JSON"), std::string::npos);
  EXPECT_NE(error("[1]").find("not an object"), std::string::npos);
  EXPECT_NE(error(R"({"status":{}})").find("no metadata"), std::string::npos);
  EXPECT_NE(error(R"({"metadata":{}})").find("metadata.name is missing"), std::string::npos);
  EXPECT_NE(error(R"({"metadata":{"name":7}})").find("metadata.name is not a string"),
            std::string::npos);
  EXPECT_NE(error(R"({"metadata":{"name":"p","labels":{"a":1}}})").find("metadata.labels.a"),
            std::string::npos);
  EXPECT_NE(error(R"({"metadata":{"name":"p"},"status":{"conditions":{}}})")
                .find("status.conditions is not an array"),
            std::string::npos);
  EXPECT_NE(error(R"({"metadata":{"name":"p"},"status":{"podIP":[]}})").find("status.podIP"),
            std::string::npos);
}

// A line of a watch stream, with the padding the watcher's buffer keeps past it.
Status parse_line(simdjson::dom::parser& parser, std::string_view line, WatchEvent* out) {
  std::string padded(line);
  padded.reserve(line.size() + simdjson::SIMDJSON_PADDING);
  return parse_watch_event(parser, padded.data(), line.size(), out);
}

TEST(PodJsonTest, WatchEvents) {
  simdjson::dom::parser parser;
  WatchEvent e;
  const std::string added = "{\"type\":\"ADDED\",\"object\":" + std::string(kServingPod) + "}";
  ASSERT_TRUE(parse_line(parser, added, &e).ok());
  EXPECT_EQ(e.type, WatchEvent::Type::kAdded);
  EXPECT_EQ(e.pod.name, "engine-0");
  EXPECT_EQ(e.resource_version, "1042");

  ASSERT_TRUE(
      parse_line(
          parser,
          R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"2000"}}})",
          &e)
          .ok());
  EXPECT_EQ(e.type, WatchEvent::Type::kBookmark);
  EXPECT_EQ(e.resource_version, "2000");

  ASSERT_TRUE(parse_line(parser,
                         R"j({"type":"ERROR","object":{"kind":"Status","status":"Failure",)j"
                         R"j("message":"too old resource version: 5 (9)","reason":"Expired",)j"
                         R"j("code":410}})j",
                         &e)
                  .ok());
  EXPECT_EQ(e.type, WatchEvent::Type::kError);
  EXPECT_EQ(e.code, 410);
  EXPECT_EQ(e.message, "Expired: too old resource version: 5 (9)");

  EXPECT_FALSE(parse_line(parser, R"({"type":"SYNC","object":{}})", &e).ok());
  EXPECT_FALSE(parse_line(parser, R"({"object":{}})", &e).ok());
  EXPECT_FALSE(parse_line(parser, R"({"type":"ADDED"})", &e).ok());
  EXPECT_FALSE(parse_line(parser, R"({"type":"ADDED","object":{"metadata":{}}})", &e).ok());
  EXPECT_FALSE(parse_line(parser, R"({"type":"ADDED","obj)", &e).ok());
}

TEST(PodJsonTest, PodLists) {
  simdjson::dom::parser parser;
  Result<PodList> list =
      parse_pod_list(parser, R"({"kind":"PodList","metadata":{"resourceVersion":"77"},"items":[)" +
                                 std::string(kServingPod) + R"(,{"metadata":{"name":"b"}}]})");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->resource_version, "77");
  ASSERT_EQ(list->pods.size(), 2u);
  EXPECT_EQ(list->pods[1].name, "b");

  Result<PodList> empty =
      parse_pod_list(parser, R"({"metadata":{"resourceVersion":"5"},"items":null})");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->pods.empty());

  EXPECT_FALSE(parse_pod_list(parser, R"({"items":[]})").ok()) << "no resourceVersion";
  Result<PodList> bad_item =
      parse_pod_list(parser, R"({"metadata":{"resourceVersion":"5"},"items":[{"metadata":{}}]})");
  ASSERT_FALSE(bad_item.ok());
  EXPECT_NE(std::string(bad_item.status().message()).find("a pod in the list"), std::string::npos);
}

Pod named(std::string ns, std::string name, std::string ip = "") {
  Pod p;
  p.namespace_name = std::move(ns);
  p.name = std::move(name);
  p.ip = std::move(ip);
  return p;
}

TEST(PodSetTest, UpsertReplacesByNamespaceAndName) {
  PodSet set;
  set.upsert(named("a", "p", "1"));
  set.upsert(named("b", "p", "2"));
  set.upsert(named("a", "p", "3"));
  ASSERT_EQ(set.size(), 2u);
  EXPECT_FALSE(set.erase("c", "p"));
  EXPECT_TRUE(set.erase("a", "p"));
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.pods()[0].ip, "2");
}

TEST(PodSetTest, EraseKeepsTheIndexOfTheMovedPod) {
  PodSet set;
  for (int i = 0; i < 5; ++i) set.upsert(named("ns", "p" + std::to_string(i)));
  EXPECT_TRUE(set.erase("ns", "p1"));  // p4 moves into the hole
  EXPECT_TRUE(set.erase("ns", "p4"));
  EXPECT_FALSE(set.erase("ns", "p4"));
  set.upsert(named("ns", "p3", "new"));
  ASSERT_EQ(set.size(), 3u);
  for (const Pod& p : set.pods()) EXPECT_EQ(p.ip, p.name == "p3" ? "new" : "");
  set.replace({named("x", "only")});
  ASSERT_EQ(set.size(), 1u);
  EXPECT_FALSE(set.erase("ns", "p0"));
}

TEST(RequestsTest, TargetsEscapeTheSelector) {
  EXPECT_EQ(list_target("fleet", ""), "/api/v1/namespaces/fleet/pods");
  EXPECT_EQ(list_target("", "app=engine,role in (a,b)"),
            "/api/v1/pods?labelSelector=app%3Dengine%2Crole%20in%20%28a%2Cb%29");
  EXPECT_EQ(watch_target("fleet", "app=x", "42", std::chrono::seconds(300)),
            "/api/v1/namespaces/fleet/pods?watch=1&allowWatchBookmarks=true&resourceVersion=42"
            "&timeoutSeconds=300&labelSelector=app%3Dx");
}

TEST(RequestsTest, BackoffIsJitteredUnderADoublingCeiling) {
  Backoff b(std::chrono::milliseconds(100), std::chrono::milliseconds(1000), 7);
  for (int64_t ceiling : {100, 200, 400, 800, 1000, 1000}) {
    const auto d = b.next();
    EXPECT_GE(d.count(), 0);
    EXPECT_LE(d.count(), ceiling);
  }
  b.reset();
  EXPECT_LE(b.next().count(), 100);
  // Full jitter: the waits spread over the whole range.
  Backoff spread(std::chrono::milliseconds(1000), std::chrono::milliseconds(1000), 11);
  int64_t low = 1000, high = 0;
  for (int i = 0; i < 200; ++i) {
    const int64_t d = spread.next().count();
    low = std::min(low, d);
    high = std::max(high, d);
  }
  EXPECT_LT(low, 200);
  EXPECT_GT(high, 800);
}

}  // namespace
}  // namespace kvgate::kube::detail
