// ReferenceIndexer: the definition of the index semantics (docs/index.md), written to be obviously
// correct rather than fast. Every other indexer must give its answers; the exactness harness
// (tests/index/harness/) compares them after every batch.
//
// Per holder it keeps one record per engine hash: the block's sequence hash and its copy count
// on each tier. A holder holds sequence hash S on tier T while any of its records maps to S with
// a copy on T.
//
// Threading: none; externally synchronized (make_synchronized() wraps it).
#pragma once

#include <array>
#include <map>

#include "kvgate/core/block_hash.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index {

class ReferenceIndexer final : public Indexer {
 public:
  explicit ReferenceIndexer(const IndexerOptions& options = {});

  // index::Indexer
  std::string_view name() const override { return "reference"; }
  Concurrency concurrency() const override { return {}; }
  ApplyResult apply(HolderId holder, std::span<const Event> events) override;
  void lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const override;
  void remove_holder(HolderId holder) override;
  IndexStats stats() const override;
  Status memberships(std::vector<Membership>& out) const override;
  Status holder_memberships(HolderId holder, std::vector<Membership>& out) const override;

 private:
  using TierCounts = std::array<uint32_t, kTierCount>;
  struct Record {
    SeqHash seq = 0;
    TierCounts copies{};
  };
  struct Holder {
    std::map<EngineHash, Record> records;
    // Derived from `records`: per sequence hash, how many records map to it with a copy on each
    // tier. An entry exists only while some count is non-zero.
    std::map<SeqHash, TierCounts> held;
  };

  void store(Holder& h, const Event& e, ApplyResult& r);
  void remove(Holder& h, const Event& e, ApplyResult& r);
  void clear(Holder& h);
  // Adds (sign +1) or withdraws (sign -1) a record's contribution to `held` and `resident_`.
  void count(Holder& h, const Record& rec, int sign);
  static void append(HolderId id, const Holder& h, std::vector<Membership>& out);

  BlockHasher hasher_;
  std::map<HolderId, Holder> holders_;    // only holders with at least one record
  std::map<SeqHash, uint32_t> resident_;  // sequence hash -> holders holding it on some tier
};

}  // namespace kvgate::index
