// InstrumentedIndex: the index as routing reads it, with each lookup counted and timed into the
// gateway's metrics (kvgate_index_lookups_total, kvgate_index_lookup_seconds). Writes go to the
// wrapped index directly (the event lanes hold it), so they are forwarded untimed.
//
// Threading: as the wrapped index.
#pragma once

#include "app/gateway_metrics.h"
#include "kvgate/core/clock.h"
#include "kvgate/index/indexer.h"

namespace kvgate::app {

class InstrumentedIndex final : public index::Indexer {
 public:
  InstrumentedIndex(index::Indexer& inner, GatewayMetrics& metrics, const Clock& clock)
      : inner_(inner), metrics_(metrics), clock_(clock) {}

  // index::Indexer
  std::string_view name() const override { return inner_.name(); }
  index::Concurrency concurrency() const override { return inner_.concurrency(); }
  index::ApplyResult apply(HolderId holder, std::span<const index::Event> events) override {
    return inner_.apply(holder, events);
  }
  void lookup(std::span<const SeqHash> chain, std::vector<index::HolderMatch>& out) const override {
    const MonoTime t0 = clock_.now();
    inner_.lookup(chain, out);
    metrics_.lookups().add();
    metrics_.lookup_seconds().observe(to_seconds(clock_.now() - t0));
  }
  void remove_holder(HolderId holder) override { inner_.remove_holder(holder); }
  void expect_capacity(HolderId holder, uint64_t blocks) override {
    inner_.expect_capacity(holder, blocks);
  }
  index::IndexStats stats() const override { return inner_.stats(); }

 private:
  index::Indexer& inner_;
  GatewayMetrics& metrics_;
  const Clock& clock_;
};

}  // namespace kvgate::app
