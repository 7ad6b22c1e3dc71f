#include "index/synchronized_indexer.h"

namespace kvgate::index {

SynchronizedIndexer::SynchronizedIndexer(std::unique_ptr<Indexer> inner)
    : name_(inner->name()), inner_(std::move(inner)) {}

ApplyResult SynchronizedIndexer::apply(HolderId holder, std::span<const Event> events) {
  MutexLock lock(&mu_);
  return inner_->apply(holder, events);
}

void SynchronizedIndexer::lookup(std::span<const SeqHash> chain,
                                 std::vector<HolderMatch>& out) const {
  ReaderMutexLock lock(&mu_);
  inner_->lookup(chain, out);
}

void SynchronizedIndexer::remove_holder(HolderId holder) {
  MutexLock lock(&mu_);
  inner_->remove_holder(holder);
}

void SynchronizedIndexer::expect_capacity(HolderId holder, uint64_t blocks) {
  MutexLock lock(&mu_);
  inner_->expect_capacity(holder, blocks);
}

IndexStats SynchronizedIndexer::stats() const {
  ReaderMutexLock lock(&mu_);
  return inner_->stats();
}

Status SynchronizedIndexer::memberships(std::vector<Membership>& out) const {
  ReaderMutexLock lock(&mu_);
  return inner_->memberships(out);
}

Status SynchronizedIndexer::holder_memberships(HolderId holder,
                                               std::vector<Membership>& out) const {
  ReaderMutexLock lock(&mu_);
  return inner_->holder_memberships(holder, out);
}

std::unique_ptr<Indexer> make_synchronized(std::unique_ptr<Indexer> inner) {
  const Concurrency c = inner->concurrency();
  if (c.lookups_concurrent_with_writes && c.writers_per_holder) return inner;
  return std::make_unique<SynchronizedIndexer>(std::move(inner));
}

}  // namespace kvgate::index
