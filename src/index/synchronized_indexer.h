// SynchronizedIndexer: makes an externally synchronized indexer safe from any thread.
//
// Threading: lookup(), stats() and the membership dumps share a reader lock (kvgate::Mutex);
// apply() and remove_holder() take it exclusively, so a write applied before a lookup starts is
// visible to it and a lookup never sees half a batch. Writers of different holders serialize.
#pragma once

#include <memory>

#include "kvgate/core/thread_annotations.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index {

class SynchronizedIndexer final : public Indexer {
 public:
  explicit SynchronizedIndexer(std::unique_ptr<Indexer> inner);

  // index::Indexer
  std::string_view name() const override { return name_; }
  Concurrency concurrency() const override { return {true, true}; }
  ApplyResult apply(HolderId holder, std::span<const Event> events) override;
  void lookup(std::span<const SeqHash> chain, std::vector<HolderMatch>& out) const override;
  void remove_holder(HolderId holder) override;
  void expect_capacity(HolderId holder, uint64_t blocks) override;
  IndexStats stats() const override;
  Status memberships(std::vector<Membership>& out) const override;
  Status holder_memberships(HolderId holder, std::vector<Membership>& out) const override;

 private:
  const std::string_view name_;  // the inner indexer's (a literal with static storage)
  mutable Mutex mu_;
  std::unique_ptr<Indexer> inner_ KVGATE_PT_GUARDED_BY(mu_);
};

}  // namespace kvgate::index
