// The replay engine of kvgate-bench-index: drives a loaded corpus into any indexer and measures
// it, single-threaded and with event lanes plus query threads at an offered rate, and measures
// the floors (what the same data costs with nothing but a hash map and a compare loop).
//
// Its own cost per operation is one switch, two clock reads and one store into a preallocated
// latency array, small beside a microsecond lookup.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvgate/corpus/corpus_file.h"
#include "kvgate/index/indexer.h"

namespace kvgate::bench {

// Where a lookup's chain is read from. The gateway hashes a request's chain and copies it just
// before its lookup (app/proxy.cc), so the index reads a chain that is in the core's cache. The
// corpus holds 23 M chain blocks (184 MB); handing the index the corpus's memory charges each
// lookup with cold reads of its own input that the gateway never pays. kWarm copies each chain into
// a reused buffer of the replaying thread before the clock starts, as the gateway copies it; kCold
// hands over the corpus's memory.
enum class ChainReads { kWarm, kCold };

// How a replay feeds the index. `announce_capacity`: first tell it every holder's KV pool (the
// corpus's pool blocks), as the gateway does when an engine reports it at discovery
// (Indexer::expect_capacity).
struct ReplaySetup {
  bool announce_capacity = true;
  ChainReads chains = ChainReads::kWarm;
};

// A replaying thread's view of lookup chains under ChainReads (one per thread).
class ChainFeed {
 public:
  explicit ChainFeed(ChainReads reads) : warm_(reads == ChainReads::kWarm) {
    buffer_.reserve(4096);
  }
  std::span<const SeqHash> operator()(std::span<const SeqHash> chain) {
    if (!warm_) return chain;
    buffer_.assign(chain.begin(), chain.end());
    return buffer_;
  }

 private:
  bool warm_;
  std::vector<SeqHash> buffer_;
};

struct Percentiles {
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0, mean_us = 0;
  uint64_t count = 0;
};
// Summarizes nanosecond samples (reordered in place).
Percentiles percentiles(std::vector<uint32_t>& ns);

struct MemoryReading {
  bool available = false;           // jemalloc statistics were readable
  uint64_t memberships = 0;         // at the sample with the most memberships
  uint64_t allocated_delta = 0;     // allocated bytes then, minus the baseline before the build
  uint64_t self_counted_bytes = 0;  // the index's stats().bytes then
  uint64_t samples = 0;
  double bytes_per_membership() const {
    return memberships ? static_cast<double>(allocated_delta) / memberships : 0;
  }
  double self_bytes_per_membership() const {
    return memberships ? static_cast<double>(self_counted_bytes) / memberships : 0;
  }
};

// CPU seconds the calling thread has run (excludes time preempted by other processes).
double thread_cpu_seconds();

struct SingleRun {
  double wall_s = 0;
  double cpu_s = 0;  // the replay thread's CPU time: on a shared machine, the less noisy figure
  uint64_t block_ops = 0;
  double block_ops_per_s = 0;
  Percentiles lookup, apply;
  uint64_t hit_blocks = 0;  // per lookup, the deepest device match over holders, summed
  index::ApplyResult totals;
  index::IndexStats final_stats;
  MemoryReading memory;
};

struct ConcurrentRun {
  uint32_t lanes = 0, readers = 0;
  double offered_block_ops_per_s = 0;  // 0: unpaced (capacity)
  double achieved_block_ops_per_s = 0;
  bool kept_up = false;  // achieved >= 99% of offered (always true unpaced)
  double wall_s = 0;
  Percentiles lookup, apply;
};

// What an indexer's writes cost per block, by event kind.
struct ApplyByKind {
  double stored_ns_per_block = 0;
  double removed_ns_per_block = 0;
  uint64_t sink = 0;  // keeps measured work observable
};

struct Floors {
  double wall_s = 0;
  double cpu_s = 0;
  double block_ops_per_s = 0;
  double event_ns_per_block = 0;   // one flat-hash-map insert or erase per stored/removed block
  ApplyByKind event_by_kind;       // the same, stored blocks (inserts) and removed (erases) apart
  double lookup_ns_per_block = 0;  // one sequential 64-bit compare per lookup block
};

// What the replay adds per timed call: one pair of steady_clock reads, in nanoseconds.
double clock_pair_ns();

// How often the machine takes the core away: a thread reading the clock in a tight loop for
// `seconds` sees gaps where it did not run (host interrupts, a VM's vCPU descheduled). A lookup
// that meets a 2 to 5 µs gap reads 2 to 5 µs slower, so when such gaps come every few tens of µs
// they set the lookup p99, whatever the index does.
struct Stalls {
  double per_second = 0;     // gaps of 2 µs or more
  double lost_fraction = 0;  // of the time, in gaps of 0.5 µs or more
};
Stalls measure_stalls(double seconds);

// The single-threaded replay again, each lookup's start and duration recorded, beside a sentinel
// thread on another core reading the clock in a tight loop and recording its gaps of 1 µs or more.
// On a VM whose vCPUs are all paused together (this machine: 97% of gaps coincide on its two
// cores, measured), a lookup that overlaps a sentinel gap most likely met a pause. Splits lookup
// latency into all lookups and those no gap overlapped: the index's own tail beside the machine's.
// (A lookup overlapping a gap the other core alone saw is dropped too, so the split errs towards
// dropping.) Nothing measured without a second hardware thread.
struct PauseSplit {
  bool measured = false;
  double pauses_per_second = 0;  // sentinel gaps of 1 µs or more
  uint64_t overlapped = 0;       // lookups a gap overlapped
  double overlapped_fraction = 0;
  Percentiles all, clean;  // every lookup; those no gap overlapped
};
PauseSplit run_pause_split(const corpus::Corpus& c, index::Indexer& index,
                           const ReplaySetup& setup);

uint64_t allocated_bytes_or_zero();
bool allocator_stats_available();

// Tells `index` every holder's KV pool (the corpus's pool blocks, Indexer::expect_capacity).
void announce_capacity(const corpus::Corpus& c, index::Indexer& index);

// The capacity announcement comes after the memory baseline, so what the index sizes up front is
// counted. `chain_detail`: for a chain index,
// also print (stderr) its memory breakdown at the end and its lookup latency by the number of
// runs each lookup walked.
SingleRun run_single(const corpus::Corpus& c, index::Indexer& index, const ReplaySetup& setup,
                     bool chain_detail = false);
ConcurrentRun run_concurrent(const corpus::Corpus& c, index::Indexer& index,
                             const ReplaySetup& setup, uint32_t lanes, uint32_t readers,
                             double offered_block_ops_per_s);
Floors run_floors(const corpus::Corpus& c);

// The corpus's events alone (no lookups), one event per apply() call into a fresh `index`, timed
// per event: what the index pays per stored and per removed block (apply_by_kind.cc).
ApplyByKind run_apply_by_kind(const corpus::Corpus& c, index::Indexer& index,
                              bool announce_capacity);
// The same events through nothing but the chain index's per-holder record maps (engine hash ->
// block place), used as its writers use them: each stored block's find and insert, each removed
// block's find and erase. The part of the chain index's apply that is one hash-map operation per
// block, to set beside the floor's.
ApplyByKind run_record_maps_alone(const corpus::Corpus& c, bool announce_capacity);

}  // namespace kvgate::bench
