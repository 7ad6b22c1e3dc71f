#include "replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <span>
#include <thread>

#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_map.h"
#include "index/chain/chain_index.h"
#include "kind_timer.h"

// jemalloc's control interface, weak so that a build without jemalloc still links and reports
// memory as unavailable.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace kvgate::bench {
namespace {

using Clock = std::chrono::steady_clock;

uint32_t ns_since(Clock::time_point t0, Clock::time_point t1) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  return static_cast<uint32_t>(std::min<int64_t>(ns, UINT32_MAX));
}

double seconds(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

// Waits until `due` without holding a core when far ahead; a benchmark pacer, not a test.
void wait_until(Clock::time_point due) {
  for (;;) {
    const auto now = Clock::now();
    if (now >= due) return;
    if (due - now > std::chrono::microseconds(200)) {
      std::this_thread::sleep_for(due - now - std::chrono::microseconds(100));
    } else {
      std::this_thread::yield();
    }
  }
}

uint64_t op_blocks(const corpus::Corpus& c, const corpus::Corpus::Op& op) {
  if (op.kind == corpus::Corpus::Op::Kind::kLookup) return c.lookup(op.index).size();
  const auto& b = c.batches()[op.index];
  return uint64_t{b.stored_blocks} + b.removed_blocks;
}

}  // namespace

void announce_capacity(const corpus::Corpus& c, index::Indexer& index) {
  std::vector<bool> seen;
  for (const auto& b : c.batches()) {
    const uint32_t h = b.holder.value();
    if (h >= seen.size()) seen.resize(h + 1);
    if (seen[h]) continue;
    seen[h] = true;
    index.expect_capacity(b.holder, c.header().params.pool_blocks);
  }
}

Percentiles percentiles(std::vector<uint32_t>& ns) {
  Percentiles p;
  p.count = ns.size();
  if (ns.empty()) return p;
  auto at = [&](double q) {
    const size_t k = std::min(ns.size() - 1, static_cast<size_t>(q * ns.size()));
    std::nth_element(ns.begin(), ns.begin() + k, ns.end());
    return ns[k] / 1000.0;
  };
  p.p50_us = at(0.50);
  p.p99_us = at(0.99);
  p.p999_us = at(0.999);
  p.max_us = *std::max_element(ns.begin(), ns.end()) / 1000.0;
  p.mean_us = std::accumulate(ns.begin(), ns.end(), 0.0) / ns.size() / 1000.0;
  return p;
}

double clock_pair_ns() {
  constexpr int kPairs = 1'000'000;
  uint64_t sink = 0;
  const auto start = Clock::now();
  for (int i = 0; i < kPairs; ++i) {
    const auto t0 = Clock::now();
    sink += ns_since(t0, Clock::now());
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  return (ns + (sink == UINT64_MAX ? 1 : 0)) / kPairs;
}

Stalls measure_stalls(double seconds) {
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto prev = start;
  uint64_t stalls = 0;
  double lost_ns = 0;
  for (auto now = Clock::now(); now < end; now = Clock::now()) {
    const double gap = std::chrono::duration<double, std::nano>(now - prev).count();
    if (gap >= 500) lost_ns += gap;
    if (gap >= 2000) ++stalls;
    prev = now;
  }
  const double elapsed = std::chrono::duration<double>(prev - start).count();
  return {stalls / elapsed, lost_ns / 1e9 / elapsed};
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool allocator_stats_available() {
  if (mallctl == nullptr) return false;
  size_t allocated = 0, len = sizeof(allocated);
  return mallctl("stats.allocated", &allocated, &len, nullptr, 0) == 0;
}

uint64_t allocated_bytes_or_zero() {
  if (mallctl == nullptr) return 0;
  uint64_t epoch = 1;
  size_t len = sizeof(epoch);
  mallctl("epoch", &epoch, &len, &epoch, len);  // refresh jemalloc's cached statistics
  size_t allocated = 0;
  len = sizeof(allocated);
  if (mallctl("stats.allocated", &allocated, &len, nullptr, 0) != 0) return 0;
  return allocated;
}

namespace {

// Prints lookup latency in buckets of `key` (runs walked, chain length): where the tail comes from.
void print_lookup_buckets(const char* title, std::span<const uint32_t> edges,
                          const std::vector<uint32_t>& lookup_ns,
                          const std::vector<uint32_t>& key) {
  std::fprintf(stderr, "chain lookups by %s:\n", title);
  for (size_t b = 0; b + 1 < edges.size(); ++b) {
    std::vector<uint32_t> ns;
    for (size_t i = 0; i < key.size(); ++i) {
      if (key[i] >= edges[b] && key[i] < edges[b + 1]) ns.push_back(lookup_ns[i]);
    }
    if (ns.empty()) continue;
    const Percentiles p = percentiles(ns);
    char label[32];
    if (edges[b + 1] == edges[b] + 1) {
      std::snprintf(label, sizeof(label), "%u", edges[b]);
    } else if (edges[b + 1] == UINT32_MAX) {
      std::snprintf(label, sizeof(label), "%u or more", edges[b]);
    } else {
      std::snprintf(label, sizeof(label), "%u to %u", edges[b], edges[b + 1] - 1);
    }
    std::fprintf(stderr, "  %s: %zu lookups (%.1f%%), p50 / p99 %.2f / %.2f us\n", label, ns.size(),
                 100.0 * double(ns.size()) / double(key.size()), p.p50_us, p.p99_us);
  }
}

// Lookup latency by how many runs the chain index walked (deep lookups are where its tail is) and
// by chain length.
void print_lookup_shapes(const corpus::Corpus& c, const std::vector<uint32_t>& lookup_ns,
                         const std::vector<uint32_t>& runs) {
  static constexpr uint32_t kRunEdges[] = {0, 1, 2, 3, 5, 10, UINT32_MAX};
  static constexpr uint32_t kLengthEdges[] = {0, 32, 128, 256, 512, 1024, UINT32_MAX};
  print_lookup_buckets("runs walked", kRunEdges, lookup_ns, runs);
  std::vector<uint32_t> length(c.lookup_count());
  for (size_t i = 0; i < length.size(); ++i) length[i] = static_cast<uint32_t>(c.lookup(i).size());
  print_lookup_buckets("chain length in blocks", kLengthEdges, lookup_ns, length);
}

}  // namespace

SingleRun run_single(const corpus::Corpus& c, index::Indexer& index, const ReplaySetup& setup,
                     bool chain_detail) {
  SingleRun r;
  constexpr size_t kSampleEvery = 4096;  // batches between memory samples
  std::vector<uint32_t> lookup_ns(c.lookup_count());
  std::vector<uint32_t> apply_ns(c.batches().size());
  std::vector<index::HolderMatch> out;
  out.reserve(1024);
  ChainFeed feed(setup.chains);  // before the memory baseline: its buffer is not the index's
  const auto* chain_index =
      chain_detail ? dynamic_cast<const index::chain::ChainIndex*>(&index) : nullptr;
  std::vector<uint32_t> runs_walked(chain_index ? c.lookup_count() : 0);
  r.memory.available = allocator_stats_available();
  const uint64_t baseline = allocated_bytes_or_zero();
  if (setup.announce_capacity) announce_capacity(c, index);
  const auto& ops = c.ops();
  Clock::duration sampling{0};
  size_t batches = 0;
  auto sample = [&] {
    const auto s0 = Clock::now();
    const index::IndexStats st = index.stats();
    const uint64_t allocated = allocated_bytes_or_zero();
    ++r.memory.samples;
    if (st.memberships >= r.memory.memberships) {
      r.memory.memberships = st.memberships;
      r.memory.allocated_delta = allocated > baseline ? allocated - baseline : 0;
      r.memory.self_counted_bytes = st.bytes;
    }
    sampling += Clock::now() - s0;
  };
  const double cpu_start = thread_cpu_seconds();
  const auto start = Clock::now();
  for (const corpus::Corpus::Op& op : ops) {
    if (op.kind == corpus::Corpus::Op::Kind::kLookup) {
      const auto chain = feed(c.lookup(op.index));
      const auto t0 = Clock::now();
      if (chain_index) {
        chain_index->lookup_traced(chain, out, &runs_walked[op.index]);
      } else {
        index.lookup(chain, out);
      }
      lookup_ns[op.index] = ns_since(t0, Clock::now());
      uint32_t best = 0;
      for (const auto& m : out) best = std::max(best, m.device_depth);
      r.hit_blocks += best;
    } else {
      const auto& b = c.batches()[op.index];
      const auto t0 = Clock::now();
      r.totals += index.apply(b.holder, c.events(b));
      apply_ns[op.index] = ns_since(t0, Clock::now());
      if (++batches % kSampleEvery == 0) sample();
    }
  }
  const auto end = Clock::now();
  r.cpu_s = thread_cpu_seconds() - cpu_start - std::chrono::duration<double>(sampling).count();
  sample();
  r.wall_s = seconds(start, end) - std::chrono::duration<double>(sampling).count();
  r.block_ops = c.header().totals.block_ops();
  r.block_ops_per_s = r.block_ops / r.wall_s;
  if (chain_index) print_lookup_shapes(c, lookup_ns, runs_walked);  // before percentiles() reorders
  r.lookup = percentiles(lookup_ns);
  r.apply = percentiles(apply_ns);
  r.final_stats = index.stats();
  if (chain_index) {
    const auto m = chain_index->memory_breakdown();
    std::fprintf(
        stderr,
        "chain memory: slab reserved %.1f MB (live %.1f), runs %.1f MB, holder states %.1f MB; "
        "%lu live runs, %lu positions (%.1f per run), %lu memberships\n",
        m.slab_reserved / 1e6, m.slab_live / 1e6, m.runs_reserved / 1e6, m.holder_states / 1e6,
        static_cast<unsigned long>(m.live_runs), static_cast<unsigned long>(m.live_positions),
        m.live_runs ? double(m.live_positions) / double(m.live_runs) : 0.0,
        static_cast<unsigned long>(r.final_stats.memberships));
    for (const auto& [words, bytes] : m.free_by_class) {
      std::fprintf(stderr, "  free or uncarved in blocks of %zu words: %.2f MB\n", words,
                   bytes / 1e6);
    }
  }
  return r;
}

ConcurrentRun run_concurrent(const corpus::Corpus& c, index::Indexer& index,
                             const ReplaySetup& setup, uint32_t lanes, uint32_t readers,
                             double offered) {
  if (setup.announce_capacity) announce_capacity(c, index);
  ConcurrentRun r;
  r.lanes = std::max<uint32_t>(1, lanes);
  r.readers = std::max<uint32_t>(1, readers);
  r.offered_block_ops_per_s = offered;
  const auto& ops = c.ops();
  // Each op is due when the offered rate reaches the block ops before it in corpus order.
  std::vector<double> due_s(ops.size());
  std::vector<std::vector<uint32_t>> lane_ops(r.lanes), reader_ops(r.readers);
  uint64_t before = 0;
  for (size_t k = 0; k < ops.size(); ++k) {
    due_s[k] = offered > 0 ? before / offered : 0;
    before += op_blocks(c, ops[k]);
    if (ops[k].kind == corpus::Corpus::Op::Kind::kLookup) {
      reader_ops[ops[k].index % r.readers].push_back(static_cast<uint32_t>(k));
    } else {
      // A holder's batches stay on one lane, in order.
      const auto& b = c.batches()[ops[k].index];
      lane_ops[b.holder.value() % r.lanes].push_back(static_cast<uint32_t>(k));
    }
  }
  std::vector<uint32_t> lookup_ns(c.lookup_count());
  std::vector<uint32_t> apply_ns(c.batches().size());
  std::atomic<uint32_t> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point start;
  std::vector<Clock::time_point> finished(r.lanes + r.readers);
  auto worker = [&](const std::vector<uint32_t>& mine, size_t slot) {
    std::vector<index::HolderMatch> out;
    out.reserve(1024);
    ChainFeed feed(setup.chains);
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    for (uint32_t k : mine) {
      if (offered > 0) {
        wait_until(start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(due_s[k])));
      }
      const corpus::Corpus::Op& op = ops[k];
      const std::span<const SeqHash> chain = op.kind == corpus::Corpus::Op::Kind::kLookup
                                                 ? feed(c.lookup(op.index))
                                                 : std::span<const SeqHash>();
      const auto t0 = Clock::now();
      if (op.kind == corpus::Corpus::Op::Kind::kLookup) {
        index.lookup(chain, out);
        lookup_ns[op.index] = ns_since(t0, Clock::now());
      } else {
        const auto& b = c.batches()[op.index];
        index.apply(b.holder, c.events(b));
        apply_ns[op.index] = ns_since(t0, Clock::now());
      }
    }
    finished[slot] = Clock::now();
  };
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < r.lanes; ++i) threads.emplace_back(worker, std::cref(lane_ops[i]), i);
  for (uint32_t i = 0; i < r.readers; ++i) {
    threads.emplace_back(worker, std::cref(reader_ops[i]), r.lanes + i);
  }
  while (ready.load() < threads.size()) std::this_thread::yield();
  start = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  const Clock::time_point end = *std::max_element(finished.begin(), finished.end());
  r.wall_s = seconds(start, end);
  r.achieved_block_ops_per_s = c.header().totals.block_ops() / r.wall_s;
  r.kept_up = offered <= 0 || r.achieved_block_ops_per_s >= 0.99 * offered;
  r.lookup = percentiles(lookup_ns);
  r.apply = percentiles(apply_ns);
  return r;
}

Floors run_floors(const corpus::Corpus& c) {
  Floors f;
  absl::flat_hash_map<uint64_t, uint64_t> map;
  map.reserve(c.header().totals.peak_memberships + 1024);
  uint64_t sink = 0;
  std::span<const SeqHash> previous;
  Clock::duration lookup_time{0};
  uint64_t lookup_blocks = 0;
  KindTimer events;
  const double cpu_start = thread_cpu_seconds();
  const auto start = Clock::now();
  for (const corpus::Corpus::Op& op : c.ops()) {
    if (op.kind == corpus::Corpus::Op::Kind::kLookup) {
      const auto t0 = Clock::now();
      // One compare per block against the previous request's chain, walked in order.
      const auto chain = c.lookup(op.index);
      const size_t n = std::min(chain.size(), previous.size());
      uint64_t equal = 0;
      for (size_t i = 0; i < n; ++i) equal += chain[i] == previous[i];
      sink += equal;
      previous = chain;
      lookup_blocks += chain.size();
      lookup_time += Clock::now() - t0;
    } else {
      const auto& b = c.batches()[op.index];
      const uint64_t salt = uint64_t{b.holder.value()} << 48;
      for (const index::Event& e : c.events(b)) {
        events.time(e, [&] {
          if (e.kind == index::EventKind::kStored) {
            for (index::EngineHash h : e.engine_hashes) map.insert_or_assign(h ^ salt, h);
          } else if (e.kind == index::EventKind::kRemoved) {
            for (index::EngineHash h : e.engine_hashes) sink += map.erase(h ^ salt);
          }
        });
      }
    }
  }
  const auto end = Clock::now();
  f.cpu_s = thread_cpu_seconds() - cpu_start;
  f.wall_s = seconds(start, end);
  f.block_ops_per_s = c.header().totals.block_ops() / f.wall_s;
  f.event_ns_per_block = events.ns_per_block();
  f.event_by_kind = events.by_kind();
  f.lookup_ns_per_block =
      lookup_blocks ? std::chrono::duration<double, std::nano>(lookup_time).count() / lookup_blocks
                    : 0;
  // Keep the work observable.
  if (sink == 0xFFFFFFFFFFFFFFFFull) f.wall_s += 1e-12;
  return f;
}

}  // namespace kvgate::bench
