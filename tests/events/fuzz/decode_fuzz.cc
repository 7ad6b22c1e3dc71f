// libFuzzer target for the KV-event batch decoder (built only with KVGATE_BUILD_FUZZ; the fuzz
// preset adds ASan+UBSan). Run by tools/ci-extra/fuzz.sh with the seed corpus in corpus/.
//
// Beyond "no crash, no leak, no UB", it checks the decoder's accounting (every event the batch
// announced is decoded or dropped with a reason) and feeds the result through normalization and
// the engine-hash check, which read the decoded buffers.
#include <cstdint>
#include <cstdlib>

#include "kvgate/events/decode.h"
#include "kvgate/events/hash_check.h"
#include "kvgate/events/normalize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvgate::events;
  static DecodeLimits limits = [] {
    DecodeLimits l;
    l.max_array = 1 << 12;
    l.max_events = 1 << 12;
    return l;
  }();
  static BatchDecoder decoder(limits);
  static DecodedBatch batch;
  static Normalizer normalizer;
  static EngineHashChecker checker;
  if (!decoder.decode(std::span<const uint8_t>(data, size), &batch)) {
    if (!batch.rejected || !batch.events.empty()) std::abort();
    return 0;
  }
  if (batch.events.size() + batch.dropped_total() != batch.events_in_payload) std::abort();
  for (const DecodedEvent& e : batch.events) {
    if (e.hash_begin + e.hash_count > batch.hashes.size()) std::abort();
    if (e.token_begin + e.token_count > batch.tokens.size()) std::abort();
    if (e.pair_begin + e.pair_count > batch.pair_words.size()) std::abort();
  }
  checker.check(batch);
  NormalizedBatch out;
  normalizer.normalize(batch, &out);
  (void)to_wire(batch);
  return 0;
}
