// Churn: does the chain index stay fast while conversations grow, decode and get evicted for a long
// time? (A chain index that splits runs at every decode tail degrades until a lookup walks dozens
// of runs.)
//
// Holders run prefix-caching KV pools with LRU eviction (tails first). Sessions are multi-turn
// conversations pinned to a holder: each turn's prompt is a shared system prompt, the session's
// history (earlier prompts and answers) and new user blocks; the engine stores the prompt's new
// blocks under the last cached one, then the answer's blocks one at a time, each under the
// previous one (as engines publish decode blocks), and evicts what no longer fits. Every turn
// first looks its prompt up. Each window reports live runs, mean run length, runs walked per
// lookup and lookup p50 / p99.
//
// Run: build/release/bin/kvgate-bench-churn --seconds 600 --window 60
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <list>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "index/chain/chain_index.h"
#include "kvgate/core/block_hash.h"

namespace kvgate {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  uint32_t holders = 8;
  uint32_t capacity = 16384;  // blocks per holder
  uint32_t sessions = 2048;
  uint32_t system_prompts = 16;
  uint32_t system_blocks = 24;
  double seconds = 60;
  double window = 10;
  uint64_t seed = 1;
};

// One holder's KV pool: blocks by engine hash in LRU order (front = next to evict).
class Pool {
 public:
  explicit Pool(uint32_t capacity) : capacity_(capacity) {}
  bool has(index::EngineHash h) const { return where_.count(h) > 0; }
  void touch(index::EngineHash h) {
    auto it = where_.find(h);
    if (it == where_.end()) return;
    lru_.splice(lru_.end(), lru_, it->second);
  }
  // Adds a block; returns the blocks evicted to make room.
  void add(index::EngineHash h, std::vector<index::EngineHash>& evicted) {
    while (where_.size() >= capacity_) {
      evicted.push_back(lru_.front());
      where_.erase(lru_.front());
      lru_.pop_front();
    }
    lru_.push_back(h);
    where_[h] = std::prev(lru_.end());
  }

 private:
  uint32_t capacity_;
  std::list<index::EngineHash> lru_;
  absl::flat_hash_map<index::EngineHash, std::list<index::EngineHash>::iterator> where_;
};

struct Session {
  uint32_t holder;
  std::vector<LocalHash> local;  // the conversation so far, block by block
};

class Churn {
 public:
  explicit Churn(const Options& o) : o_(o), rng_(o.seed) {
    for (uint32_t h = 0; h < o.holders; ++h) pools_.emplace_back(o.capacity);
    for (uint32_t s = 0; s < o.system_prompts; ++s) {
      std::vector<LocalHash> sys;
      for (uint32_t i = 0; i < o.system_blocks; ++i) sys.push_back(rng_());
      systems_.push_back(std::move(sys));
    }
    for (uint32_t s = 0; s < o.sessions; ++s) new_session(s);
  }

  void run() {
    std::printf(
        "| minute | turns | live runs | positions | mean run length | runs walked / lookup | "
        "lookup p50 / p99 (us) | memberships |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    const auto start = Clock::now();
    auto window_end = start + to_duration(o_.window);
    uint64_t turns = 0;
    while (Clock::now() - start < to_duration(o_.seconds)) {
      turn();
      ++turns;
      if (Clock::now() >= window_end) {
        report(std::chrono::duration<double>(Clock::now() - start).count() / 60.0, turns);
        window_end += to_duration(o_.window);
      }
    }
  }

 private:
  static Clock::duration to_duration(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }

  void new_session(uint32_t s) {
    if (sessions_.size() <= s) sessions_.resize(s + 1);
    sessions_[s].holder = static_cast<uint32_t>(rng_() % o_.holders);
    sessions_[s].local = systems_[rng_() % systems_.size()];
  }

  // The engine hash of a block of a holder: its sequence hash, salted by the holder.
  static index::EngineHash engine_of(uint32_t holder, SeqHash seq) {
    return seq ^ (0x9e3779b97f4a7c15ULL * (holder + 1));
  }

  void turn() {
    const uint32_t s = static_cast<uint32_t>(rng_() % sessions_.size());
    Session& ses = sessions_[s];
    if (ses.local.size() > 1500 || rng_() % 50 == 0) new_session(s);  // conversations end
    const uint32_t user = 2 + static_cast<uint32_t>(rng_() % 12);
    for (uint32_t i = 0; i < user; ++i) ses.local.push_back(rng_());
    std::vector<SeqHash> chain;
    chain.reserve(ses.local.size());
    for (LocalHash l : ses.local)
      chain.push_back(chain.empty() ? l : hasher_.chain(chain.back(), l));

    const auto t0 = Clock::now();
    uint32_t walked = 0;
    index_.lookup_traced(chain, matches_, &walked);
    const auto t1 = Clock::now();
    lookup_us_.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    walked_ += walked;
    ++lookups_;

    // Prefill: the prompt's blocks the pool lacks, stored under the last block it has.
    const uint32_t h = ses.holder;
    Pool& pool = pools_[h];
    size_t have = 0;
    while (have < chain.size() && pool.has(engine_of(h, chain[have]))) ++have;
    for (size_t i = 0; i < have; ++i) pool.touch(engine_of(h, chain[i]));
    store(h, chain, ses.local, have, chain.size());
    // Decode: the answer's blocks, one event each, under the previous block.
    const uint32_t answer = 1 + static_cast<uint32_t>(rng_() % 16);
    for (uint32_t i = 0; i < answer; ++i) {
      ses.local.push_back(rng_());
      chain.push_back(hasher_.chain(chain.back(), ses.local.back()));
      store(h, chain, ses.local, chain.size() - 1, chain.size());
    }
  }

  void store(uint32_t h, const std::vector<SeqHash>& chain, const std::vector<LocalHash>& local,
             size_t from, size_t to) {
    if (from >= to) return;
    evicted_.clear();
    engine_.clear();
    for (size_t i = from; i < to; ++i) {
      engine_.push_back(engine_of(h, chain[i]));
      pools_[h].add(engine_.back(), evicted_);
    }
    events_.clear();
    if (!evicted_.empty()) {
      events_.push_back({.kind = index::EventKind::kRemoved,
                         .tier = index::Tier::kDevice,
                         .engine_hashes = evicted_});
    }
    index::Event st{.kind = index::EventKind::kStored,
                    .tier = index::Tier::kDevice,
                    .engine_hashes = engine_,
                    .local_hashes = std::span(local).subspan(from, to - from)};
    if (from > 0) {
      st.has_parent = true;
      st.parent = engine_of(h, chain[from - 1]);
    }
    events_.push_back(st);
    index_.apply(HolderId(h), events_);
  }

  void report(double minute, uint64_t turns) {
    std::sort(lookup_us_.begin(), lookup_us_.end());
    const auto pct = [&](double p) {
      return lookup_us_.empty() ? 0.0
                                : lookup_us_[std::min(lookup_us_.size() - 1,
                                                      static_cast<size_t>(p * lookup_us_.size()))];
    };
    const uint64_t runs = index_.live_runs();
    const uint64_t positions = index_.live_positions();
    std::printf("| %.1f | %lu | %lu | %lu | %.1f | %.2f | %.2f / %.2f | %lu |\n", minute,
                static_cast<unsigned long>(turns), static_cast<unsigned long>(runs),
                static_cast<unsigned long>(positions),
                runs ? static_cast<double>(positions) / static_cast<double>(runs) : 0.0,
                lookups_ ? static_cast<double>(walked_) / static_cast<double>(lookups_) : 0.0,
                pct(0.5), pct(0.99), static_cast<unsigned long>(index_.stats().memberships));
    std::fflush(stdout);
    lookup_us_.clear();
    walked_ = 0;
    lookups_ = 0;
  }

  Options o_;
  std::mt19937_64 rng_;
  BlockHasher hasher_;
  index::chain::ChainIndex index_;
  std::vector<Pool> pools_;
  std::vector<std::vector<LocalHash>> systems_;
  std::vector<Session> sessions_;
  std::vector<index::HolderMatch> matches_;
  std::vector<index::EngineHash> evicted_, engine_;
  std::vector<index::Event> events_;
  std::vector<double> lookup_us_;
  uint64_t walked_ = 0, lookups_ = 0;
};

}  // namespace
}  // namespace kvgate

int main(int argc, char** argv) {
  kvgate::Options o;
  CLI::App app("Chain index churn benchmark (see the file header).");
  app.add_option("--seconds", o.seconds, "run length")->capture_default_str();
  app.add_option("--window", o.window, "seconds per reported window")->capture_default_str();
  app.add_option("--holders", o.holders, "holders (engines)")->capture_default_str();
  app.add_option("--capacity", o.capacity, "KV blocks per holder")->capture_default_str();
  app.add_option("--sessions", o.sessions, "concurrent conversations")->capture_default_str();
  app.add_option("--seed", o.seed, "seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  kvgate::Churn(o).run();
  return 0;
}
