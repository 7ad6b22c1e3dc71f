// A relay subscriber as a gateway is one, for tests: applies what a RankStream sends to an index
// of its own, checking that batches come in order without a gap or a repeat.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "kvgate/index/indexer.h"
#include "kvgate/relay/proto_events.h"
#include "kvgate/relay/rank_stream.h"

namespace kvgate::relay::testing {

using Message = RankStream::Message;
using Cursor = RankStream::Cursor;
inline constexpr HolderId kHolder{0};

inline std::unique_ptr<index::Indexer> reference() {
  auto made = index::make_indexer(index::IndexKind::kReference);
  EXPECT_TRUE(made.ok());
  return std::move(*made);
}

inline std::vector<index::Membership> content(const index::Indexer& idx) {
  std::vector<index::Membership> out;
  EXPECT_TRUE(idx.memberships(out).ok());
  return out;
}

// Appends batch `seq` to `s`: one block stored on the device tier, starting a sequence.
inline void append_block(RankStream& s, uint64_t seq, index::EngineHash eng, LocalHash local) {
  const index::Event e{.kind = index::EventKind::kStored,
                       .tier = index::Tier::kDevice,
                       .engine_hashes = std::span(&eng, 1),
                       .local_hashes = std::span(&local, 1)};
  s.append({.seq = seq, .events = std::span(&e, 1)});
}

// A subscriber as a gateway is one: applies what the stream sends to its own index.
struct TestSubscriber {
  std::unique_ptr<index::Indexer> idx = reference();
  Cursor cursor;
  uint64_t batches = 0, snapshots = 0;
  std::vector<v1::OutOfRange::Reason> reasons;
  std::optional<uint64_t> last_seq;

  void apply(const v1::Event& pe) {
    OwnedEvent owned;
    ASSERT_TRUE(from_proto(pe, &owned).ok());
    const index::Event e = owned.view();
    idx->apply(kHolder, std::span(&e, 1));
  }
  void consume(const std::vector<Message>& messages) {
    for (const Message& m : messages) {
      switch (m->kind_case()) {
        case v1::SubscribeResponse::kOutOfRange:
          reasons.push_back(m->out_of_range().reason());
          idx->remove_holder(kHolder);  // the snapshot rebuilds it from nothing
          ++snapshots;
          break;
        case v1::SubscribeResponse::kSnapshot:
          for (const v1::Event& e : m->snapshot().events()) apply(e);
          if (m->snapshot().last()) {
            last_seq = m->snapshot().has_seq() ? std::optional(m->snapshot().seq()) : std::nullopt;
          }
          break;
        case v1::SubscribeResponse::kBatch:
          if (last_seq) {
            ASSERT_EQ(m->batch().seq(), *last_seq + 1) << "no gap, no repeat";
          }
          last_seq = m->batch().seq();
          for (const v1::Event& e : m->batch().events()) apply(e);
          ++batches;
          break;
        default:
          FAIL() << "unexpected message";
      }
    }
  }
  void drain(RankStream& s, size_t per_read = 64) {
    for (;;) {
      auto got = s.next(cursor, per_read);
      if (got.empty()) return;
      consume(got);
    }
  }
};

}  // namespace kvgate::relay::testing
