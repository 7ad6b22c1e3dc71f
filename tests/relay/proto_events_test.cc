#include "kvgate/relay/proto_events.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvgate/relay/block_set.h"

namespace kvgate::relay {
namespace {

using index::Event;
using index::EventKind;
using index::Tier;

// A snapshot sent as SnapshotChunk messages, serialized and parsed as a subscriber would, rebuilds
// the same holder: the hashes, parents, tiers and kinds survive the wire.
TEST(ProtoEvents, ASnapshotThroughTheWireRebuildsTheSameBlocks) {
  BlockSet set;
  const std::vector<index::EngineHash> eng = {11, 12, 13, 14};
  const std::vector<LocalHash> loc = {101, 102, 103, 104};
  const std::vector<index::EngineHash> branch = {21};
  const std::vector<LocalHash> branch_loc = {201};
  const std::vector<index::EngineHash> first = {11};
  const std::vector<Event> events = {
      {.kind = EventKind::kStored,
       .tier = Tier::kDevice,
       .engine_hashes = eng,
       .local_hashes = loc},
      {.kind = EventKind::kStored,
       .tier = Tier::kHost,
       .has_parent = true,
       .parent = 12,
       .engine_hashes = branch,
       .local_hashes = branch_loc},
      {.kind = EventKind::kRemoved, .tier = Tier::kDevice, .engine_hashes = first},
  };
  set.apply(events);

  v1::SubscribeResponse chunk;
  set.snapshot([&](const Event& e) { to_proto(e, chunk.mutable_snapshot()->add_events()); }, 2);
  chunk.mutable_snapshot()->set_last(true);
  std::string wire;
  ASSERT_TRUE(chunk.SerializeToString(&wire));
  v1::SubscribeResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  ASSERT_TRUE(parsed.has_snapshot());

  BlockSet rebuilt;
  for (const v1::Event& pe : parsed.snapshot().events()) {
    OwnedEvent owned;
    ASSERT_TRUE(from_proto(pe, &owned).ok());
    const Event e = owned.view();
    const index::ApplyResult r = rebuilt.apply(std::span(&e, 1));
    EXPECT_EQ(r.orphan_events + r.unknown_removals + r.malformed_events, 0u);
  }
  EXPECT_EQ(rebuilt.held(), set.held());
  EXPECT_EQ(rebuilt.copies(), set.copies());
  EXPECT_EQ(rebuilt.ghosts(), set.ghosts());
  // The rebuilt set names each block as the engine does: its later events apply the same.
  const std::vector<index::EngineHash> tail = {14, 21};
  const Event evict_device{
      .kind = EventKind::kRemoved, .tier = Tier::kDevice, .engine_hashes = tail};
  const Event evict_host{.kind = EventKind::kRemoved, .tier = Tier::kHost, .engine_hashes = tail};
  for (const Event& e : {evict_device, evict_host}) {
    EXPECT_EQ(rebuilt.apply(std::span(&e, 1)), set.apply(std::span(&e, 1)));
  }
  EXPECT_EQ(rebuilt.held(), 2u);
}

TEST(ProtoEvents, AKindOrTierThisBuildDoesNotKnowIsAnError) {
  v1::Event e;
  e.set_kind(static_cast<v1::EventKind>(7));
  OwnedEvent out;
  const Status kind = from_proto(e, &out);
  EXPECT_EQ(kind.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(kind.message().find("kind 7"), std::string::npos) << kind;
  e.set_kind(v1::EVENT_KIND_REMOVED);
  e.set_tier(static_cast<v1::Tier>(9));
  EXPECT_EQ(from_proto(e, &out).code(), absl::StatusCode::kInvalidArgument);
  e.set_tier(v1::TIER_HOST);
  EXPECT_TRUE(from_proto(e, &out).ok());
  EXPECT_EQ(out.tier, Tier::kHost);
}

}  // namespace
}  // namespace kvgate::relay
