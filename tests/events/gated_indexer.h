// An indexer whose apply() can be held, to fill a lane queue: wraps another indexer.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string_view>
#include <vector>

#include "kvgate/index/indexer.h"

namespace kvgate::events::testing {

class GatedIndexer final : public index::Indexer {
 public:
  explicit GatedIndexer(index::Indexer& inner) : inner_(inner) {}
  void hold(bool h) {
    std::lock_guard<std::mutex> l(mu_);
    held_ = h;
    cv_.notify_all();
  }
  // Whether an apply() is waiting for the hold to end.
  bool waiting() {
    std::lock_guard<std::mutex> l(mu_);
    return waiting_;
  }
  std::string_view name() const override { return "gated"; }
  index::Concurrency concurrency() const override { return inner_.concurrency(); }
  index::ApplyResult apply(HolderId h, std::span<const index::Event> events) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      waiting_ = held_;
      cv_.wait(l, [&] { return !held_; });
      waiting_ = false;
    }
    return inner_.apply(h, events);
  }
  void lookup(std::span<const SeqHash> chain, std::vector<index::HolderMatch>& out) const override {
    inner_.lookup(chain, out);
  }
  void remove_holder(HolderId h) override { inner_.remove_holder(h); }
  index::IndexStats stats() const override { return inner_.stats(); }

 private:
  index::Indexer& inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool waiting_ = false;
};

}  // namespace kvgate::events::testing
