// kvgate-bench-index: replays a Mooncake corpus (kvgate-corpus) into one or more indexers and
// reports block ops/s single-threaded and under event lanes plus query threads at an offered
// rate, lookup and event-apply latency, bytes per membership, and the floors of the same data.
//
//   kvgate-corpus build --out /tmp/mooncake.kvgc
//   kvgate-bench-index --corpus /tmp/mooncake.kvgc --kv-index positional --runs 3
//
// Recorded figures and their exact commands: docs/benchmarks.md, "KV index: Mooncake corpus
// replay".
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/corpus/corpus_file.h"
#include "kvgate/index/indexer.h"
#include "replay.h"

namespace kvgate::bench {
namespace {

constexpr const char* kMemoryMethod =
    "jemalloc stats.allocated (after an epoch refresh) at the single-thread run's sample with the "
    "most memberships (sampled every 4096 batches and at the end), minus the allocation measured "
    "just before the index was built, divided by the index's memberships at that sample";
constexpr const char* kOpsMethod =
    "block ops = lookup blocks + stored blocks + removed blocks of the corpus, over the wall time "
    "of the whole replay including the drain; latency is steady_clock around each lookup() / "
    "apply() call";
constexpr const char* kWarmChains =
    "chains: each lookup's chain copied into a per-thread buffer before the clock starts, as the "
    "gateway copies a request's chain before its lookup (--cold-chains: read from the corpus)";
constexpr const char* kColdChains =
    "chains: each lookup's chain read straight from the corpus file's memory (--cold-chains), "
    "cold: the gateway's lookups read a chain it has just hashed and copied";
constexpr const char* kFloorMethod =
    "the same corpus in the same order with one absl::flat_hash_map insert per stored block and "
    "one erase per removed block, timed per event, and one sequential 64-bit compare per lookup "
    "block";

struct Options {
  std::string corpus;
  std::vector<std::string> kinds = {"positional"};
  uint32_t runs = 1;
  uint32_t lanes = 1;
  uint32_t readers = 1;
  std::vector<double> rates = {0};
  bool concurrent = true;
  bool chain_detail = false;
  bool capacity_hint = true;
  bool cold_chains = false;
  std::string json;
};

struct IndexRun {
  std::string kind;
  uint32_t run = 0;
  SingleRun single;
  // --chain-detail, chain index: its apply by event kind, and its record maps' share of it.
  std::optional<ApplyByKind> apply_by_kind, record_maps_alone;
  // --chain-detail, chain index: lookup latency beside a machine-pause sentinel.
  std::optional<PauseSplit> pause_split;
  std::vector<ConcurrentRun> concurrent;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void write_percentiles(JsonWriter& w, const char* key, const Percentiles& p) {
  w.key(key).begin_object();
  w.member("count", p.count).member("p50_us", p.p50_us).member("p99_us", p.p99_us);
  w.member("p999_us", p.p999_us).member("max_us", p.max_us).member("mean_us", p.mean_us);
  w.end_object();
}

void write_by_kind(JsonWriter& w, const char* key, const ApplyByKind& a) {
  w.key(key).begin_object();
  w.member("stored_ns_per_block", a.stored_ns_per_block);
  w.member("removed_ns_per_block", a.removed_ns_per_block);
  w.end_object();
}

std::unique_ptr<index::Indexer> make(const std::string& kind) {
  auto k = index::parse_index_kind(kind);
  auto made = index::make_indexer(*k);
  if (!made.ok()) return nullptr;
  return std::move(*made);
}

int run(const Options& o) {
  auto loaded = corpus::Corpus::load(o.corpus);
  if (!loaded.ok()) {
    std::fprintf(stderr, "kvgate-bench-index: %s\n",
                 std::string(loaded.status().message()).c_str());
    return 1;
  }
  const corpus::Corpus& c = *loaded;
  const ReplaySetup setup{.announce_capacity = o.capacity_hint,
                          .chains = o.cold_chains ? ChainReads::kCold : ChainReads::kWarm};
  for (const std::string& kind : o.kinds) {
    auto k = index::parse_index_kind(kind);
    if (!k.ok() || !index::make_indexer(*k).ok()) {
      std::fprintf(stderr, "kvgate-bench-index: --kv-index %s: %s\n", kind.c_str(),
                   k.ok() ? std::string(index::make_indexer(*k).status().message()).c_str()
                          : std::string(k.status().message()).c_str());
      return 2;
    }
  }
  std::FILE* table = o.json == "-" ? stderr : stdout;
  const auto& t = c.header().totals;
  std::fprintf(table, "corpus %s (%.1f MB)\n%s", o.corpus.c_str(), c.file_bytes() / 1e6,
               corpus::describe(c.header()).c_str());
  const double clock_ns = clock_pair_ns();
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  const Stalls stalls = measure_stalls(1.0);
  std::fprintf(table,
               "machine: %u hardware threads, load average %.2f at start; timing overhead %.1f ns "
               "per timed call; the core taken away %.0f times a second for 2 us or more (%.1f%% "
               "of the time lost in gaps of 0.5 us or more: these set lookup tails)\n",
               std::thread::hardware_concurrency(), load[0], clock_ns, stalls.per_second,
               100 * stalls.lost_fraction);
  std::fprintf(table, "method: %s\nfloors: %s\nmemory: %s\n", kOpsMethod, kFloorMethod,
               allocator_stats_available() ? kMemoryMethod : "unavailable (no jemalloc)");
  if (o.capacity_hint) {
    std::fprintf(table,
                 "capacity: each holder's KV pool (%u blocks) announced before each replay, as "
                 "the gateway does from an engine's /server_info\n",
                 c.header().params.pool_blocks);
  } else {
    std::fprintf(table, "capacity: not announced (--no-capacity-hint)\n");
  }
  std::fprintf(table, "%s\n\n", o.cold_chains ? kColdChains : kWarmChains);

  std::vector<Floors> floors;
  std::vector<IndexRun> runs;
  for (uint32_t r = 1; r <= o.runs; ++r) {
    floors.push_back(run_floors(c));
    const Floors& f = floors.back();
    std::fprintf(table,
                 "run %u floors: %.2f M block ops/s (%.2f M per CPU second; event %.1f ns/block "
                 "(stored %.1f, removed %.1f), lookup %.2f ns/block)\n",
                 r, f.block_ops_per_s / 1e6, t.block_ops() / f.cpu_s / 1e6, f.event_ns_per_block,
                 f.event_by_kind.stored_ns_per_block, f.event_by_kind.removed_ns_per_block,
                 f.lookup_ns_per_block);
    for (const std::string& kind : o.kinds) {
      IndexRun ir;
      ir.kind = kind;
      ir.run = r;
      {
        auto index = make(kind);
        ir.single = run_single(c, *index, setup, o.chain_detail);
      }
      const SingleRun& s = ir.single;
      std::fprintf(table,
                   "run %u %-10s single: %.2f M block ops/s, %.2f s (%.2f M per CPU second); "
                   "lookup p50/p99/p999 "
                   "%.2f/%.2f/%.2f us; apply p50/p99/p999 %.2f/%.2f/%.2f us; %.1f B/membership "
                   "(allocated), %.1f (self-counted) at %llu memberships; hit blocks %llu\n",
                   r, kind.c_str(), s.block_ops_per_s / 1e6, s.wall_s, s.block_ops / s.cpu_s / 1e6,
                   s.lookup.p50_us, s.lookup.p99_us, s.lookup.p999_us, s.apply.p50_us,
                   s.apply.p99_us, s.apply.p999_us, s.memory.bytes_per_membership(),
                   s.memory.self_bytes_per_membership(),
                   static_cast<unsigned long long>(s.memory.memberships),
                   static_cast<unsigned long long>(s.hit_blocks));
      if (o.chain_detail && kind == "chain") {
        ir.apply_by_kind = run_apply_by_kind(c, *make(kind), o.capacity_hint);
        ir.record_maps_alone = run_record_maps_alone(c, o.capacity_hint);
        std::fprintf(
            table,
            "run %u chain      apply by event kind, one event per call: stored %.1f "
            "ns/block, removed %.1f; its record maps alone: stored %.1f, removed %.1f\n",
            r, ir.apply_by_kind->stored_ns_per_block, ir.apply_by_kind->removed_ns_per_block,
            ir.record_maps_alone->stored_ns_per_block, ir.record_maps_alone->removed_ns_per_block);
        if (const PauseSplit ps = run_pause_split(c, *make(kind), setup); ps.measured) {
          ir.pause_split = ps;
          std::fprintf(table,
                       "run %u chain      lookups beside a pause sentinel on the other core "
                       "(single-threaded): all p50/p99/p999 %.2f/%.2f/%.2f us; %.2f%% overlapped "
                       "one of its %.0f gaps a second of 1 us or more; the rest p50/p99/p999 "
                       "%.2f/%.2f/%.2f us\n",
                       r, ps.all.p50_us, ps.all.p99_us, ps.all.p999_us,
                       100 * ps.overlapped_fraction, ps.pauses_per_second, ps.clean.p50_us,
                       ps.clean.p99_us, ps.clean.p999_us);
        }
      }
      if (o.concurrent) {
        for (double rate : o.rates) {
          auto index = index::make_synchronized(make(kind));
          ir.concurrent.push_back(run_concurrent(c, *index, setup, o.lanes, o.readers, rate));
          const ConcurrentRun& cr = ir.concurrent.back();
          std::fprintf(table,
                       "run %u %-10s %u lanes + %u readers, offered %s: achieved %.2f M block "
                       "ops/s (%s); lookup p50/p99/p999 %.2f/%.2f/%.2f us; apply p50/p99 "
                       "%.2f/%.2f us\n",
                       r, kind.c_str(), cr.lanes, cr.readers,
                       rate > 0 ? (std::to_string(rate / 1e6) + " M").c_str() : "unpaced",
                       cr.achieved_block_ops_per_s / 1e6, cr.kept_up ? "kept up" : "NOT kept up",
                       cr.lookup.p50_us, cr.lookup.p99_us, cr.lookup.p999_us, cr.apply.p50_us,
                       cr.apply.p99_us);
        }
      }
      runs.push_back(std::move(ir));
    }
  }

  // Medians over runs.
  std::fprintf(table, "\nmedians over %u run(s)\n", o.runs);
  std::fprintf(table, "%-10s %12s %10s %9s %9s %9s %9s %9s %10s %10s\n", "index", "M blk ops/s",
               "M per CPU s", "lk p50us", "lk p99us", "lk p999", "ap p50us", "ap p99us", "B/member",
               "self B/m");
  auto med = [&](const std::string& kind, auto field) {
    std::vector<double> v;
    for (const IndexRun& ir : runs) {
      if (ir.kind == kind) v.push_back(field(ir));
    }
    return median(v);
  };
  for (const std::string& kind : o.kinds) {
    std::fprintf(
        table, "%-10s %12.2f %10.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.1f %10.1f\n", kind.c_str(),
        med(kind, [](const IndexRun& r) { return r.single.block_ops_per_s / 1e6; }),
        med(kind, [](const IndexRun& r) { return r.single.block_ops / r.single.cpu_s / 1e6; }),
        med(kind, [](const IndexRun& r) { return r.single.lookup.p50_us; }),
        med(kind, [](const IndexRun& r) { return r.single.lookup.p99_us; }),
        med(kind, [](const IndexRun& r) { return r.single.lookup.p999_us; }),
        med(kind, [](const IndexRun& r) { return r.single.apply.p50_us; }),
        med(kind, [](const IndexRun& r) { return r.single.apply.p99_us; }),
        med(kind, [](const IndexRun& r) { return r.single.memory.bytes_per_membership(); }),
        med(kind, [](const IndexRun& r) { return r.single.memory.self_bytes_per_membership(); }));
    if (o.concurrent) {
      for (size_t i = 0; i < o.rates.size(); ++i) {
        int kept = 0;
        for (const IndexRun& ir : runs) kept += ir.kind == kind && ir.concurrent[i].kept_up;
        std::fprintf(
            table,
            "%-10s %u lanes + %u readers at %s: achieved %.2f M block ops/s, kept up %d of %u, "
            "lookup p50/p99/p999 %.2f/%.2f/%.2f us\n",
            kind.c_str(), o.lanes, o.readers,
            o.rates[i] > 0 ? (std::to_string(o.rates[i] / 1e6) + " M").c_str() : "unpaced",
            med(kind,
                [i](const IndexRun& r) { return r.concurrent[i].achieved_block_ops_per_s / 1e6; }),
            kept, o.runs,
            med(kind, [i](const IndexRun& r) { return r.concurrent[i].lookup.p50_us; }),
            med(kind, [i](const IndexRun& r) { return r.concurrent[i].lookup.p99_us; }),
            med(kind, [i](const IndexRun& r) { return r.concurrent[i].lookup.p999_us; }));
      }
    }
  }
  std::vector<double> fo, fc, fe, fs, fr, fl;
  for (const Floors& f : floors) {
    fo.push_back(f.block_ops_per_s / 1e6);
    fc.push_back(t.block_ops() / f.cpu_s / 1e6);
    fe.push_back(f.event_ns_per_block);
    fs.push_back(f.event_by_kind.stored_ns_per_block);
    fr.push_back(f.event_by_kind.removed_ns_per_block);
    fl.push_back(f.lookup_ns_per_block);
  }
  std::fprintf(table,
               "%-10s %12.2f %10.2f   (event %.1f ns/block: stored %.1f, removed %.1f; lookup "
               "%.2f ns/block)\n",
               "floors", median(fo), median(fc), median(fe), median(fs), median(fr), median(fl));
  std::vector<double> chain_stored, chain_removed, maps_stored, maps_removed;
  for (const IndexRun& ir : runs) {
    if (!ir.apply_by_kind) continue;
    chain_stored.push_back(ir.apply_by_kind->stored_ns_per_block);
    chain_removed.push_back(ir.apply_by_kind->removed_ns_per_block);
    maps_stored.push_back(ir.record_maps_alone->stored_ns_per_block);
    maps_removed.push_back(ir.record_maps_alone->removed_ns_per_block);
  }
  if (!chain_stored.empty()) {
    std::fprintf(table,
                 "chain apply by event kind: stored %.1f ns/block, removed %.1f; its record maps "
                 "alone: stored %.1f, removed %.1f\n",
                 median(chain_stored), median(chain_removed), median(maps_stored),
                 median(maps_removed));
  }
  std::vector<double> ps_all99, ps_clean50, ps_clean99, ps_frac;
  for (const IndexRun& ir : runs) {
    if (!ir.pause_split) continue;
    ps_all99.push_back(ir.pause_split->all.p99_us);
    ps_clean50.push_back(ir.pause_split->clean.p50_us);
    ps_clean99.push_back(ir.pause_split->clean.p99_us);
    ps_frac.push_back(ir.pause_split->overlapped_fraction);
  }
  if (!ps_all99.empty()) {
    std::fprintf(table,
                 "chain lookups beside a pause sentinel: all p99 %.2f us; %.2f%% overlapped a "
                 "pause; the rest p50/p99 %.2f/%.2f us\n",
                 median(ps_all99), 100 * median(ps_frac), median(ps_clean50), median(ps_clean99));
  }

  if (!o.json.empty()) {
    std::string out;
    JsonWriter w(&out);
    w.begin_object();
    w.key("corpus").begin_object();
    const auto& p = c.header().params;
    w.member("file", o.corpus).member("trace", std::string(p.trace, strnlen(p.trace, 64)));
    w.member("workers", p.workers).member("duplication", p.duplication);
    w.member("length_factor", p.length_factor).member("block_tokens", p.block_tokens);
    w.member("pool_blocks", p.pool_blocks).member("seed", p.seed);
    w.member("requests", t.requests).member("lookups", t.lookups);
    w.member("lookup_blocks", t.lookup_blocks).member("stored_blocks", t.stored_blocks);
    w.member("removed_blocks", t.removed_blocks).member("block_ops", t.block_ops());
    w.member("events", t.events).member("batches", t.batches);
    w.member("distinct_blocks", t.distinct_blocks).member("peak_memberships", t.peak_memberships);
    w.end_object();
    w.key("method").begin_object();
    w.member("block_ops", kOpsMethod).member("floors", kFloorMethod);
    w.member("memory", allocator_stats_available() ? kMemoryMethod : "unavailable (no jemalloc)");
    w.end_object();
    w.member("chain_reads", o.cold_chains ? "cold" : "warm");
    w.member("capacity_hint_blocks",
             o.capacity_hint ? uint64_t{c.header().params.pool_blocks} : uint64_t{0});
    w.member("hardware_threads", std::thread::hardware_concurrency());
    w.member("timing_overhead_ns", clock_ns).member("load_average_at_start", load[0]);
    w.member("stalls_per_second", stalls.per_second)
        .member("stall_lost_fraction", stalls.lost_fraction);
    w.key("floors").begin_array();
    for (const Floors& f : floors) {
      w.begin_object().member("block_ops_per_s", f.block_ops_per_s);
      w.member("event_ns_per_block", f.event_ns_per_block);
      write_by_kind(w, "event_by_kind", f.event_by_kind);
      w.member("lookup_ns_per_block", f.lookup_ns_per_block).member("wall_s", f.wall_s);
      w.member("cpu_s", f.cpu_s);
      w.end_object();
    }
    w.end_array();
    w.key("runs").begin_array();
    for (const IndexRun& ir : runs) {
      const SingleRun& s = ir.single;
      w.begin_object().member("index", ir.kind).member("run", ir.run);
      w.key("single").begin_object();
      w.member("block_ops_per_s", s.block_ops_per_s).member("wall_s", s.wall_s);
      w.member("cpu_s", s.cpu_s).member("block_ops_per_cpu_s", s.block_ops / s.cpu_s);
      write_percentiles(w, "lookup", s.lookup);
      write_percentiles(w, "apply", s.apply);
      w.member("hit_blocks", s.hit_blocks);
      w.member("orphan_events", uint64_t{s.totals.orphan_events});
      w.member("unknown_removals", uint64_t{s.totals.unknown_removals});
      w.member("memberships", s.final_stats.memberships);
      w.member("resident_blocks", s.final_stats.resident_blocks);
      w.key("memory").begin_object();
      w.member("available", s.memory.available).member("memberships", s.memory.memberships);
      w.member("allocated_delta_bytes", s.memory.allocated_delta);
      w.member("bytes_per_membership", s.memory.bytes_per_membership());
      w.member("self_counted_bytes", s.memory.self_counted_bytes);
      w.member("self_bytes_per_membership", s.memory.self_bytes_per_membership());
      w.end_object();
      if (ir.apply_by_kind) {
        write_by_kind(w, "apply_by_kind", *ir.apply_by_kind);
        write_by_kind(w, "record_maps_alone", *ir.record_maps_alone);
      }
      if (ir.pause_split) {
        w.key("pause_split").begin_object();
        w.member("pauses_per_second", ir.pause_split->pauses_per_second);
        w.member("overlapped", ir.pause_split->overlapped);
        w.member("overlapped_fraction", ir.pause_split->overlapped_fraction);
        write_percentiles(w, "all", ir.pause_split->all);
        write_percentiles(w, "clean", ir.pause_split->clean);
        w.end_object();
      }
      w.end_object();
      w.key("concurrent").begin_array();
      for (const ConcurrentRun& cr : ir.concurrent) {
        w.begin_object().member("lanes", cr.lanes).member("readers", cr.readers);
        w.member("offered_block_ops_per_s", cr.offered_block_ops_per_s);
        w.member("achieved_block_ops_per_s", cr.achieved_block_ops_per_s);
        w.member("kept_up", cr.kept_up).member("wall_s", cr.wall_s);
        write_percentiles(w, "lookup", cr.lookup);
        write_percentiles(w, "apply", cr.apply);
        w.end_object();
      }
      w.end_array();
      w.end_object();
    }
    w.end_array();
    w.end_object();
    out += "\n";
    if (o.json == "-") {
      std::fputs(out.c_str(), stdout);
    } else {
      std::ofstream f(o.json);
      f << out;
      if (!f) {
        std::fprintf(stderr, "kvgate-bench-index: cannot write %s\n", o.json.c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace kvgate::bench

int main(int argc, char** argv) {
  kvgate::bench::Options o;
  CLI::App app{
      "Replays a Mooncake index corpus (built by kvgate-corpus) into KV indexers and measures\n"
      "them. Per run and indexer: a single-threaded replay of every op in corpus order (block\n"
      "ops/s, lookup and apply latency, bytes per membership), then the same corpus with\n"
      "--lanes event threads (each owning the holders with id % lanes == lane, so a holder's\n"
      "batches stay in order) and --readers query threads, each op released when the offered\n"
      "rate reaches it (--rate, block ops/s; 0 = as fast as possible). Indexers that are not\n"
      "concurrent run there behind make_synchronized()'s reader-writer lock. Each run also\n"
      "measures the floors: the same data through one hash-map insert/erase per event block and\n"
      "one compare per lookup block.",
      "kvgate-bench-index"};
  app.add_option("--corpus", o.corpus, "corpus file from kvgate-corpus")->required();
  app.add_option("--kv-index", o.kinds, "indexers to measure: reference, positional, chain")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--runs", o.runs, "repetitions (tables report medians)")->capture_default_str();
  app.add_option("--lanes", o.lanes, "event lanes in the concurrent replay")->capture_default_str();
  app.add_option("--readers", o.readers, "query threads in the concurrent replay")
      ->capture_default_str();
  app.add_option("--rate", o.rates, "offered block ops/s for the concurrent replay (0: unpaced)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_flag("!--no-concurrent", o.concurrent, "skip the concurrent replay");
  app.add_flag(
      "!--no-capacity-hint", o.capacity_hint,
      "do not tell the indexers each holder's KV pool (the corpus's pool blocks) before a "
      "replay, as the gateway does when an engine reports it: they grow as the pools fill");
  app.add_flag("--cold-chains", o.cold_chains,
               "hand each lookup its chain straight from the corpus file's memory (cold), instead "
               "of copied into a per-thread buffer first as the gateway copies a request's chain "
               "(the cost of reading the input, which the gateway does not pay)");
  app.add_flag("--chain-detail", o.chain_detail,
               "chain index: print where its bytes are at the end of the single-threaded replay, "
               "its lookup latency by runs walked and by chain length, and its apply cost by event "
               "kind beside its "
               "record maps' alone (two more replays of the events), and its lookup latency "
               "apart from machine pauses (one more single-threaded replay, beside a thread on "
               "another core that records when the machine stopped)");
  app.add_option("--json", o.json,
                 "write the results as JSON to this file ('-': stdout, the "
                 "table then goes to stderr)");
  CLI11_PARSE(app, argc, argv);
  if (o.runs == 0) o.runs = 1;
  return kvgate::bench::run(o);
}
