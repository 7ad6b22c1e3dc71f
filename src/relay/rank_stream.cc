#include "kvgate/relay/rank_stream.h"

#include <algorithm>
#include <random>
#include <utility>

#include "kvgate/relay/proto_events.h"

namespace kvgate::relay {

uint64_t new_epoch_id() {
  static Mutex mu;
  static std::mt19937_64 rng KVGATE_GUARDED_BY(mu){std::random_device{}()};
  MutexLock lock(&mu);
  uint64_t id = 0;
  while (id == 0) id = rng();
  return id;
}

RankStream::RankStream(HistoryLimits limits, uint64_t hash_seed)
    : limits_(limits), blocks_(hash_seed) {
  MutexLock lock(&mu_);
  start_epoch(false);
}

void RankStream::start_epoch(bool degraded) {
  epoch_ = new_epoch_id();
  degraded_ = degraded;
  complete_ = true;
  last_seq_.reset();
  history_.clear();
  history_bytes_ = 0;
  blocks_.clear();
}

void RankStream::append(const RankBatch& batch) {
  std::vector<std::pair<uint64_t, std::function<void()>>> wake;
  {
    MutexLock lock(&mu_);
    if (batch.new_epoch) start_epoch(batch.degraded);
    // Within an epoch seqs are consecutive; a batch that is not the next one is a gap the
    // caller's cursor did not report: the history cannot be continued across it.
    if (last_seq_ && batch.seq != *last_seq_ + 1) start_epoch(true);
    blocks_.apply(batch.events);
    // A clear makes the set exact again: the engine holds nothing the relay missed.
    if (std::any_of(batch.events.begin(), batch.events.end(),
                    [](const index::Event& e) { return e.kind == index::EventKind::kCleared; })) {
      degraded_ = false;
    }
    auto message = std::make_shared<v1::SubscribeResponse>();
    v1::EventBatch* b = message->mutable_batch();
    b->set_epoch(epoch_);
    b->set_seq(batch.seq);
    b->set_engine_ts(batch.engine_ts);
    for (const index::Event& e : batch.events) to_proto(e, b->add_events());
    *b->mutable_load() = load_;
    // The memory the message holds, not its wire size: decoded, a batch takes about four times
    // its encoded bytes, and the flag bounds the relay's memory.
    const size_t bytes = message->SpaceUsedLong();
    history_.push_back({batch.seq, bytes, std::move(message)});
    history_bytes_ += bytes;
    last_seq_ = batch.seq;
    trim();
    ++version_;
    wake.swap(waiters_);
  }
  for (auto& [token, fn] : wake) fn();
}

void RankStream::restart(bool degraded) {
  std::vector<std::pair<uint64_t, std::function<void()>>> wake;
  {
    MutexLock lock(&mu_);
    start_epoch(degraded);
    ++version_;
    wake.swap(waiters_);
  }
  for (auto& [token, fn] : wake) fn();
}

void RankStream::trim() {
  while (history_.size() > 1 &&
         (history_.size() > limits_.max_batches || history_bytes_ > limits_.max_bytes)) {
    history_bytes_ -= history_.front().bytes;
    history_.pop_front();
    complete_ = false;
  }
}

void RankStream::set_load(const v1::Load& load) {
  MutexLock lock(&mu_);
  load_ = load;
}

uint64_t RankStream::oldest_seq() const {
  return history_.empty() ? (last_seq_ ? *last_seq_ + 1 : 0) : history_.front().seq;
}

void RankStream::out_of_range(Cursor& cursor, v1::OutOfRange::Reason reason,
                              std::vector<Message>* out) {
  auto oor = std::make_shared<v1::SubscribeResponse>();
  v1::OutOfRange* o = oor->mutable_out_of_range();
  o->set_reason(reason);
  o->set_requested_seq(cursor.next_seq);
  o->set_oldest_seq(oldest_seq());
  o->set_epoch(epoch_);
  out->push_back(std::move(oor));
  // Every batch and every new epoch moves the version: a snapshot at this version is this state.
  if (snapshot_.empty() || snapshot_version_ != version_) {
    // (Locals: the lambdas below are outside the lock analysis.)
    const uint64_t epoch = epoch_;
    const std::optional<uint64_t> seq = last_seq_;
    const size_t chunk_blocks = limits_.snapshot_chunk_blocks;
    std::vector<Message> chunks;
    std::shared_ptr<v1::SubscribeResponse> chunk;
    size_t blocks = 0;
    const auto start_chunk = [&] {
      chunk = std::make_shared<v1::SubscribeResponse>();
      chunk->mutable_snapshot()->set_epoch(epoch);
      chunk->mutable_snapshot()->set_seq(seq.value_or(0));
      chunk->mutable_snapshot()->set_has_seq(seq.has_value());
      blocks = 0;
    };
    start_chunk();
    blocks_.snapshot(
        [&](const index::Event& e) {
          if (blocks + e.engine_hashes.size() > chunk_blocks && blocks > 0) {
            chunks.push_back(std::move(chunk));
            start_chunk();
          }
          to_proto(e, chunk->mutable_snapshot()->add_events());
          blocks += e.engine_hashes.size();
        },
        std::max<size_t>(1, std::min<size_t>(chunk_blocks, 1024)));
    chunk->mutable_snapshot()->set_last(true);
    chunk->mutable_snapshot()->set_blocks(blocks_.copies());
    chunks.push_back(std::move(chunk));
    snapshot_ = std::move(chunks);
    snapshot_version_ = version_;
  }
  out->insert(out->end(), snapshot_.begin(), snapshot_.end());
  cursor.epoch = epoch_;
  cursor.await_first = !last_seq_.has_value();
  cursor.next_seq = last_seq_ ? *last_seq_ + 1 : 0;
  cursor.served = true;
}

std::vector<RankStream::Message> RankStream::next(Cursor& cursor, size_t max_batches) {
  std::vector<Message> out;
  MutexLock lock(&mu_);
  if (cursor.epoch == 0) {
    if (!complete_) {
      out_of_range(cursor, v1::OutOfRange::REASON_FRESH, &out);
      return out;
    }
    cursor.epoch = epoch_;
    cursor.await_first = history_.empty();
    cursor.next_seq = history_.empty() ? 0 : history_.front().seq;
  } else if (cursor.epoch != epoch_) {
    out_of_range(cursor, v1::OutOfRange::REASON_OTHER_EPOCH, &out);
    return out;
  }
  if (cursor.await_first) {
    if (history_.empty()) return out;
    if (!complete_) {  // trimmed before this subscriber read anything
      out_of_range(cursor, v1::OutOfRange::REASON_FELL_BEHIND, &out);
      return out;
    }
    cursor.await_first = false;
    cursor.next_seq = history_.front().seq;
  }
  if (cursor.next_seq < oldest_seq()) {
    out_of_range(
        cursor,
        cursor.served ? v1::OutOfRange::REASON_FELL_BEHIND : v1::OutOfRange::REASON_BEFORE_HISTORY,
        &out);
    return out;
  }
  if (!last_seq_ || cursor.next_seq > *last_seq_ + 1) {
    out_of_range(cursor, v1::OutOfRange::REASON_AHEAD, &out);
    return out;
  }
  const size_t from = static_cast<size_t>(cursor.next_seq - history_.front().seq);
  for (size_t i = from; i < history_.size() && out.size() < max_batches; ++i) {
    out.push_back(history_[i].message);
  }
  cursor.next_seq += out.size();
  if (!out.empty()) cursor.served = true;
  return out;
}

RankStream::Message RankStream::heartbeat(const Cursor& cursor) const {
  auto m = std::make_shared<v1::SubscribeResponse>();
  MutexLock lock(&mu_);
  const bool caught_up = cursor.epoch == epoch_ &&
                         (!last_seq_ || (!cursor.await_first && cursor.next_seq == *last_seq_ + 1));
  if (!caught_up) return nullptr;
  v1::Heartbeat* h = m->mutable_heartbeat();
  h->set_epoch(epoch_);
  if (last_seq_) {
    h->set_has_last_seq(true);
    h->set_last_seq(*last_seq_);
  }
  *h->mutable_load() = load_;
  return m;
}

std::optional<uint64_t> RankStream::notify_once(uint64_t seen_version, std::function<void()> wake) {
  MutexLock lock(&mu_);
  if (seen_version != version_) return std::nullopt;
  const uint64_t token = next_token_++;
  waiters_.emplace_back(token, std::move(wake));
  return token;
}

void RankStream::cancel(uint64_t token) {
  MutexLock lock(&mu_);
  std::erase_if(waiters_, [&](const auto& w) { return w.first == token; });
}

uint64_t RankStream::version() const {
  MutexLock lock(&mu_);
  return version_;
}

void RankStream::describe(v1::RankInfo* out) const {
  MutexLock lock(&mu_);
  out->set_epoch(epoch_);
  if (last_seq_) {
    out->set_has_last_seq(true);
    out->set_last_seq(*last_seq_);
  }
  out->set_oldest_seq(oldest_seq());
  out->set_history_batches(history_.size());
  out->set_history_bytes(history_bytes_);
  out->set_blocks(blocks_.copies());
  out->set_degraded(degraded_);
}

}  // namespace kvgate::relay
