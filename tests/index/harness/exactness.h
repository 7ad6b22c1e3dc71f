// The exactness harness: replays a seeded random corpus (corpus_generator.h) into the indexer
// under test and into a ReferenceIndexer side by side, and compares them after every batch:
// the batch's ApplyResult, the stats' counts, the batch holder's memberships, and every lookup the
// batch's chains make; the whole content every `full_compare_every` batches and at the end.
// The first disagreement ends the run with an error naming the seed, the batch and the
// difference, so `run_exactness` with that seed replays it.
//
// Indexer-agnostic: it takes a factory, so every indexer (and later its sharded or concurrent
// forms) runs the same corpus.
//
// With lanes > 1 or readers > 0 it runs in phases of `sync_every` steps: the phase's batches
// apply on `lanes` threads, each owning the holders with id % lanes == its lane (so one holder's
// batches stay in order), while `readers` threads issue lookups whose answers are checked only
// for shape (they race the writes); at the end of each phase the results, the whole content and
// every lookup of the phase are compared with the reference. The indexer must allow that
// concurrency (wrap it with make_synchronized() in the factory otherwise).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kvgate/core/result.h"
#include "kvgate/index/indexer.h"

namespace kvgate::index::harness {

using IndexerFactory = std::function<std::unique_ptr<Indexer>()>;

struct HarnessOptions {
  uint64_t seed = 1;
  uint64_t events = 300'000;  // the run ends at the first step reaching this many events
  uint32_t holders = 12;
  uint32_t holder_capacity = 384;
  uint64_t full_compare_every = 2048;  // batches (sequential mode)
  uint32_t lanes = 1;
  uint32_t readers = 0;
  uint32_t sync_every = 512;  // steps per phase (concurrent mode)
  IndexerOptions index_options;
};

struct HarnessReport {
  uint64_t events = 0;
  uint64_t batches = 0;
  uint64_t holder_removals = 0;
  uint64_t lookups = 0;
  uint64_t lookup_blocks = 0;
  uint64_t matched_blocks = 0;  // sum of any_depth over every lookup answer
  uint64_t content_checks = 0;  // per-holder membership comparisons
  uint64_t full_checks = 0;     // whole-content comparisons
  uint64_t peak_memberships = 0;
  uint64_t racing_lookups = 0;  // lookups the reader threads made (concurrent mode)
  ApplyResult totals;           // the reference's, over every batch
  std::string summary() const;
};

// Runs one seed. An error means the indexer disagreed with the reference (or the factory failed).
Result<HarnessReport> run_exactness(const IndexerFactory& make, const HarnessOptions& options);

// The options a test should use: `base`, with the event count raised by the long mode.
//   KVGATE_EXACTNESS_EVENTS=N   events per seed
//   KVGATE_EXACTNESS_LONG=1     3,000,000 events per seed (unless EVENTS is set)
HarnessOptions options_from_env(HarnessOptions base);
// The seeds a test should run: `defaults`, or KVGATE_EXACTNESS_SEEDS=1,2,3 (or the long mode's
// eight seeds).
std::vector<uint64_t> seeds_from_env(std::vector<uint64_t> defaults);

}  // namespace kvgate::index::harness
