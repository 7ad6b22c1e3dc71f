// The Mooncake index corpus file: a deterministic, interleaved stream of lookups and holder event
// batches that `kvgate-corpus` writes and `kvgate-bench-index` replays into an indexer.
//
// Format, version 1. Every integer is little-endian; every record starts and ends on an 8-byte
// boundary, so a loaded file is an array of u64 words whose hash arrays the replay hands to the
// indexer in place.
//
//   header, 256 bytes (CorpusHeader below):
//     magic "KVGCORP1", u32 version = 1, u32 header_bytes = 256,
//     parameters (workers, duplication, length factor, block tokens, pool blocks, seeds, trace),
//     totals (requests, lookups, lookup blocks, stored / removed blocks, events, batches,
//     distinct blocks, peak and final memberships, records),
//     u64 payload_bytes, u64 payload_xxh3 (XXH3-64 of the payload, seed 0),
//     u64 header_xxh3 (XXH3-64 of the header's first 248 bytes, seed 0)
//   payload, records back to back:
//     lookup: u32 tag = 1, u32 n, then n u64 sequence hashes (the request's chain)
//     batch:  u32 tag = 2, u32 holder, u32 n_events, u32 0, then per event:
//             u8 kind (0 stored, 1 removed, 2 cleared), u8 tier (0..3), u8 has_parent, u8 0,
//             u32 n, u64 parent, n u64 engine hashes, and for a stored event n u64 local hashes
//
// A file is checked completely when it is loaded (sizes, checksums, every record's bounds and
// enums, and the totals against the records), so a corrupt or truncated file is an error naming
// what is wrong and at which byte, never a crash, and the replay loop needs no checks.
//
// Threading: a loaded Corpus is immutable; read it from any number of threads.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/index/indexer.h"

namespace kvgate::corpus {

inline constexpr char kMagic[8] = {'K', 'V', 'G', 'C', 'O', 'R', 'P', '1'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kTagLookup = 1;
inline constexpr uint32_t kTagBatch = 2;

struct CorpusParams {
  uint32_t workers = 0;
  uint32_t duplication = 0;
  uint32_t length_factor = 0;
  uint32_t block_tokens = 0;
  uint32_t pool_blocks = 0;
  uint32_t reserved = 0;
  uint64_t seed = 0;
  uint64_t hash_seed = 0;
  char trace[64] = {};  // the trace's file name, NUL-padded
};

struct CorpusTotals {
  uint64_t requests = 0;
  uint64_t lookups = 0;
  uint64_t lookup_blocks = 0;
  uint64_t stored_blocks = 0;
  uint64_t removed_blocks = 0;
  uint64_t events = 0;
  uint64_t batches = 0;
  uint64_t distinct_blocks = 0;   // distinct sequence hashes over every lookup
  uint64_t peak_memberships = 0;  // most (worker, block) pairs resident at once
  uint64_t final_memberships = 0;
  uint64_t records = 0;
  // Lookup blocks + stored blocks + removed blocks: the benchmark's unit of work.
  uint64_t block_ops() const { return lookup_blocks + stored_blocks + removed_blocks; }
};

struct CorpusHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  CorpusParams params;
  CorpusTotals totals;
  uint64_t payload_bytes;
  uint64_t payload_xxh3;
  uint8_t reserved[256 - 8 - 8 - sizeof(CorpusParams) - sizeof(CorpusTotals) - 3 * 8];
  uint64_t header_xxh3;
};
static_assert(sizeof(CorpusHeader) == 256);

// Streams a corpus to a file. Totals other than distinct blocks and memberships are counted here.
class CorpusWriter {
 public:
  ~CorpusWriter();
  static Result<std::unique_ptr<CorpusWriter>> open(const std::string& path);
  Status lookup(std::span<const SeqHash> chain);
  Status batch(HolderId holder, std::span<const index::Event> events);
  // Writes the header; the writer is done afterwards.
  Status finish(const CorpusParams& params, uint64_t requests, uint64_t distinct_blocks,
                uint64_t peak_memberships, uint64_t final_memberships);
  const CorpusTotals& totals() const { return totals_; }

 private:
  CorpusWriter(std::FILE* f, std::string path);
  Status write(const void* data, size_t bytes);
  std::FILE* f_;
  std::string path_;
  void* xxh_state_;  // XXH3_state_t, kept out of this header
  CorpusTotals totals_;
  uint64_t payload_bytes_ = 0;
};

// A corpus in memory, checked, with every record indexed for replay.
class Corpus {
 public:
  struct Op {
    enum class Kind : uint8_t { kLookup, kBatch };
    Kind kind;
    uint32_t index;  // into lookups() or batches()
  };
  struct Batch {
    HolderId holder;
    uint32_t first_event;
    uint32_t event_count;
    uint32_t stored_blocks;
    uint32_t removed_blocks;
  };

  Corpus(Corpus&&) = default;
  Corpus& operator=(Corpus&&) = default;
  Corpus(const Corpus&) = delete;  // records point into words_

  static Result<Corpus> load(const std::string& path);
  // Checks and indexes a file's bytes (`words` holds them, zero-padded to whole words).
  static Result<Corpus> parse(std::vector<uint64_t> words, size_t bytes, std::string name);

  const CorpusHeader& header() const { return header_; }
  const std::vector<Op>& ops() const { return ops_; }
  size_t lookup_count() const { return lookups_.size(); }
  std::span<const SeqHash> lookup(size_t i) const { return lookups_[i]; }
  const std::vector<Batch>& batches() const { return batches_; }
  std::span<const index::Event> events(const Batch& b) const {
    return std::span<const index::Event>(events_).subspan(b.first_event, b.event_count);
  }
  uint64_t file_bytes() const { return bytes_; }

 private:
  Corpus() = default;
  std::vector<uint64_t> words_;
  size_t bytes_ = 0;
  CorpusHeader header_{};
  std::vector<Op> ops_;
  std::vector<std::span<const SeqHash>> lookups_;
  std::vector<Batch> batches_;
  std::vector<index::Event> events_;
};

// "workers 128, duplication 20, ..." and the totals, one per line, for people.
std::string describe(const CorpusHeader& h);

}  // namespace kvgate::corpus
