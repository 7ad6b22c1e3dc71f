// Routing decision cost: cache_aware's select() (index lookup included) on a fleet of N workers
// whose index holds a realistic population, one pinned thread, per-decision timing.
//
// Population (per fleet size): 64 shared system prompts of 16-200 blocks, each held by a random
// half of the fleet (popular ones by all of it); 20 conversations per worker, each a system
// prompt plus 30-600 more blocks of history, held by its worker and, for one in four, a second
// one. Requests continue a random conversation (or, one in five, start a new one) with 4-64 new
// blocks: prompts of ~1,300 tokens at the median and ~8,000 at p99 at 16-token blocks.
//
// Each of the 1,000 requests is decided decisions/1,000 times. Besides the raw percentiles, the
// table gives the p99 of the per-request medians (the decision's own cost, without the host's
// interruptions) and the share of decisions that took over twice their request's median (those an
// interruption landed in: on a shared guest, ~20-40 us stalls a few hundred times a second). A
// raw p99 well above the medians' p99 is the host's; it falls once that share is under 1%.
// "shortcut" is the share of decisions cache_aware made among the deepest holders only, without a
// pass over the fleet. --pending-requests N dispatches N of the requests first: their prompts are
// credited as blocks in flight (still live while the decisions are timed), so every lookup
// searches the credits too. --pending-placement routed (as serving does) sends each to the worker
// cache_aware chooses for it; random sends each to any worker, so credits make new deepest holders
// all over the fleet (a stress no serving gateway produces: the wait rule then weighs the fleet).
//
// Run: build/release/bin/kvgate-bench-decision --workers 128 1024 4096 --decisions 20000
#include <pthread.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/clock.h"
#include "kvgate/index/indexer.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/registry.h"

namespace kvgate {
namespace {

struct Chain {
  std::vector<LocalHash> local;
  std::vector<SeqHash> seq;
};

Chain extend(const Chain& base, size_t blocks, std::mt19937_64& rng) {
  Chain c = base;
  const BlockHasher h;
  for (size_t i = 0; i < blocks; ++i) {
    const LocalHash l = rng();
    c.seq.push_back(c.seq.empty() ? l : h.chain(c.seq.back(), l));
    c.local.push_back(l);
  }
  return c;
}

// Stores `chain` for `holder` as one event whose engine hashes are the sequence hashes salted by
// the holder (every engine hashes by itself).
void store(index::Indexer& idx, HolderId holder, const Chain& chain) {
  std::vector<index::EngineHash> engine(chain.seq.size());
  for (size_t i = 0; i < engine.size(); ++i)
    engine[i] = chain.seq[i] ^ (uint64_t{holder.value()} * 0x9e3779b97f4a7c15ULL);
  index::Event e{.kind = index::EventKind::kStored,
                 .tier = index::Tier::kDevice,
                 .engine_hashes = engine,
                 .local_hashes = chain.local};
  idx.apply(holder, std::span(&e, 1));
}

double percentile(std::vector<double>& v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Decision i decided request i % requests. Returns the p99 of the per-request medians and the
// share of decisions over twice their request's median.
std::pair<double, double> per_request(const std::vector<double>& us, size_t requests) {
  std::vector<std::vector<double>> by_request(requests);
  for (size_t i = 0; i < us.size(); ++i) by_request[i % requests].push_back(us[i]);
  std::vector<double> medians;
  for (auto& v : by_request) medians.push_back(v.empty() ? 0.0 : percentile(v, 0.5));
  size_t stalled = 0;
  for (size_t i = 0; i < us.size(); ++i) stalled += us[i] > 2 * medians[i % requests] ? 1 : 0;
  const double share = static_cast<double>(stalled) / static_cast<double>(us.size());
  return {percentile(medians, 0.99), share};
}

struct Pending {
  size_t requests = 0;
  bool routed = true;  // each to the worker cache_aware chooses; false: to a random one
};

void run(uint32_t n_workers, size_t decisions, Pending pending, index::IndexKind kind,
         uint64_t seed, const policy::CacheAwareConfig& config) {
  std::mt19937_64 rng(seed);
  ManualClock clock;
  workers::WorkerRegistry reg({}, clock);
  std::vector<std::shared_ptr<workers::Worker>> fleet;
  for (uint32_t i = 0; i < n_workers; ++i) {
    workers::WorkerInfo info;
    info.models = {"m"};
    info.holders = {HolderId(i)};
    info.block_size = 16;
    info.discovered = true;
    auto w = *reg.add("http://10.0.0.1:" + std::to_string(10000 + i), info);
    w->health().record(true);
    w->set_engine_load({.running = static_cast<uint32_t>(rng() % 20),
                        .waiting = static_cast<uint32_t>(rng() % 3),
                        .kv_usage = 0.3 + 0.4 * (static_cast<double>(rng() % 1000) / 1000.0)},
                       clock.now());
    fleet.push_back(w);
  }
  auto made = index::make_indexer(kind);
  auto idx = index::make_synchronized(std::move(*made));
  std::vector<Chain> systems;
  for (int s = 0; s < 64; ++s) systems.push_back(extend({}, 16 + rng() % 185, rng));
  // Blocks stored per worker (a conversation's system prompt counted again): the level the
  // warm-up rule compares, as the control path would set it.
  std::vector<uint64_t> stored(n_workers, 0);
  const auto keep = [&](uint32_t w, const Chain& c) {
    store(*idx, HolderId(w), c);
    stored[w] += c.seq.size();
  };
  for (size_t s = 0; s < systems.size(); ++s) {
    const bool popular = s < 8;
    for (uint32_t w = 0; w < n_workers; ++w) {
      if (popular || rng() % 2 == 0) keep(w, systems[s]);
    }
  }
  std::vector<std::pair<Chain, uint32_t>> conversations;
  for (uint32_t w = 0; w < n_workers; ++w) {
    for (int k = 0; k < 20; ++k) {
      Chain c = extend(systems[rng() % systems.size()], 30 + rng() % 571, rng);
      keep(w, c);
      if (rng() % 4 == 0) keep(static_cast<uint32_t>(rng() % n_workers), c);
      conversations.emplace_back(std::move(c), w);
    }
  }
  for (uint32_t w = 0; w < n_workers; ++w) fleet[w]->set_index_blocks(0, stored[w]);
  const auto st = idx->stats();

  // (The real clock: the warm-up level is summed again every warmup_level_max_age, as served.)
  auto pol = *policy::make_policy(policy::PolicyKind::kCacheAware, config,
                                  {.index = idx.get(), .clock = &Clock::real()});
  policy::Scratch scratch;
  std::vector<Chain> requests;
  for (size_t i = 0; i < 1000; ++i) {
    const Chain& base = rng() % 5 == 0 ? systems[rng() % systems.size()]
                                       : conversations[rng() % conversations.size()].first;
    requests.push_back(extend(base, 4 + rng() % 61, rng));
  }
  const auto snapshot = reg.snapshot();
  for (size_t i = 0; i < pending.requests; ++i) {  // blocks in flight, live for the max age
    const Chain& c = requests[rng() % requests.size()];
    const policy::RouteRequest rr{.chain = c.seq,
                                  .prompt_tokens = static_cast<uint32_t>(c.seq.size() * 16),
                                  .block_size = 16,
                                  .model = "m"};
    int32_t to = static_cast<int32_t>(rng() % n_workers);
    if (pending.routed) to = pol->select(rr, *snapshot, scratch).worker;
    pol->on_dispatch(*fleet[static_cast<size_t>(to)], rr, -1);
  }
  std::vector<double> us(decisions), lookup_us(decisions);
  std::vector<index::HolderMatch> matches;
  uint64_t sum_blocks = 0;
  const uint64_t shortcuts_before = scratch.shortcut_decisions;
  for (size_t i = 0; i < decisions; ++i) {
    const Chain& c = requests[i % requests.size()];
    const policy::RouteRequest rr{.chain = c.seq,
                                  .prompt_tokens = static_cast<uint32_t>(c.seq.size() * 16),
                                  .block_size = 16,
                                  .model = "m"};
    const auto t0 = std::chrono::steady_clock::now();
    const auto d = pol->select(rr, *snapshot, scratch);
    const auto t1 = std::chrono::steady_clock::now();
    idx->lookup(c.seq, matches);
    const auto t2 = std::chrono::steady_clock::now();
    us[i] = std::chrono::duration<double, std::micro>(t1 - t0).count();
    lookup_us[i] = std::chrono::duration<double, std::micro>(t2 - t1).count();
    sum_blocks += c.seq.size();
    if (d.worker < 0) std::fprintf(stderr, "no worker?\n");
  }
  const auto [medians_p99, stalled] = per_request(us, requests.size());
  const double shortcut = static_cast<double>(scratch.shortcut_decisions - shortcuts_before) /
                          static_cast<double>(decisions);
  std::printf("| %u | %s | %lu | %.1f | %.2f / %.2f | %.2f | %.1f%% | %.0f%% | %.2f / %.2f |\n",
              n_workers, std::string(index::index_kind_name(kind)).c_str(),
              static_cast<unsigned long>(st.memberships),
              static_cast<double>(sum_blocks) / static_cast<double>(decisions), percentile(us, 0.5),
              percentile(us, 0.99), medians_p99, 100 * stalled, 100 * shortcut,
              percentile(lookup_us, 0.5), percentile(lookup_us, 0.99));
  std::fflush(stdout);
}

}  // namespace
}  // namespace kvgate

int main(int argc, char** argv) {
  CLI::App app(
      "Routing decision cost of cache_aware at several fleet sizes (see the file header).");
  std::vector<uint32_t> sizes = {128, 1024, 4096};
  size_t decisions = 20000;
  kvgate::Pending pending;
  std::string placement = "routed";
  std::vector<std::string> kinds = {"chain"};
  uint64_t seed = 1;
  int cpu = 0;
  kvgate::policy::CacheAwareConfig config;
  app.add_option("--workers", sizes, "fleet sizes")->capture_default_str();
  app.add_option("--decisions", decisions, "timed decisions per fleet size")->capture_default_str();
  app.add_option("--pending-requests", pending.requests,
                 "requests dispatched before the timing: their prompts are blocks in flight")
      ->capture_default_str();
  app.add_option("--pending-placement", placement,
                 "where those go: routed (the worker cache_aware chooses, as served) or random")
      ->check(CLI::IsMember({"routed", "random"}))
      ->capture_default_str();
  app.add_option("--kv-index", kinds, "index backends")->capture_default_str();
  app.add_option("--seed", seed, "population seed")->capture_default_str();
  app.add_option("--cpu", cpu, "pin to this CPU (-1: no pinning)")->capture_default_str();
  app.add_option("--wait-spill-ratio", config.wait_spill_ratio,
                 "cache_aware's wait rule (0: off), as the gateway's flag")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  pending.routed = placement == "routed";
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  std::printf(
      "| workers | index | memberships | blocks per request | decision p50 / p99 (us) | p99 of "
      "per-request medians (us) | stalled | shortcut | lookup p50 / p99 (us) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& k : kinds) {
    auto kind = kvgate::index::parse_index_kind(k);
    if (!kind.ok()) {
      std::fprintf(stderr, "%s\n", std::string(kvgate::message_of(kind.status())).c_str());
      return 2;
    }
    for (uint32_t n : sizes) kvgate::run(n, decisions, pending, *kind, seed, config);
  }
  return 0;
}
