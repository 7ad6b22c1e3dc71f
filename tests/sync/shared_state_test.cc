#include "kvgate/sync/shared_state.h"

#include <gtest/gtest.h>

namespace kvgate::sync {
namespace {

std::optional<BadValue> decode(std::string_view key, std::string_view value, SharedState& s,
                               size_t limit = 1 << 20) {
  return decode_entry("ns", key, value, limit, s);
}

TEST(SharedState, KeysCarryTheNamespaceAsAHashTag) {
  EXPECT_EQ(key_prefix("prod"), "kvgate:{prod}:");
  EXPECT_EQ(entry_key("prod", EntryKind::kWorker, "http://10.0.0.1:8000"),
            "kvgate:{prod}:worker:http://10.0.0.1:8000");
  EXPECT_EQ(entry_key("prod", EntryKind::kLoad, "gw-a"), "kvgate:{prod}:load:gw-a");
}

TEST(SharedState, EveryKindRoundTrips) {
  WorkerRecord w{.url = "http://10.0.0.1:8000",
                 .kv_endpoints = {{.rank = 1,
                                   .publisher = "tcp://10.0.0.1:5557",
                                   .replay = "tcp://10.0.0.1:5558",
                                   .topic = "kv"}},
                 .added_by = "gw-a",
                 .added_at_ms = 1'700'000'000'123,
                 .role = workers::WorkerRole::kPrefill,
                 .bootstrap_port = 8998};
  Tombstone t{.url = "http://10.0.0.2:8000", .removed_by = "gw-b", .removed_at_ms = 42};
  ReplicaLoad l{.replica = "gw-a",
                .at_ms = 77,
                .workers = {{.url = "http://10.0.0.1:8000",
                             .in_flight = 5,
                             .queued_prompt_tokens = 9000,
                             .ranks = {{0, 2}, {3, 3}},
                             .progress_ms = 1'700'000'000'456}}};
  ReplicaHints h{
      .replica = "gw-a", .at_ms = 78, .workers = {{"http://10.0.0.3:8000", true, false}}};
  ReplicaLimits rl{.replica = "gw-a",
                   .at_ms = 79,
                   .keys = {{.id = "0123456789abcdef", .requests = 2.5, .tokens = 1200},
                            {.id = "fedcba9876543210", .requests = 0, .tokens = 0}}};
  SharedState s;
  EXPECT_FALSE(decode(entry_key("ns", EntryKind::kWorker, w.url), encode(w), s));
  EXPECT_FALSE(decode(entry_key("ns", EntryKind::kTombstone, t.url), encode(t), s));
  EXPECT_FALSE(decode(entry_key("ns", EntryKind::kLoad, l.replica), encode(l), s));
  EXPECT_FALSE(decode(entry_key("ns", EntryKind::kHints, h.replica), encode(h), s));
  EXPECT_FALSE(decode(entry_key("ns", EntryKind::kLimits, rl.replica), encode(rl), s));
  ASSERT_EQ(s.workers.size(), 1u);
  EXPECT_EQ(s.workers[0], w);
  ASSERT_EQ(s.tombstones.size(), 1u);
  EXPECT_EQ(s.tombstones[0], t);
  ASSERT_EQ(s.loads.size(), 1u);
  EXPECT_EQ(s.loads[0].at_ms, 77);
  EXPECT_EQ(s.loads[0].workers, l.workers);
  ASSERT_EQ(s.hints.size(), 1u);
  EXPECT_EQ(s.hints[0].workers, h.workers);
  ASSERT_EQ(s.limits.size(), 1u);
  EXPECT_EQ(s.limits[0].at_ms, 79);
  EXPECT_EQ(s.limits[0].keys, rl.keys);
}

TEST(SharedState, ForeignOrBrokenValuesAreRefusedWithTheirReason) {
  SharedState s;
  const std::string wkey = entry_key("ns", EntryKind::kWorker, "http://h:1");
  EXPECT_EQ(decode("kvgate:{other}:worker:x", "{}", s), BadValue::kUnknownKey);
  EXPECT_EQ(decode("kvgate:{ns}:session:x", "{}", s), BadValue::kUnknownKey);
  EXPECT_EQ(decode("kvgate:{ns}:worker:", "{}", s), BadValue::kUnknownKey);
  EXPECT_EQ(decode(wkey, "\xff\xfe garbage", s), BadValue::kNotJson);
  EXPECT_EQ(decode(wkey, "[1,2]", s), BadValue::kWrongShape);
  EXPECT_EQ(decode(wkey, R"({"v":2,"url":"http://h:1"})", s), BadValue::kWrongShape);
  // The value names another worker than its key.
  WorkerRecord other{.url = "http://elsewhere:1", .added_by = "x", .added_at_ms = 1};
  EXPECT_EQ(decode(wkey, encode(other), s), BadValue::kWrongShape);
  // A negative in-flight count.
  EXPECT_EQ(decode(entry_key("ns", EntryKind::kLoad, "r"),
                   R"({"v":1,"replica":"r","at_ms":1,"workers":[{"url":"u","in_flight":-4,)"
                   R"("queued_prompt_tokens":0,"progress_ms":0,"ranks":[]}]})",
                   s),
            BadValue::kWrongShape);
  // A negative demand, or one that is not a number.
  EXPECT_EQ(
      decode(entry_key("ns", EntryKind::kLimits, "r"),
             R"({"v":1,"replica":"r","at_ms":1,"keys":[{"id":"a","requests":-1,"tokens":0}]})", s),
      BadValue::kWrongShape);
  EXPECT_EQ(
      decode(entry_key("ns", EntryKind::kLimits, "r"),
             R"({"v":1,"replica":"r","at_ms":1,"keys":[{"id":"a","requests":"x","tokens":0}]})", s),
      BadValue::kWrongShape);
  // A role no replica knows.
  EXPECT_EQ(decode(wkey,
                   R"({"v":1,"url":"http://h:1","added_by":"x","added_at_ms":1,"kv_endpoints":[],)"
                   R"("role":"verifier"})",
                   s),
            BadValue::kWrongShape);
  // A record without a role (a replica before roles) is a regular worker's.
  SharedState old;
  EXPECT_FALSE(decode(
      wkey, R"({"v":1,"url":"http://h:1","added_by":"x","added_at_ms":1,"kv_endpoints":[]})", old));
  ASSERT_EQ(old.workers.size(), 1u);
  EXPECT_EQ(old.workers[0].role, workers::WorkerRole::kRegular);
  WorkerRecord ok{.url = "http://h:1", .added_by = "x", .added_at_ms = 1};
  EXPECT_EQ(decode(wkey, encode(ok), s, 10), BadValue::kTooLarge);
  EXPECT_TRUE(s.workers.empty());
  EXPECT_TRUE(s.loads.empty());
  EXPECT_TRUE(s.limits.empty());
}

TEST(SharedState, ATombstoneShadowsOnlyOlderAdds) {
  SharedState s;
  s.workers = {{.url = "a", .added_at_ms = 100},
               {.url = "b", .added_at_ms = 300},
               {.url = "c", .added_at_ms = 100}};
  s.tombstones = {{.url = "a", .removed_at_ms = 200},
                  {.url = "b", .removed_at_ms = 200},
                  {.url = "c", .removed_at_ms = 100}};
  const auto live = live_workers(s);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0]->url, "b");  // added again after its removal
}

}  // namespace
}  // namespace kvgate::sync
