// EngineHashChecker: reproduces a worker's own block hashes from the token ids in its stored
// events and counts how many match what it published. A worker that hashes differently from what
// the gateway was told (another algorithm, seed, block size or tokenizer) shows up as a high
// mismatch ratio instead of a silently useless index.
//
// Per stored block: the digest of its parent (NONE_HASH / the SGLang salt root for a first block,
// else the digest this checker computed for the parent's engine hash, kept in a bounded FIFO map),
// then the scheme's digest of the block's tokens (and vLLM extra keys) compared with the block's
// engine hash. A block whose parent digest is unknown (evicted, or stored before the checker
// started) is counted as unchecked, as are the blocks after a mismatch in the same event.
//
// Scheme kAuto tries vLLM sha256_cbor (with the configured seed) and SGLang on first blocks until
// one matches, then keeps it; until then parented blocks are unchecked and unmatched first blocks
// count as mismatches.
//
// Threading: one thread at a time (the holder's subscription).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/result.h"
#include "kvgate/events/decode.h"
#include "kvgate/events/engine_hash.h"

namespace kvgate::events {

enum class HashScheme { kOff, kAuto, kVllmSha256Cbor, kSglang };
std::string_view hash_scheme_name(HashScheme s);
Result<HashScheme> parse_hash_scheme(std::string_view s);  // off, auto, vllm-sha256-cbor, sglang

struct HashCheckOptions {
  HashScheme scheme = HashScheme::kAuto;
  // vLLM's NONE_HASH seed: the worker's PYTHONHASHSEED if set, else vLLM's fixed default.
  std::string vllm_seed = std::string(VllmSha256Cbor::kDefaultSeed);
  size_t max_digests = 8192;  // parent digests remembered per holder
};

struct HashCheckCounts {
  uint64_t matched = 0;
  uint64_t mismatched = 0;
  uint64_t unchecked = 0;
  // mismatched / (matched + mismatched); 0 before any checked block.
  double mismatch_ratio() const {
    const uint64_t n = matched + mismatched;
    return n == 0 ? 0.0 : static_cast<double>(mismatched) / static_cast<double>(n);
  }
};

class EngineHashChecker {
 public:
  explicit EngineHashChecker(HashCheckOptions options = {});

  // Checks every stored event of `batch`.
  void check(const DecodedBatch& batch);
  // Forgets remembered digests (the holder was cleared or its publisher restarted).
  void reset();

  const HashCheckCounts& counts() const { return counts_; }
  // The scheme in use: the configured one, or what kAuto settled on (kAuto until then).
  HashScheme scheme() const { return active_; }

 private:
  // Digest of block `i` of `e` under `scheme` with parent digest `parent` (nullptr: a first
  // SGLang block of an unsalted chain). nullopt: not reproducible (opaque extra keys).
  std::optional<Digest> digest(HashScheme scheme, const DecodedBatch& b, const DecodedEvent& e,
                               size_t i, const Digest* parent) const;
  std::optional<Digest> root(HashScheme scheme, const DecodedEvent& e) const;
  void check_event(const DecodedBatch& b, const DecodedEvent& e);
  void remember(EngineHash h, const Digest& d);

  HashCheckOptions options_;
  VllmSha256Cbor vllm_;
  HashScheme active_;
  HashCheckCounts counts_;
  absl::flat_hash_map<EngineHash, Digest> digests_;
  std::deque<EngineHash> order_;  // FIFO eviction of digests_
};

// HashQuarantine: whether a holder's stores may reach the index, judged from its engine-hash
// check. A publisher whose hashes the gateway once reproduced (the scheme is configured, or auto
// settled on one) and that then stops agreeing is not the engine it was: someone else on its port,
// a restart with another model or tokenizer. Its stores would name blocks no request meets, so
// the holder is emptied and nothing of it is indexed until its hashes agree again (routing then
// treats it as a worker that holds nothing and places requests by load).
//
// The ratio is judged over windows of `window_blocks` checked blocks (unchecked ones do not
// count): a window above `max_mismatch_ratio` starts a quarantine, one at or below it ends it.
// While auto has not settled on a scheme nothing is judged: a worker with another hash algorithm
// or seed shows its mismatch ratio and keeps routing (its index is still right: the index names
// blocks by the router's own hashes of their tokens).
//
// Threading: one thread at a time (the holder's subscription).
struct QuarantineOptions {
  double max_mismatch_ratio = 0.5;  // 0: off
  uint32_t window_blocks = 256;
};

class HashQuarantine {
 public:
  explicit HashQuarantine(QuarantineOptions options = {}) : options_(options) {}

  enum class Change { kNone, kEntered, kLeft };
  // The checker's counts now, and whether its scheme is known (not off, not an unsettled auto).
  Change update(const HashCheckCounts& counts, bool scheme_known);

  bool quarantined() const { return quarantined_; }
  uint64_t episodes() const { return episodes_; }
  // The mismatch ratio of the last window judged.
  double last_ratio() const { return last_ratio_; }

 private:
  QuarantineOptions options_;
  HashCheckCounts seen_;
  uint64_t window_matched_ = 0;
  uint64_t window_mismatched_ = 0;
  bool quarantined_ = false;
  uint64_t episodes_ = 0;
  double last_ratio_ = 0;
};

}  // namespace kvgate::events
