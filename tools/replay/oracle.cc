#include "replay/oracle.h"

#include <algorithm>

#include "kvgate/core/clock.h"
#include "kvgate/core/ids.h"
#include "kvgate/events/ingest.h"
#include "kvgate/index/indexer.h"
#include "kvgate/metrics/metrics.h"

namespace kvgate::replay {

uint64_t reusable_tokens(uint64_t matched_blocks, uint64_t prompt_tokens, uint32_t block_size) {
  if (prompt_tokens == 0 || block_size == 0) return 0;
  const uint64_t max_blocks = (prompt_tokens - 1) / block_size;
  return std::min(matched_blocks, max_blocks) * block_size;
}

class EventOracle::Impl {
 public:
  explicit Impl(OracleOptions o) : options_(o), hasher_(o.hash_seed) {}
  ~Impl() {
    if (ingest_) ingest_->stop();
  }

  Status init(const std::vector<KvStream>& streams) {
    auto idx = index::make_indexer(index::IndexKind::kChain, {.hash_seed = options_.hash_seed});
    if (!idx.ok()) return idx.status();
    index_ = index::make_synchronized(std::move(*idx));
    events::IngestOptions io;
    io.event_threads = 1;
    io.lanes = 1;
    io.subscription.hash_seed = options_.hash_seed;
    ingest_ = std::make_unique<events::EventIngest>(*index_, registry_, Clock::real(), io);
    // One WorkerId per distinct URL, in order of appearance.
    for (const KvStream& s : streams) {
      auto it = std::find(urls_.begin(), urls_.end(), s.worker_url);
      const size_t w = static_cast<size_t>(it - urls_.begin());
      if (it == urls_.end()) urls_.push_back(s.worker_url);
      events::SubscriptionSpec spec;
      spec.key = HolderKey{WorkerId(static_cast<uint32_t>(w)), s.dp_rank};
      spec.holder = HolderId(static_cast<uint32_t>(keys_.size()));
      spec.worker_name = s.worker_url;
      spec.endpoint = s.endpoint;
      spec.replay_endpoint = s.replay_endpoint;
      spec.topic = s.topic;
      if (Status st = ingest_->add(spec); !st.ok()) {
        return absl::InvalidArgumentError("oracle: cannot subscribe to " + s.endpoint + " (" +
                                          s.worker_url + "): " + std::string(message_of(st)));
      }
      keys_.push_back(spec.key);
    }
    return Status();
  }

  uint64_t lookup(std::span<const TokenId> prompt, std::vector<WorkerTokens>* per_worker) const {
    thread_local std::vector<SeqHash> chain;
    thread_local std::vector<index::HolderMatch> matches;
    chain.clear();
    hasher_.hash_blocks(prompt, options_.block_size, nullptr, &chain);
    index_->lookup(chain, matches);
    uint64_t best = 0;
    if (per_worker != nullptr) per_worker->clear();
    for (const auto& m : matches) {
      best = std::max<uint64_t>(best, m.device_depth);
      if (per_worker == nullptr || m.device_depth == 0 || m.holder.value() >= keys_.size()) {
        continue;
      }
      const HolderKey& key = keys_[m.holder.value()];
      const auto t = static_cast<uint32_t>(
          reusable_tokens(m.device_depth, prompt.size(), options_.block_size));
      per_worker->push_back({key.worker.value(), key.rank, t});
    }
    return reusable_tokens(best, prompt.size(), options_.block_size);
  }

  const std::string& worker_url(uint32_t w) const { return urls_.at(w); }
  bool follows(std::string_view url) const {
    return std::find(urls_.begin(), urls_.end(), url) != urls_.end();
  }

  OracleStats stats() const {
    OracleStats s;
    s.holders = keys_.size();
    for (const HolderKey& k : keys_) {
      auto st = ingest_->state(k);
      if (!st) continue;
      s.applied_batches += st->applied_batches;
      s.gaps += st->cursor.gaps;
      for (uint64_t r : st->cursor.resyncs) s.resyncs += r;
      s.backlogged += st->backlogged;
      s.degraded_holders += st->degraded ? 1 : 0;
    }
    s.resident_blocks = index_->stats().resident_blocks;
    return s;
  }

  uint32_t block_size() const { return options_.block_size; }

 private:
  OracleOptions options_;
  BlockHasher hasher_;
  metrics::Registry registry_;
  std::unique_ptr<index::Indexer> index_;
  std::unique_ptr<events::EventIngest> ingest_;
  std::vector<HolderKey> keys_;    // by HolderId
  std::vector<std::string> urls_;  // by WorkerId
};

EventOracle::EventOracle(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EventOracle::~EventOracle() = default;

Result<std::unique_ptr<EventOracle>> EventOracle::start(const std::vector<KvStream>& streams,
                                                        OracleOptions options) {
  if (options.block_size == 0) return absl::InvalidArgumentError("oracle: block size 0");
  if (streams.empty()) return absl::InvalidArgumentError("oracle: no KV event streams to follow");
  auto impl = std::make_unique<Impl>(options);
  if (Status s = impl->init(streams); !s.ok()) return s;
  return std::unique_ptr<EventOracle>(new EventOracle(std::move(impl)));
}

uint64_t EventOracle::lookup(std::span<const TokenId> prompt,
                             std::vector<WorkerTokens>* per_worker) const {
  return impl_->lookup(prompt, per_worker);
}
const std::string& EventOracle::worker_url(uint32_t worker) const {
  return impl_->worker_url(worker);
}
bool EventOracle::follows(std::string_view url) const { return impl_->follows(url); }
OracleStats EventOracle::stats() const { return impl_->stats(); }
uint32_t EventOracle::block_size() const { return impl_->block_size(); }

}  // namespace kvgate::replay
